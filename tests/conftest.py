"""Shared fixtures: privilege gates, loop devices, filesystems, the recorder.

Every loop device, mount and process a fixture makes is torn down in a finalizer,
even when the test fails; fixtures touch only what they created.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REQUIRE_BPF = os.environ.get("IOWHY_REQUIRE_BPF") == "1"


def need(cond: bool, why: str) -> None:
    """Skip when a privilege/kernel feature is missing; fail instead under IOWHY_REQUIRE_BPF=1."""
    if cond:
        return
    if REQUIRE_BPF:
        pytest.fail(f"IOWHY_REQUIRE_BPF=1 and {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture
def root():
    need(os.geteuid() == 0, "needs root")


@pytest.fixture
def bpf(root):
    need(Path("/sys/kernel/btf/vmlinux").exists(), "needs a kernel with BTF")
    need(recorder_path().exists(), f"recorder not built ({recorder_path()}): run `make`")


def recorder_path() -> Path:
    return Path(os.environ.get("IOWHY_RECORDER", REPO / "probes" / "iowhy-record"))


def run(cmd, check=True, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    p = subprocess.run(cmd, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd!r} exited {p.returncode}: {p.stderr.strip()}")
    return p


class Loop:
    """A loop device over a sparse file, detached at teardown."""

    def __init__(self, dev: str, backing: Path):
        self.dev = dev
        self.backing = backing
        self.name = os.path.basename(dev)
        st = os.stat(dev)
        self.major, self.minor = os.major(st.st_rdev), os.minor(st.st_rdev)

    def set_write_cache(self, mode: str) -> None:
        Path(f"/sys/block/{self.name}/queue/write_cache").write_text(mode + "\n")

    def write_cache(self) -> str:
        return Path(f"/sys/block/{self.name}/queue/write_cache").read_text().strip()


@pytest.fixture
def make_loop(root, tmp_path, request):
    """make_loop(size_mib=512, backing_dir=None) -> Loop."""
    made: list[Loop] = []

    def _make(size_mib: int = 512, backing_dir: Path | None = None) -> Loop:
        d = backing_dir or tmp_path
        f = d / f"disk{len(made)}.img"
        with open(f, "wb") as fh:
            fh.truncate(size_mib << 20)
        dev = run(["losetup", "--find", "--show", str(f)]).stdout.strip()
        lp = Loop(dev, f)
        made.append(lp)
        # The write_cache setting outlives the binding on this kernel: start from the
        # loop default, and give it back that way.
        lp.set_write_cache("write back")
        return lp

    def _teardown():
        for lp in reversed(made):
            try:
                lp.set_write_cache("write back")
            except OSError:
                pass
            subprocess.run(["losetup", "-d", lp.dev], capture_output=True)

    request.addfinalizer(_teardown)
    return _make


MKFS = {
    "ext4": ["mkfs.ext4", "-q", "-F"],
    "xfs": ["mkfs.xfs", "-q", "-f"],
    "btrfs": ["mkfs.btrfs", "-q", "-f"],
}


@pytest.fixture
def make_fs(make_loop, tmp_path, request):
    """make_fs(fstype, size_mib=512, mkfs_args=(), mount_opts=None) -> (Loop, mountpoint)."""
    mounts: list[Path] = []

    def _make(fstype: str, size_mib: int = 512, mkfs_args=(), mount_opts=None):
        need(shutil.which(MKFS[fstype][0]) is not None, f"{MKFS[fstype][0]} not installed")
        lp = make_loop(size_mib)
        run([*MKFS[fstype], *mkfs_args, lp.dev])
        mnt = tmp_path / f"mnt{len(mounts)}"
        mnt.mkdir()
        cmd = ["mount"] + (["-o", mount_opts] if mount_opts else []) + [lp.dev, str(mnt)]
        run(cmd)
        mounts.append(mnt)
        return lp, mnt

    def _teardown():
        for m in reversed(mounts):
            for _ in range(50):
                if subprocess.run(["umount", str(m)], capture_output=True).returncode == 0:
                    break
                if not os.path.ismount(m):
                    break
                time.sleep(0.1)

    request.addfinalizer(_teardown)
    return _make


@pytest.fixture
def iowhy_bin() -> list[str]:
    """The CLI as the user runs it: the venv's console script when installed."""
    venv = REPO / ".venv" / "bin" / "iowhy"
    if venv.exists():
        return [str(venv)]
    return [shutil.which("python3") or "python3", "-m", "iowhy"]
