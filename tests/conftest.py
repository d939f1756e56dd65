"""Shared fixtures: privilege gates, loop devices, filesystems, the recorder.

Every loop device, mount and process a fixture makes is torn down in a finalizer,
even when the test fails; fixtures touch only what they created.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from iowhy.filesystems import FILESYSTEMS

REPO = Path(__file__).resolve().parents[1]
REQUIRE_BPF = os.environ.get("IOWHY_REQUIRE_BPF") == "1"


def need(cond: bool, why: str) -> None:
    """Skip when a privilege/kernel feature is missing; fail instead under IOWHY_REQUIRE_BPF=1."""
    if cond:
        return
    if REQUIRE_BPF:
        pytest.fail(f"IOWHY_REQUIRE_BPF=1 and {why}", pytrace=False)
    pytest.skip(why)


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="also run the tests marked slow (the seeded fuzz over every "
                          "variant, the hostile files through every command, the large "
                          "compacted goldens, the unit tier's pages in Chromium); "
                          "`make test` and .ci/run pass it")


def pytest_collection_modifyitems(config, items):
    """Tests marked slow are skipped, saying how to run them, unless --slow is given."""
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --slow (as `make test` and .ci/run do)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


# A fuzz test over every variant it generates (`all`, marked slow), or over every
# FUZZ_SAMPLE-th one and the first of each kind (`sample`, the unit tier's quick run;
# damaged_traces.Sample): the same generator, seed and checks.
FUZZ_SAMPLE = 32
FUZZ_STRIDES = [pytest.param(FUZZ_SAMPLE, id="sample"),
                pytest.param(1, id="all", marks=pytest.mark.slow)]


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


# The lab's mkfs commands (iowhy.filesystems): one definition, and no background writer
# (ext4lazyinit) left on a fresh filesystem to add requests to a test's counts.
MKFS = {f.name: list(f.mkfs) for f in FILESYSTEMS}


@pytest.fixture
def zram(root, request):
    """A zram device of its own (hot_add), 64 MiB; reset and removed at teardown."""
    ctl = Path("/sys/class/zram-control/hot_add")
    need(ctl.exists(), "needs the zram module (/sys/class/zram-control)")
    n = int(ctl.read_text().strip())
    name = f"zram{n}"

    def _remove() -> None:
        try:
            Path(f"/sys/block/{name}/reset").write_text("1\n")
        except OSError:
            pass
        try:
            Path("/sys/class/zram-control/hot_remove").write_text(f"{n}\n")
        except OSError:
            pass
    request.addfinalizer(_remove)
    Path(f"/sys/block/{name}/disksize").write_text(f"{64 << 20}\n")
    return name


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


# -- the lab: each scenario recorded once per session on an emulated disk --------------------
# (tests/lab/: test_lab.py, test_causal_scenarios.py)

LAB_DISK = "hdd-7200"


def _cleanup_workdir(workdir: Path) -> None:
    """Undo whatever a crashed run left under WORKDIR: filesystems mounted there, loop
    devices on its images, emudisk daemons started there, their FUSE mounts."""
    from iowhy.lab import emudisk
    prefix = str(workdir) + "/"

    def mounts() -> list[str]:
        return sorted((mp for _, mp in emudisk._mountinfo() if mp.startswith(prefix)),
                      key=len, reverse=True)

    for mp in [m for m in mounts() if not m.endswith("/mnt")]:
        if subprocess.run(["umount", mp], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", mp], capture_output=True)
    for bf in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            if bf.read_text().strip().startswith(prefix):
                dev = "/dev/" + bf.parent.parent.name
                Path(bf.parent.parent / "queue" / "write_cache").write_text("write back\n")
                subprocess.run(["losetup", "-d", dev], capture_output=True)
        except OSError:
            pass
    for pidfile in workdir.glob("emudisk-*/emudisk.pid"):
        try:
            pid = int(pidfile.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if b"emudisk" in cmdline and prefix.encode() in cmdline:
            os.kill(pid, signal.SIGTERM)
    for mp in mounts():
        if subprocess.run(["umount", mp], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", mp], capture_output=True)
    shutil.rmtree(workdir, ignore_errors=True)


class Runs:
    """Each (scenario, fs, disk) recorded once per session; a failed run fails every test
    that needs it with the same error, without running it again."""

    def __init__(self, out: Path, workdir: Path):
        self.out = out
        self.workdir = workdir
        self.done: dict[tuple[str, str, str], object] = {}

    def __call__(self, name: str, fs: str, disk: str = LAB_DISK) -> dict:
        key = (name, fs, disk)
        from iowhy.lab import scenarios
        if key not in self.done:
            try:
                r = scenarios.run(name, fs, disk, out_dir=self.out, workdir=self.workdir)
                # This VM's kernel now and then runs no probe for an event (README,
                # "Events the kernel does not deliver"); the trace flags and counts it.
                # Such a run is recorded once more; a second one is kept, and judged
                # below.
                if r.get("lost_events"):
                    r = scenarios.run(name, fs, disk, out_dir=self.out,
                                      workdir=self.workdir)
                self.done[key] = r
            except Exception as e:  # kept, and raised again by every test that needs it
                self.done[key] = e
        r = self.done[key]
        if isinstance(r, Exception):
            raise AssertionError(f"lab run {name} on {fs} failed: {r}") from r
        assert isinstance(r, dict)
        return r

    def report(self, name: str, fs: str, disk: str = LAB_DISK) -> dict:
        r = self(name, fs, disk)
        return json.loads(Path(r["files"]["report_json"]).read_text())


@pytest.fixture(scope="session")
def lab_runs(tmp_path_factory):
    need(os.geteuid() == 0, "needs root")
    need(Path("/sys/kernel/btf/vmlinux").exists(), "needs a kernel with BTF")
    need(Path("/dev/fuse").exists(), "needs /dev/fuse")
    from iowhy.lab import emudisk
    try:
        emudisk.find_binary()
    except emudisk.EmulatedDiskError as e:
        need(False, f"{e} (or `make`)")
    for tool in ("losetup", "mkfs.ext4", "mkfs.xfs", "mkfs.btrfs", "fio", "sqlite3",
                 "eatmydata"):
        need(shutil.which(tool) is not None, f"{tool} not installed")
    out = tmp_path_factory.mktemp("lab")
    workdir = Path(tempfile.mkdtemp(prefix="iowhy-lab-test-", dir="/var/tmp"))
    try:
        yield Runs(out, workdir)
    finally:
        _cleanup_workdir(workdir)
