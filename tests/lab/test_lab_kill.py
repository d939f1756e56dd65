"""`kill -9` of `iowhy lab run` leaves no emudisk daemon, mount or loop device behind
(lab/labstate.py): its guardian undoes what the run wrote down, and when the guardian is
gone too, the next run's start does.

Each lab run here lives in a private mount namespace (`unshare -m`, with tracefs
mounted there when the host has none), with a `sleep` in it whose mountinfo shows the
namespace's mounts after the run is dead. The loop devices and the daemon are
global and are checked by their backing file and PID. Whatever a failed test leaves is
removed by the finalizer (only what lives under this test's tmp_path).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, need

pytestmark = pytest.mark.lab

IOWHY = REPO / ".venv" / "bin" / "iowhy"
PY = REPO / ".venv" / "bin" / "python"
WAIT_S = 90


class KilledRun:
    """One `iowhy lab run` in its own mount namespace, under tmp_path."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.work = tmp / "work"
        self.out = tmp / "out"
        self.state = tmp / "state"
        self.stderr = tmp / "lab.stderr"
        self.sentinel_file = tmp / "sentinel.pid"
        self.proc: subprocess.Popen | None = None
        self.sentinel: int | None = None

    def start(self, scenario: str = "fsync-tasks-1") -> None:
        script = (
            "mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing\n"
            f"sleep 3600 & echo $! > {self.sentinel_file}\n"
            f"exec {IOWHY} lab run {scenario} --fs ext4 --disk ram --out {self.out} "
            f"--workdir {self.work}\n")
        env = dict(os.environ, IOWHY_LAB_STATE=str(self.state))
        with open(self.stderr, "wb") as err:
            # unshare execs bash, bash execs iowhy: self.proc.pid is the lab itself
            self.proc = subprocess.Popen(
                ["unshare", "-m", "--propagation", "private", "bash", "-c", script],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
                start_new_session=True)
        deadline = time.monotonic() + 10
        while not self.sentinel_file.exists() or not self.sentinel_file.read_text().strip():
            assert time.monotonic() < deadline, "the namespace's sentinel did not start"
            time.sleep(0.05)
        self.sentinel = int(self.sentinel_file.read_text())

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")

    def wait_for(self, cond, what: str, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            assert self.proc is not None
            if self.proc.poll() is not None:
                pytest.fail(f"the lab run ended before {what}: {self.log()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {timeout} s: {self.log()}")
            time.sleep(0.02)

    # what the run made, seen from outside
    def mounts(self) -> list[str]:
        prefix = str(self.work) + "/"
        try:
            lines = Path(f"/proc/{self.sentinel}/mountinfo").read_text().splitlines()
        except OSError:
            return []
        return [ln.split()[4] for ln in lines if ln.split()[4].startswith(prefix)]

    def loops(self) -> list[str]:
        prefix = str(self.work) + "/"
        out = []
        for bf in Path("/sys/block").glob("loop*/loop/backing_file"):
            try:
                if bf.read_text().strip().startswith(prefix):
                    out.append("/dev/" + bf.parent.parent.name)
            except OSError:
                pass
        return out

    def ledger(self) -> dict:
        files = list(self.state.glob("run-*.json"))
        assert len(files) == 1, files
        return json.loads(files[0].read_text())

    def has_item(self, kind: str) -> bool:
        for f in self.state.glob("run-*.json"):
            try:
                if any(i["kind"] == kind for i in json.loads(f.read_text())["items"]):
                    return True
            except (OSError, ValueError, KeyError):
                pass
        return False

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def in_namespace(self, *cmd: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, IOWHY_LAB_STATE=str(self.state))
        return subprocess.run(["nsenter", f"--mount=/proc/{self.sentinel}/ns/mnt", *cmd],
                              capture_output=True, text=True, timeout=WAIT_S * 2, env=env)

    def cleanup(self) -> None:
        """The finalizer: anything the lab left under our tmp_path, then the sentinel."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.sentinel is not None and Path(f"/proc/{self.sentinel}").exists():
            for mp in sorted(self.mounts(), key=len, reverse=True):
                if not mp.endswith("/mnt"):
                    self.in_namespace("umount", "-l", mp)
        for dev in self.loops():
            subprocess.run(["losetup", "-d", dev], capture_output=True)
        for pf in self.work.glob("emudisk-*/emudisk.pid"):
            try:
                pid = int(pf.read_text())
                if str(self.work).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGTERM)
            except (OSError, ValueError):
                pass
        if self.sentinel is not None:
            for mp in sorted(self.mounts(), key=len, reverse=True):
                self.in_namespace("umount", "-l", mp)
            try:
                os.kill(self.sentinel, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def killed_run(root, tmp_path, request):
    need(IOWHY.exists(), "iowhy not built: run `make`")
    need(Path("/dev/fuse").exists(), "needs /dev/fuse")
    need((REPO / "lab" / "emudisk").exists(), "lab/emudisk not built: run `make`")
    need(Path("/sys/kernel/btf/vmlinux").exists(), "needs a kernel with BTF")
    for tool in ("unshare", "nsenter", "losetup", "mkfs.ext4"):
        need(shutil.which(tool) is not None, f"{tool} not installed")
    run = KilledRun(tmp_path)
    request.addfinalizer(run.cleanup)
    return run


def _gone(run: KilledRun, daemon: int, daemon_start: int) -> bool:
    from iowhy.lab import labstate
    return (not labstate.is_alive(daemon, daemon_start) and not run.mounts()
            and not run.loops())


def test_kill_9_while_recording_is_cleaned_up_by_the_guardian(killed_run):
    from iowhy.lab import labstate
    run = killed_run
    run.start()
    run.wait_for(lambda: "recording" in run.log() and run.has_item("proc"), "recording")
    led = run.ledger()
    kinds = [i["kind"] for i in led["items"]]
    assert kinds == ["dir", "daemon", "loop", "mount", "proc"], led
    daemon = next(i for i in led["items"] if i["kind"] == "daemon")
    assert labstate.is_alive(daemon["pid"], daemon["start"])
    assert len(run.mounts()) == 2 and len(run.loops()) == 1     # the FUSE mount and ext4
    run.kill()

    deadline = time.monotonic() + WAIT_S
    while not _gone(run, daemon["pid"], daemon["start"]) or list(run.state.glob("run-*")):
        assert time.monotonic() < deadline, (
            f"left after {WAIT_S} s: mounts {run.mounts()}, loops {run.loops()}, "
            f"ledger {list(run.state.glob('run-*'))}; log: {run.log()}")
        time.sleep(0.2)
    # and the guardian is gone too
    while labstate.is_alive(led["guard"]["pid"], led["guard"]["start"]):
        assert time.monotonic() < deadline, "the guardian did not exit"
        time.sleep(0.2)
    assert not any(run.work.glob("emudisk-*")), "the disk's directory is left"
    log = run.log()
    assert "the lab run ended without cleaning up" in log
    assert "detached /dev/loop" in log and "stopped emudisk" in log


def test_kill_9_of_run_and_guardian_is_cleaned_up_at_the_next_start(killed_run):
    from iowhy.lab import labstate
    run = killed_run
    run.start()
    # as soon as the filesystem is mounted (before or during the recording)
    run.wait_for(lambda: any(m.endswith("/fs") for m in run.mounts()), "the mounted disk")
    led = run.ledger()
    daemon = next(i for i in led["items"] if i["kind"] == "daemon")
    os.kill(led["guard"]["pid"], signal.SIGKILL)      # the guardian first: nobody cleans up
    run.kill()
    time.sleep(1)
    assert labstate.is_alive(daemon["pid"], daemon["start"])
    assert run.mounts() and run.loops()

    # the next run's start (Ledger.open) reaps it; here without starting a new run
    p = run.in_namespace(str(PY), "-m", "iowhy.lab.labstate", "reap")
    assert p.returncode == 0, p.stderr
    assert "cleaning up after an earlier lab run" in p.stderr
    deadline = time.monotonic() + WAIT_S
    while not _gone(run, daemon["pid"], daemon["start"]):
        assert time.monotonic() < deadline, (
            f"left: mounts {run.mounts()}, loops {run.loops()}; reap said: {p.stderr}")
        time.sleep(0.2)
    assert not list(run.state.glob("run-*")), "the ledger is left"
