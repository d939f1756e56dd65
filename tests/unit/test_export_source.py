"""export/source.py: the exporters' model of a run takes the analysis' figures of every
request it analyzed, and computes only those of a device it set apart."""

from __future__ import annotations

import numpy as np

import tracebuilder as tb
from iowhy import abi
from iowhy.export.source import analysis_figures, request_model
from iowhy.traceformat import read_trace

FIGURES = ("cls", "queue_ns", "device_ns", "total_ns", "seek_sectors", "has_seek",
           "call_index", "flags")


def set_apart_trace(path):
    """The workload waits on writes to sdz, one inside its fsync; another process's
    requests on sdy (reads and writes, a metadata one, one never completed), which no
    wait names: the analysis sets sdy apart."""
    m = tb.meta()
    m["devices"].append({"name": "sdy", "major": 8, "minor": 16, "size_bytes": 1 << 30})
    reqs = [tb.req(1010, 1020, sector=50_000, seq=1),
            tb.req(1022, 1030, sector=50_008, seq=2)]
    for i, (op, sector, iflags) in enumerate(((abi.OP_WRITE, 60_000, 0),
                                              (abi.OP_READ, 10, 0),
                                              (abi.OP_WRITE, 90_000, abi.F_META),
                                              (abi.OP_WRITE, 70_000, 0))):
        reqs.append(tb.req(1031 + 10 * i, 1035 + 10 * i, sector=sector, seq=3 + i, flags=0,
                           dev=(8, 16), tid=999, op=op, iflags=iflags, insert=1030 + 10 * i))
    reqs[-1].update(done_ns=0, flags_u16=abi.RQ_LOST_DONE)
    return tb.write_trace(path, requests=reqs, meta_obj=m,
                          fsyncs=[tb.fsync(100, 1005, 1025)],
                          offcpu=[tb.off(100, 1010, 1020, waker=0, ctx=abi.WCTX_HARDIRQ,
                                         rq_seq=1, syscall=74),
                                  tb.off(100, 1022, 1030, waker=0, ctx=abi.WCTX_HARDIRQ,
                                         rq_seq=2, syscall=1)])


def test_the_model_is_the_same_whoever_computes_it(tmp_path):
    tr = read_trace(set_apart_trace(tmp_path / "t.iowt"))
    roles = analysis_figures(tr)["roles"]
    apart = roles["cls"] < 0
    assert apart.sum() == 4 and (~apart).sum() == 2  # the case under test
    assert (roles["call"][~apart] >= 0).any()
    got, own = request_model(tr, roles), request_model(tr)
    for k in FIGURES:
        assert np.array_equal(getattr(got, k), getattr(own, k)), k
    assert got.has_seek[apart].any() and (got.queue_ns[apart] > 0).any()


def test_the_analysed_requests_figures_are_the_analysis(tmp_path):
    """What the analysis says of a request it analyzed is taken as it is (here made
    different on purpose); a request set apart has the model's own figures."""
    tr = read_trace(set_apart_trace(tmp_path / "t.iowt"))
    roles = analysis_figures(tr)["roles"]
    apart = roles["cls"] < 0
    own = request_model(tr)
    marked = dict(roles)
    for k in ("device_ns", "queue_ns", "total_ns", "seek", "call"):
        marked[k] = np.where(apart, roles[k], 7_777)
    marked["cls"] = np.where(apart, roles["cls"], 3).astype(np.int8)
    got = request_model(tr, marked)
    for k in ("device_ns", "queue_ns", "total_ns", "seek_sectors", "call_index", "cls"):
        v = getattr(got, k)
        assert (v[~apart] == (3 if k == "cls" else 7_777)).all(), k
        assert np.array_equal(v[apart], getattr(own, k)[apart]), k
