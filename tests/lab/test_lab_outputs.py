"""The lab's output files follow iowhy.outfile's rules: a symlink or non-regular file at
an output path is refused before any disk is made; every file it writes is mode 0600
and, under sudo, the invoking user's. (The trace itself is the recorder's.)"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, need

pytestmark = pytest.mark.lab

IOWHY = REPO / ".venv" / "bin" / "iowhy"
RID = "fsync-tasks-1-ext4-ram"


def lab_run(tmp: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    script = ("mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing\n"
              f'exec {IOWHY} lab run fsync-tasks-1 --fs ext4 --disk ram --out {tmp / "out"} '
              f'--workdir {tmp / "work"}\n')
    return subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c", script],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, IOWHY_LAB_STATE=str(tmp / "state"), **(env or {})))


@pytest.fixture
def lab_ready(root):
    need(IOWHY.exists(), "iowhy not built: run `make`")
    need(Path("/dev/fuse").exists(), "needs /dev/fuse")
    need((REPO / "lab" / "emudisk").exists(), "lab/emudisk not built: run `make`")
    for tool in ("unshare", "losetup", "mkfs.ext4"):
        need(shutil.which(tool) is not None, f"{tool} not installed")


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_bad_output_path_refused_before_the_disk(lab_ready, tmp_path, kind):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    bad = out / f"{RID}.report.html"
    if kind == "symlink":
        bad.symlink_to(victim)
    else:
        os.mkfifo(bad)
    p = lab_run(tmp_path)
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    what = "a symlink" if kind == "symlink" else "a FIFO"
    assert lines == [lines[0]] and lines[0].startswith(f"iowhy: refusing to write {bad}: "
                                                       f"it is {what}"), p.stderr
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir())


def test_outputs_are_0600_and_the_sudo_users(lab_ready, tmp_path):
    need(Path("/sys/kernel/btf/vmlinux").exists(), "needs a kernel with BTF")
    p = lab_run(tmp_path, {"SUDO_UID": "4242", "SUDO_GID": "4343"})
    assert p.returncode in (0, 3), p.stderr     # 3: a figure out of tolerance (busy VM)
    st = (tmp_path / "out").stat()      # made by the lab: the user can clear it
    assert (st.st_uid, st.st_gid) == (4242, 4343)
    files = {f.name: f.stat() for f in (tmp_path / "out").iterdir()}
    ours = [n for n in files if not n.endswith(".iowt")]
    assert sorted(ours) == sorted(f"{RID}{ext}" for ext in (
        ".record.log", ".report.html", ".report.json", ".report.txt", ".run.json",
        ".truth.bin")), files
    for n in ours:
        st = files[n]
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4242, 4343, 0o600), n
    assert not any((tmp_path / "work").iterdir())
    assert not list((tmp_path / "state").glob("run-*"))
