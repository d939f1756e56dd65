#!/usr/bin/env python3
"""What a lab run created, written down as it goes, so that it is undone even when the
run is killed with SIGKILL.

A run (lab/scenarios.py, with lab/emudisk.py) keeps a *ledger*: a JSON file in
STATE_DIR (/run/iowhy-lab, or $IOWHY_LAB_STATE) named after the run's process, with
one item per thing it made, in order: the emulated disk's directory, the emudisk daemon
(PID and start time from /proc/PID/stat, so a reused PID is never signalled), the loop
device (its backing file, and the queue settings to give back), the filesystem mount
(target and device number), and the `iowhy record` or setup process running on it.
Each item is removed once the run has undone it itself.

Two things undo what is left:

* a guardian: each ledger starts a small process (`python -m iowhy.lab.labstate guard
  LEDGER`, in its own session, holding the read end of a pipe whose write end only the
  run holds). When the run ends in any way, even SIGKILL, the pipe closes; the guardian
  reads the ledger and tears down what is still in it, last made first: stop the
  processes, unmount the filesystem, give the loop device its settings back and detach
  it, stop the daemon, unmount its FUSE mount, remove the directory.
* the next run: at its start, every ledger whose run and guardian are both gone is torn
  down the same way (the guardian was killed too, or the machine went down).

Only what a ledger names is touched, and only after checking it is still that thing: a
process by PID and start time, a loop device by its backing file, a mount by its
target and device number (or fstype for the FUSE mount), a directory only with nothing
mounted below it. Standard library only (the guardian must start fast and small).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

STATE_DIR_DEFAULT = "/run/iowhy-lab"
VERSION = 1
# How long the teardown waits for a process to end, a mount to become free, a loop
# device to let go (it may still be finishing the I/O of a process just stopped).
WAIT_S = 30.0


def state_dir() -> Path:
    return Path(os.environ.get("IOWHY_LAB_STATE") or STATE_DIR_DEFAULT)


# -- processes, mounts, loop devices ------------------------------------------------------

def proc_start(pid: int) -> Optional[int]:
    """The process's start time (clock ticks after boot, /proc/PID/stat field 22), or
    None when there is no such process. With the PID it names one process for good."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    try:
        fields = raw[raw.rindex(b")") + 2:].split()
        return int(fields[19])      # field 22; fields[0] is field 3 (state)
    except (ValueError, IndexError):
        return None


def proc_state(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
        return raw[raw.rindex(b")") + 2:].split()[0].decode()
    except (OSError, ValueError, IndexError):
        return ""


def is_alive(pid: Any, start: Any) -> bool:
    """PID is the process that started at START, and it has not exited (a zombie has)."""
    return (isinstance(pid, int) and pid > 0 and start is not None
            and proc_start(pid) == start and proc_state(pid) not in ("Z", "X", ""))


def _unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and s[i + 1:i + 4].isdigit() and len(s[i + 1:i + 4]) == 3:
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def mounts() -> List[Tuple[str, str, str]]:
    """(mount point, major:minor, fstype) of every mount in this namespace, from
    /proc/self/mountinfo (no stat(): a dead FUSE mount answers ENOTCONN)."""
    rows = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                pre, _, post = line.partition(" - ")
                a, b = pre.split(), post.split()
                if len(a) >= 5 and b:
                    rows.append((_unescape(a[4]), a[2], b[0]))
    except OSError:
        pass
    return rows


def _mounted(target: str, test: Callable[[str, str], bool]) -> bool:
    return any(mp == target and test(dev, fstype) for mp, dev, fstype in mounts())


def loop_backing(dev: str) -> Optional[str]:
    name = os.path.basename(dev)
    try:
        return Path(f"/sys/block/{name}/loop/backing_file").read_text().strip()
    except OSError:
        return None


def _run(cmd: List[str], timeout: float = 30.0) -> int:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=timeout).returncode
    except (OSError, subprocess.TimeoutExpired):
        return -1


def _wait(cond: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


# -- the ledger ---------------------------------------------------------------------------

class Ledger:
    """One lab run's ledger (see the module docstring); a context manager. Items are
    dicts with a unique `key` and a `kind`: dir, daemon, loop, mount, proc."""

    def __init__(self, directory: Optional[Path] = None, guard: bool = True) -> None:
        self.dir = directory or state_dir()
        pid = os.getpid()
        self.state: Dict[str, Any] = {
            "version": VERSION, "owner": {"pid": pid, "start": proc_start(pid)},
            "guard": None, "items": []}
        self.path = self.dir / f"run-{pid}-{self.state['owner']['start']}.json"
        self._guard: Optional[subprocess.Popen] = None
        self._want_guard = guard

    # lifecycle
    def __enter__(self) -> "Ledger":
        self.open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def open(self) -> None:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        reap(self.dir, say=_say)
        self._save()
        if self._want_guard:
            self._start_guard()

    def close(self) -> None:
        """The run is over. With nothing left in the ledger it is removed; what is left
        (the run could not undo it) is the guardian's to try once more."""
        if not self.state["items"]:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        if self._guard is not None:
            assert self._guard.stdin is not None
            self._guard.stdin.close()       # the guardian sees EOF
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._guard.wait(timeout=WAIT_S * 4)
            self._guard = None

    def _start_guard(self) -> None:
        # the guardian must not hold the run's directories (cwd /) nor its terminal's
        # signals (own session); the pipe's write end stays with us alone (CLOEXEC)
        self._guard = subprocess.Popen(
            [sys.executable, "-m", "iowhy.lab.labstate", "guard", str(self.path)],
            stdin=subprocess.PIPE, cwd="/", start_new_session=True, close_fds=True)
        self.state["guard"] = {"pid": self._guard.pid, "start": proc_start(self._guard.pid)}
        self._save()

    # items
    def add(self, key: str, kind: str, **fields: Any) -> None:
        self.state["items"] = [i for i in self.state["items"] if i["key"] != key]
        self.state["items"].append({"key": key, "kind": kind, **fields})
        self._save()

    def update(self, key: str, **fields: Any) -> None:
        for i in self.state["items"]:
            if i["key"] == key:
                i.update(fields)
        self._save()

    def restore_setting(self, key: str, name: str, value: str) -> None:
        """A loop device's queue setting to give back before it is detached (the first
        value recorded is what was there before the run)."""
        for i in self.state["items"]:
            if i["key"] == key:
                i.setdefault("restore", {}).setdefault(name, value)
        self._save()

    def remove(self, key: str) -> None:
        self.state["items"] = [i for i in self.state["items"] if i["key"] != key]
        self._save()

    def forget_kind(self, kind: str) -> None:
        self.state["items"] = [i for i in self.state["items"] if i["kind"] != kind]
        self._save()

    def _save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self.state, f)
        os.replace(tmp, self.path)


def _say(msg: str) -> None:
    try:
        print(f"iowhy lab: {msg}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


# -- teardown ----------------------------------------------------------------------------

def _stop_process(it: Dict[str, Any], say: Callable[[str], None]) -> bool:
    pid, start = it.get("pid"), it.get("start")
    if not is_alive(pid, start):
        return True
    for sig, wait in ((signal.SIGTERM, WAIT_S / 2), (signal.SIGKILL, 5.0)):
        if is_alive(pid, start):
            with contextlib.suppress(OSError):
                os.kill(int(pid or 0), sig)
        if _wait(lambda: not is_alive(pid, start), wait):
            say(f"stopped {it.get('what', 'process')} (pid {pid})")
            return True
    return False


def _pid_from_pidfile(pidfile: str, mountpoint: str) -> Tuple[Optional[int], Optional[int]]:
    """(pid, start) of the emudisk daemon a pidfile names, if that process is an emudisk
    serving MOUNTPOINT; else (None, None)."""
    try:
        pid = int(Path(pidfile).read_text().strip())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None, None
    if not argv or b"emudisk" not in os.path.basename(argv[0]) or \
            os.fsencode(mountpoint) not in argv:
        return None, None
    return pid, proc_start(pid)


def _unmount(target: str, test: Callable[[str, str], bool], fuse: bool = False) -> bool:
    if not _mounted(target, test):
        return True
    deadline = time.monotonic() + WAIT_S
    while _mounted(target, test) and time.monotonic() < deadline:
        if fuse and shutil.which("fusermount3"):
            _run(["fusermount3", "-u", target])
        if _mounted(target, test):
            _run(["umount", target])
        if _mounted(target, test):
            time.sleep(0.2)
    if _mounted(target, test):
        _run(["umount", "-l", target])
    return not _mounted(target, test)


def loops_of(backing: str) -> List[str]:
    """The loop devices whose backing file is BACKING."""
    out = []
    for bf in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            if bf.read_text().strip() == backing:
                out.append("/dev/" + bf.parent.parent.name)
        except OSError:
            pass
    return sorted(out)


def _detach(dev: str, backing: str, restore: Dict[str, Any],
            say: Callable[[str], None]) -> bool:
    name = os.path.basename(dev)
    for setting, value in restore.items():
        # only while still ours: the settings outlive the binding
        if setting in ("write_cache", "max_sectors_kb") and loop_backing(dev) == backing:
            with contextlib.suppress(OSError):
                Path(f"/sys/block/{name}/queue/{setting}").write_text(f"{value}\n")
    if loop_backing(dev) == backing:
        _run(["losetup", "-d", dev])
    # a process stopped just now may still hold it: the detach completes on its close
    if _wait(lambda: loop_backing(dev) != backing, WAIT_S):
        say(f"detached {dev}")
        return True
    return False


def _teardown_item(it: Dict[str, Any], say: Callable[[str], None]) -> bool:
    """Undo one item; True when it is gone (or was never there)."""
    kind = it.get("kind")
    if kind == "proc":
        return _stop_process(it, say)
    if kind == "mount":
        target, dev = str(it.get("target")), str(it.get("dev"))
        if _unmount(target, lambda d, t: d == dev):
            say(f"unmounted {target}")
            return True
        return False
    if kind == "loop":
        backing = str(it.get("backing"))
        ok = True
        for dev in loops_of(backing):   # the device may not have been written down yet
            ok = _detach(dev, backing, it.get("restore") or {}, say) and ok
        return ok
    if kind == "daemon":
        d = dict(it, what="emudisk")
        if d.get("pid") is None:        # killed before its PID was written down
            d["pid"], d["start"] = _pid_from_pidfile(str(it.get("pidfile")),
                                                     str(it.get("mountpoint")))
        ok = _stop_process(d, say)
        mp = str(it.get("mountpoint"))
        return _unmount(mp, lambda d, t: t.startswith("fuse"), fuse=True) and ok
    if kind == "dir":
        path = str(it.get("path"))
        prefix = path.rstrip("/") + "/"
        if any(mp == path or mp.startswith(prefix) for mp, _, _ in mounts()):
            return False
        if os.path.islink(path) or not os.path.isdir(path):
            return True                 # not the directory the run made: leave it
        shutil.rmtree(path, ignore_errors=True)
        say(f"removed {path}")
        return not os.path.lexists(path)
    return True     # an unknown kind: nothing of ours to undo


def _read_ledger(path: Path) -> Optional[Dict[str, Any]]:
    """A ledger's content, or None (missing, a symlink, not whole JSON, not a ledger)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not isinstance(state.get("items", []), list):
        return None
    return state


def teardown(ledger_path: Path, say: Callable[[str], None] = _say) -> bool:
    """Undo what LEDGER_PATH still names, last made first. The ledger is removed when
    everything is gone, else rewritten with what is left. True when nothing is left.
    Holds an exclusive lock on the ledger meanwhile (the guardian and a next run's
    reaper never work on the same one)."""
    try:
        fd = os.open(ledger_path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    with os.fdopen(fd, "r+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            state = json.load(f)
            items = list(state.get("items") or [])
        except (ValueError, AttributeError):
            return False
        if not os.path.lexists(ledger_path):   # torn down by someone else meanwhile
            return True
        # killed between writing the next version and renaming it: that one is newer
        tmp = ledger_path.with_name(ledger_path.name + ".tmp")
        newer = _read_ledger(tmp)
        if newer is not None:
            state, items = newer, list(newer.get("items") or [])
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        left: List[Dict[str, Any]] = []
        for it in reversed(items):
            try:
                done = isinstance(it, dict) and _teardown_item(it, say)
            except Exception as e:  # keep going: every other item still gets its turn
                say(f"cleanup of {it.get('key') if isinstance(it, dict) else it}: {e}")
                done = False
            if not done:
                left.insert(0, it)
        if left:
            state["items"] = left
            f.seek(0)
            f.truncate()
            json.dump(state, f)
            f.flush()
            say(f"could not undo everything; what is left is in {ledger_path}")
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(ledger_path)
        return True


def reap(directory: Optional[Path] = None, say: Callable[[str], None] = _say) -> List[Path]:
    """At a run's start: tear down every ledger whose run and guardian have both gone.
    Returns the ledgers it undid."""
    d = directory or state_dir()
    done = []
    for tmp in d.glob("run-*.json.tmp"):
        # a run killed while writing its very first ledger: nothing was made yet
        ledger = tmp.with_name(tmp.name[:-4])
        try:
            pid, start = (int(x) for x in tmp.name[4:-9].split("-"))
        except ValueError:
            continue
        if not ledger.exists() and not is_alive(pid, start):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
    for p in sorted(d.glob("run-*.json")):
        state = _read_ledger(p)
        if state is None:
            continue
        owner, guard = state.get("owner") or {}, state.get("guard") or {}
        if not isinstance(owner, dict) or not isinstance(guard, dict):
            continue
        if is_alive(owner.get("pid"), owner.get("start")):
            continue
        if is_alive(guard.get("pid"), guard.get("start")):
            continue            # it is cleaning up right now
        if state.get("items"):
            say(f"cleaning up after an earlier lab run (pid {owner.get('pid')}) that "
                "did not finish")
        if teardown(p, say):
            done.append(p)
    return done


# -- the guardian --------------------------------------------------------------------------

def guard(ledger_path: str) -> int:
    """Wait for EOF on stdin (the run ended), then undo what the ledger still names."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    while True:
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    path = Path(ledger_path)
    state = _read_ledger(path)
    if state is None:
        return 0
    newer = _read_ledger(path.with_name(path.name + ".tmp"))
    if not state.get("items") and not (newer or {}).get("items"):
        with contextlib.suppress(FileNotFoundError):
            path.with_name(path.name + ".tmp").unlink()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return 0
    _say("the lab run ended without cleaning up; undoing what it made")
    return 0 if teardown(path) else 1


def main(argv: Optional[List[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "guard":
        return guard(args[1])
    if args == ["reap"]:
        reap()
        return 0
    print("usage: labstate.py guard LEDGER | reap", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
