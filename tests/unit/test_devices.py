"""Device numbers: the dev_t key, and the request loader's device map with few and with
many devices (its per-pair comparisons stop at four devices; a search serves more)."""

from __future__ import annotations

import numpy as np
import pytest

import golden_traces as gt
from iowhy.analysis import analyze
from iowhy.model.devices import dev_key, dev_pair
from iowhy.model.requests import SUBCHUNK, load_requests, trace_window
from iowhy.traceformat import read_trace


def test_dev_key():
    assert dev_key(8, 17) == (8 << 20) | 17 and dev_pair(dev_key(259, 65535)) == (259, 65535)
    keys = dev_key(np.array([8, 253]), np.array([1, 3]))
    assert keys.tolist() == [dev_key(8, 1), dev_key(253, 3)]


@pytest.mark.parametrize("ndev", (1, 4, 6))
def test_request_devices(tmp_path, ndev):
    # Requests on ndev disks, in an order that mixes them within each copied slice and
    # meets a new device in a later slice; two are in the metadata.
    disks = [(8, 16 * i) for i in range(ndev)]
    g = np.random.default_rng(ndev)
    n = 2 * SUBCHUNK + 5
    which = g.integers(0, ndev, n)
    which[: SUBCHUNK] %= max(1, ndev - 1)  # the last disk first appears after a slice
    rows = [gt.req(1010 + i % 50, 1061 + i % 50, sector=1000 + 8 * i, dev=disks[w])
            for i, w in enumerate(which.tolist())]
    m = gt.meta()
    m["devices"] = [{"name": f"disk{i}", "major": d[0], "minor": d[1]}
                    for i, d in enumerate(disks[:2])]
    p = tmp_path / "t.iowt"
    gt.write_trace(p, end=1200, requests=rows, meta_obj=m)
    tr = read_trace(str(p))
    for threads in (1, 2):
        rq = load_requests(tr, trace_window(tr), threads=threads)
        assert rq.devices == sorted(set(disks[w] for w in which.tolist()))
        got = [rq.devices[i] for i in rq.dev.tolist()]
        assert got == [disks[w] for w in which.tolist()]
    r = analyze(tr)
    assert sorted(d["requests"] for d in r["devices"]) == \
        sorted(np.bincount(which, minlength=ndev).tolist())
