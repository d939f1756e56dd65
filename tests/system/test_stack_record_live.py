"""`record --dev UPPER` on the demo's shape (a filesystem on a loop device whose backing
file lives on another disk): the devices below the given one are recorded too, so a
wait that ends with a completion on the lower disk is explained by that disk's
requests, not left as wait-other. The run ends with syncfs of the upper filesystem
(sync(2) would also wait on every other filesystem of the host). Checked against the
lower disk's own write count in /sys/block/<dev>/stat."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import run
from iowhy import abi
from iowhy.analysis import analyze
from iowhy.traceformat import read_trace

pytestmark = pytest.mark.bpf

WRITE_FILES = r"""
import os, sys
d = sys.argv[1]
for i in range(3000):
    with open(os.path.join(d, f"f{i}"), "wb") as f:
        f.write(os.urandom(4096 + (i % 7) * 1024))
"""


def _writes(name: str) -> int:
    return int(Path(f"/sys/block/{name}/stat").read_text().split()[4])


def test_dev_records_the_disk_under_a_loop_device(bpf, make_fs, tmp_path, iowhy_bin, request):
    lower, lower_mnt = make_fs("ext4", size_mib=512)
    img = lower_mnt / "upper.img"
    with open(img, "wb") as f:
        f.truncate(320 << 20)  # mkfs.xfs wants 300 MiB
    upper = run(["losetup", "--find", "--show", str(img)]).stdout.strip()
    request.addfinalizer(lambda: subprocess.run(["losetup", "-d", upper], capture_output=True))
    run(["mkfs.xfs", "-q", "-f", upper])
    mnt = tmp_path / "upper"
    mnt.mkdir()
    run(["mount", upper, str(mnt)])
    request.addfinalizer(lambda: subprocess.run(["umount", str(mnt)], capture_output=True))
    subprocess.run(["sync"], check=True)

    w0 = _writes(lower.name)
    out = tmp_path / "stack.iowt"
    run([*iowhy_bin, "record", "-q", "-o", str(out), "--dev", upper, "--", "sh", "-c",
         f"/usr/bin/python3 -c '{WRITE_FILES}' {mnt} && sync -f {mnt}"])
    lower_writes = _writes(lower.name) - w0

    tr = read_trace(str(out))
    names = {d["name"] for d in tr.meta["lower_devices"]}
    assert lower.name in names, tr.meta["lower_devices"]
    r = analyze(tr)
    devs = {d["name"]: d for d in r["devices"]}
    assert lower.name in devs, list(devs)
    # The lower disk's writes are in the trace: all of those its stat counted over the
    # run but the few it completed after the workload exited (the window's end) or
    # before the recorder started (its own filesystem's writeback).
    rq = tr.records("request")
    low = ((rq["dev_major"] == lower.major) & (rq["dev_minor"] == lower.minor)
           & (rq["op"] == abi.OP_WRITE))
    assert lower_writes > 10, lower_writes
    assert 0.75 * lower_writes <= int(low.sum()) <= lower_writes, (int(low.sum()), lower_writes)
    # With the lower disk recorded, nothing is left unexplained worth naming.
    el = r["elapsed_ns"]
    att = r["attribution_ns"]
    assert sum(att.values()) == el
    assert att["wait-other"] < 0.05 * el, (att, r.get("wait_other_by_waker_ns"))
