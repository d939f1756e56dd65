"""A helper handing work on to another kernel thread makes that one a helper too: an
fsync loop on ext4 over a loop device whose backing file is on the ext4 of another
loop device. The workload's fsyncs flush the upper loop device; its loop worker serves
each flush with an fsync of the backing file, which waits on the lower filesystem's
jbd2 thread: that thread, woken by the loop worker and never by the workload, is
recorded as a helper (its name, jbd2/<lower device>-8, is the kernel's)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from conftest import run
from iowhy.traceformat import read_trace

pytestmark = pytest.mark.bpf

LOOP = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)
for i in range(100):
    os.pwrite(fd, os.urandom(4096), i * 4096)
    os.fsync(fd)
"""


def test_the_lower_filesystems_jbd2_is_recorded(bpf, make_fs, tmp_path, iowhy_bin, request):
    lower, lower_mnt = make_fs("ext4", size_mib=256)
    img = lower_mnt / "upper.img"
    with open(img, "wb") as f:
        f.truncate(128 << 20)
    upper = run(["losetup", "--find", "--show", str(img)]).stdout.strip()
    request.addfinalizer(lambda: subprocess.run(["losetup", "-d", upper], capture_output=True))
    run(["mkfs.ext4", "-q", "-F", upper])
    mnt = tmp_path / "upper"
    mnt.mkdir()
    run(["mount", upper, str(mnt)])
    request.addfinalizer(lambda: subprocess.run(["umount", str(mnt)], capture_output=True))
    subprocess.run(["sync"], check=True)
    out = tmp_path / "chain.iowt"
    run([*iowhy_bin, "record", "-q", "-o", str(out), "--dev", upper, "--",
         "/usr/bin/python3", "-c", LOOP, str(mnt / "f")])
    tr = read_trace(str(out))
    rq = tr.records("request")
    low = (rq["dev_major"] == lower.major) & (rq["dev_minor"] == lower.minor)
    jbd2 = f"jbd2/{lower.name}-8".encode()
    submitters = {int(t) for t, c in zip(rq["tid"][low], rq["comm"][low])
                  if bytes(c).split(b"\0")[0] == jbd2}
    assert submitters, "the lower jbd2 wrote no journal block: not the premise"
    recorded = set(np.unique(tr.records("helper")["tid"]).tolist())
    assert submitters <= recorded, (sorted(submitters), sorted(recorded))
