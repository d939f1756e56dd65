#!/usr/bin/env python3
"""An emulated disk with exact ground truth, as a loop device.

``EmulatedDisk`` starts the ``emudisk`` FUSE daemon (lab/emudisk.c) on a sparse
backing file, attaches the disk image it serves to a loop device and matches the loop
device's ``write_cache`` to the modelled cache, so a real filesystem on ``.dev`` sends
real reads, writes and flushes to a disk model that charges and logs each of them
(see the comment at the top of emudisk.c for the model and the record layout)::

    with EmulatedDisk("/var/tmp/lab", 512 << 20, preset="hdd-7200", cache=True) as d:
        subprocess.run(["mkfs.ext4", "-q", d.dev], check=True)
        ...
    truth = read_truth(d.truth_path)        # numpy structured array, one row per request

Teardown (``__exit__``, ``stop()``, and atexit as a last resort) always detaches the
loop device, stops the daemon by its PID and unmounts; it raises ``EmulatedDiskError``
when the daemon died on its own (the disk vanished under the caller). Given a
``labstate.Ledger`` (``ledger=``), the disk writes down its directory, daemon and loop
device before making them, so that a process killed with SIGKILL is cleaned up after
by the ledger's guardian (lab/labstate.py).

Needs root. Standard library and numpy only; importable as ``emudisk`` from lab/ and
as ``iowhy.lab.emudisk``.

    python3 lab/emudisk.py dump TRUTH_FILE     # print the records of a truth file
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import IO, Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

try:  # as iowhy.lab.emudisk
    from . import labstate
except ImportError:  # as a flat module next to labstate.py
    import labstate  # type: ignore[no-redef]

HEADER_SIZE = 256
RECORD_SIZE = 128
MAGIC = b"EMUDTRU1"

KIND_READ, KIND_WRITE, KIND_FLUSH, KIND_DISCARD, KIND_MARK = 1, 2, 3, 4, 5
KIND_NAMES = {KIND_READ: "read", KIND_WRITE: "write", KIND_FLUSH: "flush",
              KIND_DISCARD: "discard", KIND_MARK: "mark"}

FLAG_CACHE_ON = 1      # the write cache was on
FLAG_CACHED = 2        # absorbed by / served from the cache
FLAG_BYPASS = 4        # a write larger than the cache went straight to the media
FLAG_ZERO = 8          # fallocate ZERO_RANGE, charged as a write
FLAG_DATASYNC = 16     # fdatasync-style flush
FLAG_IOERR = 32        # the backing file failed; the request returned an error

TRUTH_DTYPE = np.dtype([
    ("kind", "<u4"), ("flags", "<u4"), ("seq", "<u8"),
    ("start_ns", "<u8"), ("end_ns", "<u8"), ("offset_bytes", "<u8"), ("len_bytes", "<u8"),
    ("positioning_ns", "<u8"), ("transfer_ns", "<u8"),
    ("destage_ns", "<u8"), ("destage_positioning_ns", "<u8"),
    ("queue_ns", "<u8"), ("overhead_ns", "<u8"), ("model_ns", "<u8"),
    ("destage_bytes", "<u8"), ("destage_extents", "<u4"), ("backing_ns", "<u4"),
    ("head_after", "<u8"),
])
assert TRUTH_DTYPE.itemsize == RECORD_SIZE

HEADER_DTYPE = np.dtype([
    ("magic", "S8"), ("version", "<u4"), ("header_size", "<u4"), ("record_size", "<u4"),
    ("cache_on", "<u4"), ("size_bytes", "<u8"), ("rpm", "<u8"), ("t2t_ns", "<u8"),
    ("full_stroke_ns", "<u8"), ("rot_ns", "<u8"), ("media_rate", "<u8"),
    ("iface_rate", "<u8"), ("cache_bytes", "<u8"), ("flush_ns", "<u8"),
    ("span_sectors", "<u8"), ("avg_seek_ns", "<u8"), ("started_ns", "<u8"),
    ("preset", "S16"),
])

PRESETS = ("hdd-7200", "ssd", "ram")
BUILD_HINT = ("build it with: gcc -O2 -Wall lab/emudisk.c -o lab/emudisk "
              "$(pkg-config --cflags --libs fuse3) -lm")


class EmulatedDiskError(RuntimeError):
    """The emulated disk could not be set up, died, or could not be torn down cleanly."""


class TornTruthWarning(UserWarning):
    """A truth file ended inside a record; the partial record was dropped."""


# -- ground truth -----------------------------------------------------------------------

def read_truth_header(path: Union[str, os.PathLike]) -> Dict[str, Any]:
    """The model parameters a truth file was written with."""
    with open(path, "rb") as f:
        raw = f.read(HEADER_SIZE)
    if len(raw) < HEADER_SIZE or raw[:8] != MAGIC:
        raise EmulatedDiskError(f"{path}: not an emudisk truth file (bad or short header)")
    h = np.frombuffer(raw[:HEADER_DTYPE.itemsize], HEADER_DTYPE)[0]
    out: Dict[str, object] = {}
    for name in HEADER_DTYPE.names or ():
        v = h[name]
        out[name] = v.decode().rstrip("\0") if isinstance(v, bytes) else int(v)
    if out["record_size"] != RECORD_SIZE or out["header_size"] != HEADER_SIZE:
        raise EmulatedDiskError(f"{path}: unsupported truth layout (version {out['version']})")
    return out


def read_truth_ex(path: Union[str, os.PathLike]) -> Tuple[np.ndarray, int]:
    """(records, bytes dropped from a torn last record)."""
    read_truth_header(path)
    with open(path, "rb") as f:
        f.seek(HEADER_SIZE)
        raw = f.read()
    whole = len(raw) // RECORD_SIZE * RECORD_SIZE
    recs = np.frombuffer(raw[:whole], TRUTH_DTYPE).copy()
    return recs, len(raw) - whole


def read_truth(path: Union[str, os.PathLike]) -> np.ndarray:
    """All complete records of a truth file (a structured array of TRUTH_DTYPE).

    A file cut inside a record (the daemon was killed while writing, or is writing
    right now) loses only that record; a TornTruthWarning says how many bytes.
    """
    recs, dropped = read_truth_ex(path)
    if dropped:
        warnings.warn(f"{path}: dropped {dropped} bytes of a torn last record",
                      TornTruthWarning, stacklevel=2)
    return recs


# -- the binary, mounts, loop devices -----------------------------------------------------

def find_binary() -> Path:
    """$IOWHY_EMUDISK, else `emudisk` next to this file, else <prefix>/libexec/iowhy."""
    env = os.environ.get("IOWHY_EMUDISK")
    candidates = [Path(env)] if env else [
        Path(__file__).resolve().with_name("emudisk"),
        Path(sys.prefix) / "libexec" / "iowhy" / "emudisk",
    ]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    looked = ", ".join(str(c) for c in candidates)
    raise EmulatedDiskError(f"emudisk binary not found (looked for {looked}); {BUILD_HINT}")


def _unescape_mount_field(s: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and len(s[i + 1:i + 4]) == 3 and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def _mountinfo() -> List[Tuple[str, str]]:
    """(major:minor, mount point) of every mount in this namespace, without stat()ing
    them (a dead FUSE mount answers stat with ENOTCONN)."""
    rows = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5:
                rows.append((parts[2], _unescape_mount_field(parts[4])))
    return rows


def _is_mounted(path: Path) -> bool:
    p = str(path)
    return any(mp == p for _, mp in _mountinfo())


def _mounts_of_dev(major: int, minor: int) -> List[str]:
    key = f"{major}:{minor}"
    return [mp for dev, mp in _mountinfo() if dev == key]


def _run(cmd: Sequence[str], timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)


# -- the disk ---------------------------------------------------------------------------

class EmulatedDisk:
    """A loop device on an emulated disk; a context manager (see the module docstring).

    workdir: a directory on a local filesystem; a fresh subdirectory holds the sparse
    backing file (removed at stop unless keep=True), the mount point, the truth file
    and the daemon's log (both kept). realtime: run the daemon's threads SCHED_FIFO so
    modelled deadlines hold on a busy machine. extra_args: more daemon options, e.g.
    ["--cache-size", str(4 << 20)] (see `emudisk --help`).
    """

    def __init__(self, workdir: Union[str, os.PathLike], size_bytes: int,
                 preset: str = "hdd-7200", cache: bool = True, *, keep: bool = False,
                 realtime: bool = False, extra_args: Sequence[str] = (),
                 start_timeout: float = 10.0, ledger: Optional[Any] = None):
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r} (one of {', '.join(PRESETS)})")
        if size_bytes <= 0 or size_bytes % 512:
            raise ValueError("size_bytes must be a positive multiple of 512")
        self.workdir = Path(workdir)
        self.size_bytes = int(size_bytes)
        self.preset = preset
        self.cache = bool(cache)
        self.keep = keep
        self.extra_args = (["--rt"] if realtime else []) + [str(a) for a in extra_args]
        self.start_timeout = start_timeout
        self.dir: Optional[Path] = None
        self.dev: Optional[str] = None
        self.loop_name: Optional[str] = None
        self.major = self.minor = -1
        self._attached = False
        self._wc_before = ""  # the loop device's queue/write_cache before we set it
        self.proc: Optional[subprocess.Popen] = None
        self._log: Optional[IO[bytes]] = None
        self._stopped_by_us = False
        self._atexit_registered = False
        #: why the daemon died by itself, once stop() has noticed
        self.died: Optional[str] = None
        #: a labstate.Ledger: what the disk makes is written down before it is made, so
        #: that a SIGKILLed run is cleaned up after (lab/labstate.py)
        self.ledger = ledger

    def ledger_key(self, kind: str) -> str:
        """The key of this disk's `dir`, `daemon` or `loop` item in the ledger."""
        return f"{kind}:{self.dir}"

    def _note(self, kind: str, **fields: Any) -> None:
        if self.ledger is not None:
            self.ledger.add(self.ledger_key(kind), kind, **fields)

    def _forget(self, kind: str) -> None:
        if self.ledger is not None and self.dir is not None:
            self.ledger.remove(self.ledger_key(kind))

    # paths, valid once started
    @property
    def mountpoint(self) -> Path:
        return self._path("mnt")

    @property
    def image_path(self) -> Path:
        """disk.img as the FUSE mount serves it (what the loop device is attached to)."""
        return self.mountpoint / "disk.img"

    @property
    def backing_path(self) -> Path:
        return self._path("backing.img")

    @property
    def truth_path(self) -> Path:
        return self._path("truth.bin")

    @property
    def log_path(self) -> Path:
        return self._path("emudisk.log")

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    def _path(self, name: str) -> Path:
        if self.dir is None:
            raise EmulatedDiskError("the emulated disk has not been started")
        return self.dir / name

    def _log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:].strip()
        except OSError:
            return ""

    def __enter__(self) -> "EmulatedDisk":
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.stop()
        except EmulatedDiskError as e:
            if exc_type is None or self.died is not None:
                raise
            # cleanup trouble must not hide the caller's own exception
            warnings.warn(str(e), RuntimeWarning, stacklevel=2)

    # -- start ----------------------------------------------------------------------

    def start(self) -> "EmulatedDisk":
        if self.proc is not None:
            raise EmulatedDiskError("already started")
        binary = find_binary()
        if os.geteuid() != 0:
            raise EmulatedDiskError("an emulated disk needs root (FUSE mount, losetup)")
        for tool in ("losetup", "umount"):
            if shutil.which(tool) is None:
                raise EmulatedDiskError(f"{tool} not found in PATH")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix="emudisk-", dir=self.workdir))
        self._note("dir", path=str(self.dir))
        try:
            self._start(binary)
        except BaseException:
            # the error raised below already says why the daemon is gone
            self._stopped_by_us = True
            try:
                self.stop()
            except EmulatedDiskError as e:
                warnings.warn(f"cleanup after a failed start: {e}", RuntimeWarning)
            raise
        return self

    def _start(self, binary: Path) -> None:
        self.mountpoint.mkdir()
        with open(self.backing_path, "wb") as f:
            f.truncate(self.size_bytes)
        cmd = [str(binary), "--image", str(self.backing_path), "--size", str(self.size_bytes),
               "--preset", self.preset, "--cache", "on" if self.cache else "off",
               "--truth", str(self.truth_path), "--pidfile", str(self._path("emudisk.pid")),
               *self.extra_args, str(self.mountpoint)]
        self._log = open(self.log_path, "wb")
        # noted before it starts: the pidfile names it if a kill lands before its PID is
        self._note("daemon", pidfile=str(self._path("emudisk.pid")),
                   mountpoint=str(self.mountpoint))
        # its own session: a terminal's ^C must not reach the daemon before the loop
        # device is detached
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        if self.ledger is not None:
            self.ledger.update(self.ledger_key("daemon"), pid=self.proc.pid,
                               start=labstate.proc_start(self.proc.pid))
        atexit.register(self._atexit)
        self._atexit_registered = True

        deadline = time.monotonic() + self.start_timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise EmulatedDiskError(
                    f"emudisk exited with status {rc} before mounting: {self._log_tail()}")
            if _is_mounted(self.mountpoint) and self.image_path.exists():
                break
            if time.monotonic() > deadline:
                raise EmulatedDiskError(
                    f"emudisk did not mount {self.mountpoint} within {self.start_timeout}s: "
                    f"{self._log_tail()}")
            time.sleep(0.02)

        # by its backing file: the device is not known before losetup returns
        self._note("loop", backing=str(self.image_path))
        p = _run(["losetup", "--find", "--show", str(self.image_path)])
        if p.returncode != 0 or not p.stdout.strip().startswith("/dev/loop"):
            raise EmulatedDiskError(f"losetup failed: {p.stderr.strip()}")
        self.dev = p.stdout.strip()
        self._attached = True
        self.loop_name = os.path.basename(self.dev)
        st = os.stat(self.dev)
        self.major, self.minor = os.major(st.st_rdev), os.minor(st.st_rdev)
        wc = Path(f"/sys/block/{self.loop_name}/queue/write_cache")
        # The setting outlives the detach: _detach puts back what was there.
        self._wc_before = wc.read_text().strip()
        if self.ledger is not None:
            self.ledger.update(self.ledger_key("loop"), dev=self.dev)
            self.ledger.restore_setting(self.ledger_key("loop"), "write_cache",
                                        self._wc_before)
        wc.write_text("write back\n" if self.cache else "write through\n")

    # -- truth while running ------------------------------------------------------------

    def sync_truth(self, timeout: float = 5.0) -> None:
        """Make every record so far readable: SIGUSR1, then wait for the MARK record the
        daemon writes after it (CLOCK_MONOTONIC, the clock of the records)."""
        if self.proc is None or self.proc.poll() is not None:
            raise EmulatedDiskError("the emudisk daemon is not running")
        t0 = time.monotonic_ns()
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            recs, _ = read_truth_ex(self.truth_path)
            marks = recs[recs["kind"] == KIND_MARK]
            if len(marks) and int(marks["start_ns"].max()) >= t0:
                return
            time.sleep(0.01)
        raise EmulatedDiskError(f"emudisk did not write its truth out within {timeout}s")

    def truth(self) -> np.ndarray:
        """Every record so far (while running) or all of them (after stop)."""
        if self.proc is not None and self.proc.poll() is None:
            self.sync_truth()
        return read_truth(self.truth_path)

    # -- stop ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Detach, stop the daemon, unmount, remove the backing file. Idempotent; every
        step runs even when an earlier one failed; raises EmulatedDiskError at the end
        if the daemon had died by itself or something could not be cleaned up."""
        errors: List[str] = []
        died: Optional[str] = None
        if self.proc is not None and not self._stopped_by_us and self.proc.poll() is not None:
            self._stopped_by_us = True      # report the death once
            died = self.died = (
                f"the emudisk daemon (pid {self.proc.pid}) died before stop "
                f"({_describe_status(self.proc.returncode)}); "
                f"log: {self._log_tail(500) or '(empty)'}")

        if self._attached:
            self._detach(errors)
        if self.proc is not None and self.proc.poll() is None:
            self._stopped_by_us = True
            self._terminate(errors)
            # A kill that landed just before our SIGTERM shows in the exit status.
            rc = self.proc.returncode
            if died is None and rc not in (0, -signal.SIGTERM, None):
                died = self.died = (
                    f"the emudisk daemon (pid {self.proc.pid}) died before stop "
                    f"({_describe_status(rc)}); log: {self._log_tail(500) or '(empty)'}")
        if not self._attached:
            self._forget("loop")
        if self.dir is not None:
            self._unmount(errors)
            if self.proc is None or self.proc.poll() is not None:
                if not _is_mounted(self.mountpoint):
                    self._forget("daemon")
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.dir is not None and not self.keep:
            try:
                self.backing_path.unlink()
            except FileNotFoundError:
                pass
            except OSError as e:
                errors.append(f"removing {self.backing_path}: {e}")
        if self._atexit_registered:
            atexit.unregister(self._atexit)
            self._atexit_registered = False

        if died:
            errors.insert(0, died + "; the loop device and mount were cleaned up")
        if errors:
            raise EmulatedDiskError("; ".join(errors))

    def _detach(self, errors: List[str]) -> None:
        assert self.dev is not None and self.loop_name is not None
        # A filesystem still mounted on our device would keep it (autoclear) and
        # then fail under the caller once the daemon is gone: take it down first.
        for mp in _mounts_of_dev(self.major, self.minor):
            if _run(["umount", mp]).returncode != 0:
                _run(["umount", "-l", mp])
            warnings.warn(f"unmounted {mp}, still mounted on {self.dev} at stop",
                          RuntimeWarning)
        backing = Path(f"/sys/block/{self.loop_name}/loop/backing_file")
        if self._wc_before and self._still_ours(backing):
            # only while bound: an unbound loop device ignores the write
            try:
                Path(f"/sys/block/{self.loop_name}/queue/write_cache").write_text(
                    self._wc_before + "\n")
            except OSError as e:
                errors.append(f"{self.dev}: cannot put write_cache back: {e}")
        if self._still_ours(backing):
            p = _run(["losetup", "-d", self.dev])
            if p.returncode != 0:
                errors.append(f"losetup -d {self.dev}: {p.stderr.strip()}")
        deadline = time.monotonic() + 5.0
        while self._still_ours(backing) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._still_ours(backing):
            errors.append(f"{self.dev} is still attached (open by someone?)")
        else:
            self._attached = False

    def _still_ours(self, backing: Path) -> bool:
        # the loop device may have been detached and reused by someone else
        try:
            return backing.read_text().strip() == str(self.image_path)
        except OSError:
            return False

    def _terminate(self, errors: List[str]) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            errors.append(f"emudisk (pid {self.proc.pid}) ignored SIGTERM: killed")
            self.proc.kill()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                errors.append(f"emudisk (pid {self.proc.pid}) survived SIGKILL")
                return
        if self.proc.returncode != 0:
            errors.append(f"emudisk exited with {_describe_status(self.proc.returncode)}: "
                          f"{self._log_tail(500)}")

    def _unmount(self, errors: List[str]) -> None:
        mnt = self.mountpoint
        if _is_mounted(mnt):
            if shutil.which("fusermount3"):
                _run(["fusermount3", "-u", str(mnt)])
            if _is_mounted(mnt):
                _run(["umount", "-l", str(mnt)])
            if _is_mounted(mnt):
                errors.append(f"{mnt} is still mounted")
                return
        try:
            mnt.rmdir()
        except FileNotFoundError:
            pass
        except OSError as e:
            errors.append(f"removing {mnt}: {e}")

    def _atexit(self) -> None:
        try:
            self.stop()
        except Exception as e:  # the interpreter is exiting: report, never raise
            print(f"emudisk: at exit: {e}", file=sys.stderr)


def _describe_status(rc: Optional[int]) -> str:
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"


# -- CLI --------------------------------------------------------------------------------

def _dump(path: str) -> int:
    h = read_truth_header(path)
    recs, dropped = read_truth_ex(path)
    print(f"# {h['preset']} size={h['size_bytes']} cache={'on' if h['cache_on'] else 'off'} "
          f"avg_seek={h['avg_seek_ns'] / 1e6:.3f}ms rot={h['rot_ns'] / 1e6:.3f}ms "
          f"records={len(recs)} torn_bytes={dropped}")
    print("seq kind flags start_ns dur_ns offset len positioning transfer destage "
          "destage_pos queue overhead model")
    for r in recs:
        print(r["seq"], KIND_NAMES.get(int(r["kind"]), r["kind"]), r["flags"], r["start_ns"],
              int(r["end_ns"]) - int(r["start_ns"]), r["offset_bytes"], r["len_bytes"],
              r["positioning_ns"], r["transfer_ns"], r["destage_ns"],
              r["destage_positioning_ns"], r["queue_ns"], r["overhead_ns"], r["model_ns"])
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "dump":
        return _dump(args[1])
    print("usage: emudisk.py dump TRUTH_FILE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
