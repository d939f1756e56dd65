"""The lab's scenarios: a workload, a filesystem, a disk and a cache setting, recorded by
iowhy on an emulated disk and checked against the disk's ground truth.

    iowhy lab list
    iowhy lab run SCENARIO [--disk hdd-7200|ssd|ram] [--fs ext4|xfs|btrfs] [--json] [--out DIR]

A run: prepare what the workload needs outside the disk (the tarball); start the
emulated disk (lab/emudisk.py) with the scenario's cache setting; make the filesystem
and mount it; run the setup steps (extract a tree, lay out a file, create a database)
and drain the disk's cache, so nothing of the setup is left to be paid for inside the
window; record the measured workload with ``iowhy record`` (a subprocess), labelled
``<scenario>: <steps>`` (``--label``: what every page calls it; the exact command
stays in the trace's metadata); unmount,
stop the disk; analyze the trace; compare with the truth (lab/validate.py). What the
run makes on the way (the disk, its mounts, the processes on it) is written down first
in a ledger whose guardian undoes it if the run is killed (lab/labstate.py). The output
directory gets, side by side, named after the run ``<scenario>-<fs>-<disk>``:
``.iowt`` (trace), ``.report.txt``, ``.report.json``, ``.report.html``, ``.truth.bin``
(ground truth) and ``.run.json`` (the run's figures and its validation list), each mode
0600 and written by iowhy.outfile's rules (never through a symlink; the sudo user's
under sudo).

The emulated disk is set up so that one block request is one FUSE call and one truth
record (the loop device's max_sectors_kb is capped at the daemon's FUSE max_write),
which lets lab/validate.py match the trace to the truth request by request. After a
run, the seeds' comparisons whose two runs are both in the output directory are
written as `iowhy compare` pages (``compare-<A>-vs-<B>-<fs>-<disk>.txt`` and ``.html``;
`gallery`).

Scenarios cover the seed experiments (README.md, "The lab and the gallery"): GNU tar vs
an fsync-per-file tar (star's default) and eatmydata; the 2008 XFS write-barrier
benchmark's three settings; rm -rf of a tree; N tasks each fsyncing its own file; SQLite
autocommit inserts with synchronous=FULL vs OFF; and fio's sequential vs random writes.
Sizes are chosen so a run takes seconds on hdd-7200.

The causal scenarios (group "causal", and "fsync-bench" on vs off; workloads in
lab/workloads_causal.py) each have one cause of waiting known by construction: `sleep`
beside another process's fsyncs on the same disk (`background`); tar reading a cold
tree from disk A and writing its archive on disk B (`second_disk`: B's truth is kept as
``.truth-b.bin``); fsync on a loop device whose backing file is on the emulated disk
(`stack`: /sys/block/<upper>/stat read around the window); `iowhy attach` to a process
with idle threads (`attach_s`: its /proc/PID/stat CPU time sampled every 20 ms); and a
fixed-duration multi-thread fdatasync benchmark that times its own calls. What a run
measures without iowhy is kept under "independent" in ``.run.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from iowhy import outfile
from iowhy.filesystems import FILESYSTEMS as FS_TABLE
from iowhy.filesystems import NAMES as FS_NAMES

from . import emudisk, labstate, validate

LAB_DIR = Path(__file__).resolve().parent
WORKLOADS = LAB_DIR / "workloads.py"
WORKLOADS_CAUSAL = LAB_DIR / "workloads_causal.py"
# workloads.py is standard library only and runs with the system interpreter, as a user
# would run the commands (the venv's Python is only for iowhy itself).
SYSTEM_PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
FILESYSTEMS = FS_NAMES  # iowhy.filesystems: one entry per filesystem
DISKS = emudisk.PRESETS
DISK_BYTES = 1 << 30
DEFAULT_WORKDIR = "/var/tmp/iowhy-lab"
FUSE_MAX_WRITE_KB = 1024   # emudisk's FUSE max_write

MKFS = {f.name: list(f.mkfs) for f in FS_TABLE}

# How each filesystem is told not to send cache flushes with the disk's cache still on.
# ext4 and btrfs still have a mount option; XFS removed `nobarrier` in 4.19, so there the
# loop device is set to "write through": the block layer then strips PREFLUSH/FUA and
# sends no flush at all to a disk that still caches -- exactly what nobarrier did.
NOBARRIER_MOUNT = {f.name: f.nobarrier_option for f in FS_TABLE if f.nobarrier_option}

CACHE_MODES = {
    "on": "volatile write cache on, barriers on (the kernel flushes it: FUA/PREFLUSH)",
    "nobarrier": "write cache on, barriers off (no flush ever reaches the disk)",
    "off": "write cache off (every write goes to the media before it completes)",
}


@dataclass(frozen=True)
class Scenario:
    """One scenario. Command templates are lists of arguments in which `{mnt}` (the
    mounted filesystem), `{tree}` (the directory tar extracts into) and the params are
    filled in; a list starting with "workload" runs lab/workloads.py."""

    name: str
    summary: str
    description: str
    filesystems: tuple[str, ...]
    measure: tuple[tuple[str, ...], ...]   # run one after another under `iowhy record`
    setup: tuple[tuple[str, ...], ...] = ()
    cache: str = "on"
    syncfs_after: bool = True     # end the measured part with syncfs of the filesystem
    cold: bool = False            # remount after setup: the workload starts with no cache
    params: Mapping[str, int] = field(default_factory=dict)
    group: str = ""               # scenarios compared with each other (tests, gallery)
    # The causal scenarios' settings (a known cause by construction):
    # a command run on the disk from before the recording to after it, waited on by
    # nobody in the workload (stopped with SIGTERM when the recording ends)
    background: tuple[str, ...] = ()
    # a second emulated disk of the same preset, formatted the same, mounted at {mnt_b}
    # (recorded too)
    second_disk: bool = False
    # a two-level stack: a loop device on the file {mnt}/upper.img, formatted the same,
    # mounted at {upper} (both levels recorded); its /sys/block/<dev>/stat is read
    # before and after the recording
    stack: bool = False
    # attach instead of record: the (single) measured command is started, writes its
    # PID to {pidfile}, and `iowhy attach -p PID -d ATTACH_S` records it while its CPU
    # time (/proc/PID/stat utime+stime) is sampled; then it is stopped with SIGTERM
    attach_s: float = 0.0
    # the measured steps in a few words, params filled in; the run's label (`iowhy
    # record --label`) is "<name>: <steps>"
    steps: str = ""

    def default_fs(self) -> str:
        return self.filesystems[0]

    def label(self) -> str:
        return f"{self.name}: {(self.steps or self.summary).format(**self.params)}"


TAR_FILES = 300
RM_FILES = 2000
TASK_FSYNCS = 16

_TAR = ("workload", "untar", "{tree}", "--files", "{files}")
_SEED_2008 = (
    "The 2008 XFS write-barrier benchmark (Steigerwald, LKML): tar -xf of a kernel "
    "tree, sync, rm -rf of it, sync -- here the first {files} files, syncfs instead of "
    "a global sync.")

SCENARIOS: dict[str, Scenario] = {}


def _add(s: Scenario) -> None:
    assert s.name not in SCENARIOS
    assert s.cache in CACHE_MODES
    SCENARIOS[s.name] = s


_add(Scenario(
    "tar", "GNU tar: {files} kernel files, then syncfs (no fsync)",
    "GNU tar does not fsync: the kernel decides when to write, and the syncfs at the "
    "end pays for all of it at once (one journal commit, one cache flush).",
    ("ext4", "xfs", "btrfs"), (_TAR,), params={"files": TAR_FILES}, group="tar",
    steps="untar {files} files, syncfs"))
_add(Scenario(
    "fsync-tar", "tar, fsync per file (star's default), then syncfs",
    "Schilling's star fsyncs every file: one journal commit and its cache flushes per "
    "file. In the seed (2012, a kernel tree on a hard disk) star took 23 min on ext4 "
    "where GNU tar plus sync took 6 s; the extra time should be barrier and log.",
    ("ext4", "xfs", "btrfs"), (("workload", "untar-fsync", "{tree}", "--files", "{files}"),),
    params={"files": TAR_FILES}, group="tar",
    steps="untar {files} files, fsync each, syncfs"))
_add(Scenario(
    "fsync-tar-wc-off", "fsync-tar with the disk's write cache off, then syncfs",
    "The same fsync per file on a disk without a volatile cache (hdparm -W0, or a drive "
    "with power-loss protection): the kernel sends no flush at all, and each data and "
    "journal write pays its own positioning before it completes.",
    ("ext4", "xfs", "btrfs"), (("workload", "untar-fsync", "{tree}", "--files", "{files}"),),
    cache="off", params={"files": TAR_FILES}, group="tar",
    steps="untar {files} files, fsync each, syncfs"))
_add(Scenario(
    "eatmydata-tar", "fsync-tar under eatmydata (fsync a no-op), then syncfs",
    "eatmydata turns star into GNU tar: the fsync calls return at once; only the final "
    "syncfs makes the data durable.",
    ("ext4", "xfs"), (("workload", "untar-eatmydata", "{tree}", "--files", "{files}"),),
    params={"files": TAR_FILES}, group="tar",
    steps="untar {files} files, fsync each under eatmydata, syncfs"))
_add(Scenario(
    "wc-barrier", "2008 #1: cache on, barriers on: tar, syncfs, rm -rf",
    _SEED_2008 + " Setting 1, the default: a volatile write cache and barriers, so every "
    "journal commit flushes the cache.",
    ("xfs", "ext4", "btrfs"), (_TAR, ("sync", "-f", "{mnt}"), ("workload", "rmtree", "{tree}")),
    cache="on", syncfs_after=False, params={"files": RM_FILES}, group="2008",
    steps="untar {files} files, syncfs, rm -rf"))
_add(Scenario(
    "wc-nobarrier", "2008 #2: cache on, barriers off (nobarrier); same steps",
    _SEED_2008 + " Setting 2: barriers off with the cache on -- fast and unsafe. XFS "
    "removed `nobarrier` in 4.19, so it is emulated: the loop device is set to \"write "
    "through\" while the emulated disk's cache stays on; the kernel then sends no flush "
    "to a disk that still caches, exactly what nobarrier did. ext4 uses -o barrier=0, "
    "btrfs -o nobarrier.",
    ("xfs", "ext4", "btrfs"), (_TAR, ("sync", "-f", "{mnt}"), ("workload", "rmtree", "{tree}")),
    cache="nobarrier", syncfs_after=False, params={"files": RM_FILES}, group="2008",
    steps="untar {files} files, syncfs, rm -rf"))
_add(Scenario(
    "wc-off", "2008 #3: write cache off (hdparm -W0); same steps",
    _SEED_2008 + " Setting 3: the write cache off, so the kernel sends no flushes "
    "(the loop device is write through) and every write pays its positioning and media "
    "transfer before it completes.",
    ("xfs", "ext4", "btrfs"), (_TAR, ("sync", "-f", "{mnt}"), ("workload", "rmtree", "{tree}")),
    cache="off", syncfs_after=False, params={"files": RM_FILES}, group="2008",
    steps="untar {files} files, syncfs, rm -rf"))
_add(Scenario(
    "rmtree", "rm -rf of {files} files (cold cache), then syncfs",
    "The tree is extracted, synced and the filesystem remounted before recording, so "
    "rm -rf reads directories and inodes from the disk (positioning on reads), then "
    "syncfs writes the freed metadata.",
    ("xfs", "ext4", "btrfs"), (("workload", "rmtree", "{tree}"),),
    setup=(_TAR,), cold=True, syncfs_after=False, params={"files": RM_FILES},
    steps="rm -rf {files} files (cold cache)"))
for _n, _k in ((1, TASK_FSYNCS * 4), (8, TASK_FSYNCS), (32, TASK_FSYNCS // 2)):
    _add(Scenario(
        f"fsync-tasks-{_n}",
        f"{_n} task{'s, each' if _n > 1 else ','} {_k} x (append 1 KiB, fsync its file)",
        "The Tux3/XFS fsync thread (2015): concurrent fsyncs share journal commits, so "
        "fsyncs per commit grows with the task count.",
        ("ext4", "xfs", "btrfs"),
        (("workload", "fsync-tasks", "{mnt}", "{tasks}", "{k}"),),
        syncfs_after=False, params={"tasks": _n, "k": _k}, group="fsync-tasks",
        steps=f"{_n} task{'s, each' if _n > 1 else ','} {{k}} x (append 1 KiB, fsync)"))
for _mode in ("FULL", "OFF"):
    _add(Scenario(
        f"sqlite-{_mode.lower()}",
        f"sqlite3: {{k}} commits with synchronous={_mode}, then syncfs",
        "One transaction per INSERT in rollback-journal mode. synchronous=FULL fsyncs the "
        "journal and the database for every transaction; OFF never does (the final "
        "syncfs makes it durable).",
        ("ext4", "xfs"),
        (("workload", "sqlite", "{mnt}", "{k}", "--synchronous", _mode),),
        setup=(("workload", "sqlite", "{mnt}", "0"),), params={"k": 100}, group="sqlite",
        steps=f"SQLite {{k}} commits, synchronous={_mode}, syncfs"))
for _kind, _what in (("seq", "sequential"), ("rand", "random")):
    _add(Scenario(
        f"fio-{_kind}", f"fio: {{ios}} {_what} O_DIRECT 64 KiB writes, cache off",
        "A 64 MiB file laid out during setup, then O_DIRECT 64 KiB overwrites, one at a "
        "time (psync). The write cache is off so each write pays its own positioning, "
        "which the report's placement figures estimate.",
        ("ext4", "xfs", "btrfs"), (("workload", f"fio-{_kind}", "{mnt}", "--ios", "{ios}",
                                    "--bs", "64k", "--size", "64m"),),
        setup=(("workload", f"fio-{_kind}", "{mnt}", "--layout", "--bs", "64k",
                "--size", "64m"),),
        cache="off", syncfs_after=False, params={"ios": 256}, group="fio",
        steps=f"{{ios}} {_what} O_DIRECT 64 KiB writes"))

# -- causal scenarios: the cause of every wait is known by construction -------------------

BENCH_THREADS = 4
BENCH_SECONDS = 2
_add(Scenario(
    "sleep-bg", "sleep {sleep} beside a background writer fsyncing",
    "`sleep 2` is recorded while another process, outside the workload, writes and "
    "fsyncs in a loop on the recorded disk: the disk is busy, but the workload waits "
    "only on its timer. Nothing of the disk's work may be charged to it.",
    ("ext4",), (("sleep", "{sleep}"),),
    background=("workload-causal", "write-fsync-loop", "{mnt}"),
    syncfs_after=False, params={"sleep": 2}, group="causal",
    steps="sleep {sleep} s beside a background fsync loop"))
_add(Scenario(
    "tar-a-to-b", "tar -cf of {files} files: read (cold) on A, write on B",
    "tar -cf of a tree extracted on disk A beforehand, whose cache is dropped (remount), "
    "writing its archive on disk B (no sync): the waits are A's reads of directories, "
    "inodes and file data, each paying its positioning; B's writes stay in the page "
    "cache.",
    ("ext4",), (("tar", "-cf", "{mnt_b}/archive.tar", "-C", "{mnt}", "tree"),),
    setup=(_TAR,), cold=True, syncfs_after=False, second_disk=True,
    params={"files": TAR_FILES}, group="causal",
    steps="tar -cf {files} files, disk A to disk B"))
_add(Scenario(
    "loop-stack", "append 1 KiB + fsync for {seconds} s on loop-on-file",
    "A two-level stack: a loop device whose backing file lives on the filesystem of the "
    "emulated disk, formatted and mounted itself. The workload's fsyncs on the upper "
    "device are flushes of the loop device, paid by the lower filesystem's fsync of the "
    "backing file: its journal writes, data writes and cache flushes.",
    ("ext4",), (("workload", "fsync-loop", "{upper}", "{seconds}"),),
    stack=True, syncfs_after=False, params={"seconds": 2}, group="causal",
    steps="append 1 KiB + fsync for {seconds} s on a loop device on a file"))
_add(Scenario(
    "idle-thread", "attach -d {attach}: idle thread, spin + fsync thread",
    "A process with a thread blocked on a pipe read for ever, a main thread joining, "
    "and a worker alternating 20 ms of CPU with a 4 KiB write + fsync, recorded with "
    "`iowhy attach -d {attach}` while /proc/PID/stat is sampled: the CPU share is what "
    "the kernel charged the process, not 100% for the idle threads.",
    ("ext4",), (("workload-causal", "idle-thread", "{mnt}", "--pidfile", "{pidfile}"),),
    syncfs_after=False, attach_s=2.0, params={"attach": 2}, group="causal",
    steps="attach {attach} s: an idle thread, a CPU + fsync thread"))
for _mode in ("on", "off"):
    _add(Scenario(
        "fsync-bench" + ("" if _mode == "on" else "-off"),
        f"{{threads}} threads write+fdatasync {{seconds}} s, cache {_mode}",
        "A fixed-duration benchmark (pgbench-like): each thread appends 8 KiB to its own "
        "file and fdatasyncs it, in a loop, for a fixed time; it writes its own time in "
        "fdatasync to a file kept with the run. With the cache on each fdatasync waits for a "
        "cache flush; with it off, for its writes to reach the media.",
        ("ext4",), (("workload-causal", "fsync-bench", "{mnt}", "--threads", "{threads}",
                     "--seconds", "{seconds}", "--stats", "{stats}"),),
        cache=_mode, syncfs_after=False,
        params={"threads": BENCH_THREADS, "seconds": BENCH_SECONDS}, group="fsync-bench",
        steps="{threads} threads write 8 KiB + fdatasync for {seconds} s"))


class LabError(RuntimeError):
    """A scenario could not be set up or run; str() says which step and why."""


def describe(s: Scenario) -> str:
    return s.summary.format(**s.params)


def list_lines(width: int = 100) -> list[str]:
    """`iowhy lab list`: a header, then one scenario per line, name first (filesystems,
    cache setting, what it runs); the description wraps under WHAT to fit WIDTH."""
    import textwrap
    w = max(len(n) for n in [*SCENARIOS, "SCENARIO"])
    wf = max([len(",".join(s.filesystems)) for s in SCENARIOS.values()] + [len("FILESYSTEMS")])
    wc = max([len(s.cache) for s in SCENARIOS.values()] + [len("CACHE")])
    indent = w + wf + wc + 6
    lines = [f"{'SCENARIO':<{w}}  {'FILESYSTEMS':<{wf}}  {'CACHE':<{wc}}  WHAT"]
    for s in SCENARIOS.values():
        what = textwrap.wrap(describe(s), max(20, width - indent)) or [""]
        lines.append(f"{s.name:<{w}}  {','.join(s.filesystems):<{wf}}  {s.cache:<{wc}}  "
                     f"{what[0]}")
        lines += [" " * indent + more for more in what[1:]]
    return [ln.rstrip() for ln in lines]


def run_id(name: str, fs: str, disk: str) -> str:
    return f"{name}-{fs}-{disk}"


# What a run leaves in its output directory, side by side: key -> suffix of the run id.
RUN_FILES = (("trace", ".iowt"), ("report_text", ".report.txt"),
             ("report_json", ".report.json"), ("report_html", ".report.html"),
             ("truth", ".truth.bin"), ("truth_b", ".truth-b.bin"), ("run", ".run.json"),
             ("record_log", ".record.log"))


def run_files(out: Path, rid: str) -> dict[str, Path]:
    return {k: out / f"{rid}{ext}" for k, ext in RUN_FILES}


# -- running ------------------------------------------------------------------------------

# The ledger of the run in progress (lab/labstate.py): the processes started on the
# emulated disk are written down in it, so that a SIGKILLed run's guardian stops them.
_LEDGER: Optional[labstate.Ledger] = None


@contextlib.contextmanager
def _noted(proc: subprocess.Popen, what: str) -> Iterator[None]:
    key = f"proc:{proc.pid}"
    if _LEDGER is not None:
        _LEDGER.add(key, "proc", pid=proc.pid, start=labstate.proc_start(proc.pid), what=what)
    try:
        yield
    finally:
        if _LEDGER is not None and proc.returncode is not None:
            _LEDGER.remove(key)


def _run(cmd: Sequence[str], what: str, timeout: float = 600, **kw: Any) -> str:
    try:
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, **kw)
    except OSError as e:
        raise LabError(f"{what}: cannot run {cmd[0]}: {e}") from None
    with _noted(proc, cmd[0]):
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise LabError(f"{what}: {shlex.join(cmd)} did not finish in {timeout:.0f}s") \
                from None
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if proc.returncode != 0:
        raise LabError(f"{what}: {shlex.join(cmd)} exited {proc.returncode}: "
                       f"{(err or out).strip()[-800:]}")
    return out


def _expand(tpl: Sequence[str], ctx: Mapping[str, Any]) -> list[str]:
    args = [a.format(**ctx) for a in tpl]
    if args and args[0] == "workload":
        return [SYSTEM_PY, str(WORKLOADS), *args[1:]]
    if args and args[0] == "workload-causal":
        return [SYSTEM_PY, str(WORKLOADS_CAUSAL), *args[1:]]
    return args


def measured_command(s: Scenario, ctx: Mapping[str, Any]) -> list[str]:
    """What `iowhy record` runs: one command, or `sh -c` chaining several with &&."""
    cmds = [_expand(t, ctx) for t in s.measure]
    if s.syncfs_after:
        cmds.append(["sync", "-f", str(ctx["mnt"])])
    if len(cmds) == 1:
        return cmds[0]
    return ["sh", "-c", " && ".join(shlex.join(c) for c in cmds)]


def iowhy_command() -> list[str]:
    """The iowhy CLI of this interpreter (as a subprocess)."""
    return [sys.executable, "-m", "iowhy"]


def _drain_cache(d: emudisk.EmulatedDisk) -> None:
    """Flush the emulated disk's cache straight through its FUSE file (not through the
    loop device, which may be write through): setup data must not be destaged inside the
    measured window."""
    fd = os.open(str(d.image_path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _set_write_cache(d: emudisk.EmulatedDisk, mode: str) -> None:
    Path(f"/sys/block/{d.loop_name}/queue/write_cache").write_text(mode + "\n")


def _record(cmd: list[str], trace: Path, devs: Sequence[str], log: Path,
            label: str) -> None:
    """`iowhy record` as a subprocess; on our own interruption the recorder is asked to
    stop (SIGTERM, which it forwards) before anything is torn down."""
    full = [*iowhy_command(), "record", "-q", "-o", str(trace), "--label", label,
            *[a for dv in devs for a in ("--dev", dv)], "--", *cmd]
    # written where it is read, as it goes: it says why a recording failed or stopped
    with outfile.open_new(log, binary=False) as lf:
        lf.write(shlex.join(full) + "\n")
        lf.flush()
        proc = subprocess.Popen(full, stdout=lf, stderr=subprocess.STDOUT)
        with _noted(proc, "iowhy record"):
            rc = _wait_record(proc)
    if rc != 0:
        tail = log.read_text(errors="replace").strip()[-1500:]
        raise LabError(f"iowhy record exited {rc} (log {log}): {tail}")


def _wait_record(proc: subprocess.Popen) -> int:
    try:
        return proc.wait()
    except BaseException:
        try:
            proc.wait(timeout=5)       # a terminal ^C reached it too
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        raise


def _umount(mnt: Path) -> None:
    for _ in range(50):
        p = subprocess.run(["umount", str(mnt)], capture_output=True, text=True)
        if p.returncode == 0 or not os.path.ismount(mnt):
            return
        time.sleep(0.1)
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    raise LabError(f"cannot unmount {mnt}: {p.stderr.strip()}")


def run(name: str, fs: Optional[str] = None, disk: str = "hdd-7200",
        out_dir: str | os.PathLike = "out/lab", workdir: str | os.PathLike = DEFAULT_WORKDIR,
        realtime: bool = True, progress: Optional[Callable[[str], None]] = None
        ) -> dict[str, Any]:
    """Run one scenario; returns the run's figures with its validation list (the content
    of <out_dir>/<run id>.run.json). Every disk, mount and loop setting it makes is
    undone before it returns or raises."""
    if name not in SCENARIOS:
        raise LabError(f"unknown scenario {name!r} (see `iowhy lab list`)")
    s = SCENARIOS[name]
    fs = fs or s.default_fs()
    if fs not in FILESYSTEMS:
        raise LabError(f"unknown filesystem {fs!r} (one of {', '.join(FILESYSTEMS)})")
    if disk not in DISKS:
        raise LabError(f"unknown disk {disk!r} (one of {', '.join(DISKS)})")
    if os.geteuid() != 0:
        raise LabError("the lab needs root (emulated disk, mounts, BPF)")
    say = progress or (lambda m: None)
    rid = run_id(name, fs, disk)
    out = Path(out_dir)
    outfile.make_output_dir(out)
    paths = run_files(out, rid)
    for p in paths.values():
        # refuse a symlink or a non-regular file there before anything starts (outfile);
        # a previous run's files go
        outfile.check_target(p)
        if p.exists():
            p.unlink()
    files = int(s.params.get("files", 0))
    ctx: dict[str, Any] = dict(s.params)
    if files:
        say(f"{rid}: preparing the tarball ({files} files)")
        ctx["archive"] = _run([SYSTEM_PY, str(WORKLOADS), "prepare", "--files", str(files)],
                              "prepare").strip()
    Path(workdir).mkdir(parents=True, exist_ok=True)
    t_run = time.monotonic()
    global _LEDGER
    # What the run makes is written down before it is made, and a guardian undoes what
    # is left if this process dies without doing it (even by SIGKILL): lab/labstate.py.
    with labstate.Ledger() as ledger:
        _LEDGER = ledger
        try:
            disk_info = _on_disk(s, fs, disk, workdir, realtime, ctx, paths, ledger, say, rid)
        except BaseException:
            # unwound here, the disk is already stopped: its directory (the truth and
            # the daemon's log) stays for a look, as it always did
            ledger.forget_kind("dir")
            raise
        finally:
            _LEDGER = None
    say(f"{rid}: analyzing")
    result = analyze_run(s, fs, disk, paths, disk_info, measured_command(s, ctx))
    result["run_seconds"] = round(time.monotonic() - t_run, 2)
    outfile.write_output(paths["run"], json.dumps(result, indent=2) + "\n")
    return result


def _on_disk(s: Scenario, fs: str, disk: str, workdir: str | os.PathLike, realtime: bool,
             ctx: dict[str, Any], paths: Mapping[str, Path], ledger: labstate.Ledger,
             say: Callable[[str], None], rid: str) -> dict[str, Any]:
    """The part of a run on the emulated disk: start it, make and mount the filesystem,
    set up, record; then unmount, stop the disk, keep its truth. Returns the device
    (and, under "independent", what the run measured without iowhy)."""
    disk_info: dict[str, Any] = {}
    second: list[emudisk.EmulatedDisk] = []
    with emudisk.EmulatedDisk(workdir, DISK_BYTES, preset=disk, cache=s.cache != "off",
                              realtime=realtime, ledger=ledger) as d:
        assert d.dir is not None and d.dev is not None and d.loop_name is not None
        mnt = d.dir / "fs"
        mnt.mkdir()
        ctx.update(mnt=str(mnt), tree=str(mnt / "tree"), pidfile=str(d.dir / "workload.pid"),
                   stats=str(d.dir / "workload-stats.json"))
        mount_opts = []
        if s.cache == "nobarrier" and fs in NOBARRIER_MOUNT:
            mount_opts.append(NOBARRIER_MOUNT[fs])
        mount = ["mount"] + (["-o", ",".join(mount_opts)] if mount_opts else []) + \
            [d.dev, str(mnt)]
        mount_key = f"mount:{mnt}"
        wc_changed = False
        mounted = False
        # what the causal scenarios add (second disk, upper loop device): undone first
        extras = contextlib.ExitStack()

        def do_mount(what: str) -> None:
            nonlocal mounted
            ledger.add(mount_key, "mount", target=str(mnt), dev=f"{d.major}:{d.minor}")
            _run(mount, what)
            mounted = True

        def do_umount() -> None:
            nonlocal mounted
            _umount(mnt)
            mounted = False
            ledger.remove(mount_key)

        # One block request, one FUSE call, one truth record: no request larger than the
        # daemon's FUSE max_write (1 MiB; the loop default allows 1280 KiB).
        msk = Path(f"/sys/block/{d.loop_name}/queue/max_sectors_kb")
        msk_old = msk.read_text().strip()
        ledger.restore_setting(d.ledger_key("loop"), "max_sectors_kb", msk_old)
        try:
            if int(msk_old) > FUSE_MAX_WRITE_KB:
                msk.write_text(f"{FUSE_MAX_WRITE_KB}\n")
            say(f"{rid}: mkfs.{fs} on {d.dev} ({disk}, cache {s.cache})")
            _run([*MKFS[fs], d.dev], f"mkfs.{fs}")
            if s.cache == "nobarrier" and fs not in NOBARRIER_MOUNT:
                _set_write_cache(d, "write through")
                wc_changed = True
            do_mount("mount")
            os.mkdir(ctx["tree"])     # where tar extracts (tar -C needs it)
            devs = [d.dev]
            if s.second_disk:
                db = _second_disk(extras, s, fs, disk, workdir, realtime, ledger, say, rid)
                second.append(db)
                assert db.dir is not None and db.dev is not None
                ctx["mnt_b"] = str(db.dir / "fs")
                devs.append(db.dev)
            upper: dict[str, Any] = {}
            if s.stack:
                upper = _upper_loop(extras, mnt, fs, d.dir / "upper", ledger, say, rid)
                ctx["upper"] = upper["mnt"]
                devs.append(upper["dev"])
            for tpl in s.setup:
                say(f"{rid}: setup: {' '.join(tpl)}")
                _run(_expand(tpl, ctx), "setup")
            if upper:
                _run(["sync", "-f", upper["mnt"]], "syncfs of the upper device after setup")
            _run(["sync", "-f", str(mnt)], "syncfs after setup")
            if s.cold:
                do_umount()
                do_mount("remount")
            if s.cache != "off":
                _drain_cache(d)
            for other in second:
                if s.cache != "off":
                    _drain_cache(other)
            cmd = measured_command(s, ctx)
            independent: dict[str, Any] = {}
            bg = _start_background(s, ctx, d.dir / "background.log", say, rid)
            try:
                if upper:
                    independent["upper_stat_before"] = _block_stat(upper["name"])
                if s.attach_s > 0:
                    say(f"{rid}: attaching to {shlex.join(cmd)}")
                    independent.update(_attach_run(s, cmd, ctx, paths, devs))
                else:
                    say(f"{rid}: recording {shlex.join(cmd)}")
                    _record(cmd, paths["trace"], devs, paths["record_log"], s.label())
                if upper:
                    independent["upper_stat_after"] = _block_stat(upper["name"])
            finally:
                if bg is not None:
                    _stop(bg, "background")
            if os.path.exists(ctx["stats"]):
                independent["workload_stats"] = json.loads(Path(ctx["stats"]).read_text())
            if upper:
                independent["upper"] = {k: upper[k] for k in ("dev", "name", "major", "minor")}
            if second:
                db = second[0]
                independent["disk_b"] = {"dev": db.dev, "major": db.major, "minor": db.minor}
            disk_info = {"dev": d.dev, "major": d.major, "minor": d.minor,
                         "loop_write_cache": Path(
                             f"/sys/block/{d.loop_name}/queue/write_cache").read_text().strip()}
            if independent:
                disk_info["independent"] = independent
        finally:
            # every step runs; an error here is raised below only if nothing else is
            undo: list[Callable[[], object]] = [extras.close]
            if mounted:
                undo.append(do_umount)
            if wc_changed:
                # the setting outlives the loop binding: give the device back as found
                undo.append(lambda: _set_write_cache(d, "write back"))
            undo.append(lambda: msk.write_text(msk_old + "\n"))
            cleanup_errors = []
            for step in undo:
                try:
                    step()
                except (LabError, OSError, emudisk.EmulatedDiskError) as e:
                    cleanup_errors.append(str(e))
        if cleanup_errors:
            raise LabError("cleanup: " + "; ".join(cleanup_errors))
        truth_src = d.truth_path
    outfile.copy_output(truth_src, paths["truth"])
    for db in second:
        outfile.copy_output(db.truth_path, paths["truth_b"])
        if db.dir is not None:
            shutil.rmtree(db.dir, ignore_errors=True)
            ledger.remove(db.ledger_key("dir"))
    if d.dir is not None:
        shutil.rmtree(d.dir, ignore_errors=True)
        ledger.remove(d.ledger_key("dir"))
    return disk_info


def _mkfs_and_mount(extras: contextlib.ExitStack, fs: str, dev: str, mnt: Path,
                    devno: str, ledger: labstate.Ledger, what: str) -> None:
    """mkfs FS on DEV and mount it at MNT, unmounted when EXTRAS closes."""
    _run([*MKFS[fs], dev], f"mkfs.{fs} on {what}")
    mnt.mkdir(exist_ok=True)
    key = f"mount:{mnt}"
    ledger.add(key, "mount", target=str(mnt), dev=devno)
    _run(["mount", dev, str(mnt)], f"mount {what}")

    def umount() -> None:
        _umount(mnt)
        ledger.remove(key)
    extras.callback(umount)


def _second_disk(extras: contextlib.ExitStack, s: Scenario, fs: str, disk: str,
                 workdir: str | os.PathLike, realtime: bool, ledger: labstate.Ledger,
                 say: Callable[[str], None], rid: str) -> emudisk.EmulatedDisk:
    """Disk B: another emulated disk like the first, formatted, mounted at <its dir>/fs."""
    db = extras.enter_context(emudisk.EmulatedDisk(
        workdir, DISK_BYTES, preset=disk, cache=s.cache != "off", realtime=realtime,
        ledger=ledger))
    assert db.dir is not None and db.dev is not None and db.loop_name is not None
    msk = Path(f"/sys/block/{db.loop_name}/queue/max_sectors_kb")
    msk_old = msk.read_text().strip()
    ledger.restore_setting(db.ledger_key("loop"), "max_sectors_kb", msk_old)
    extras.callback(lambda: msk.write_text(msk_old + "\n"))
    if int(msk_old) > FUSE_MAX_WRITE_KB:
        msk.write_text(f"{FUSE_MAX_WRITE_KB}\n")
    say(f"{rid}: disk B: mkfs.{fs} on {db.dev}")
    _mkfs_and_mount(extras, fs, db.dev, db.dir / "fs", f"{db.major}:{db.minor}", ledger,
                    "disk B")
    return db


UPPER_BYTES = 256 << 20


def _upper_loop(extras: contextlib.ExitStack, lower_mnt: Path, fs: str, mnt: Path,
                ledger: labstate.Ledger, say: Callable[[str], None], rid: str
                ) -> dict[str, Any]:
    """A loop device on the file <lower_mnt>/upper.img (allocated, synced), formatted
    and mounted at MNT; detached when EXTRAS closes."""
    img = lower_mnt / "upper.img"
    fd = os.open(img, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    try:
        os.posix_fallocate(fd, 0, UPPER_BYTES)
        os.fsync(fd)
    finally:
        os.close(fd)
    key = f"loop:{img}"
    ledger.add(key, "loop", backing=str(img))
    dev = _run(["losetup", "-f", "--show", str(img)], "losetup of the upper device").strip()

    def detach() -> None:
        if labstate.loop_backing(dev) == str(img):
            _run(["losetup", "-d", dev], "losetup -d of the upper device")
        for _ in range(100):
            if labstate.loop_backing(dev) != str(img):
                break
            time.sleep(0.1)
        ledger.remove(key)
    extras.callback(detach)
    name = os.path.basename(dev)
    major, minor = (int(x) for x in Path(f"/sys/block/{name}/dev").read_text().split(":"))
    say(f"{rid}: upper device {dev} on {img}: mkfs.{fs}")
    _mkfs_and_mount(extras, fs, dev, mnt, f"{major}:{minor}", ledger, "the upper device")
    return {"dev": dev, "name": name, "major": major, "minor": minor, "mnt": str(mnt)}


def _block_stat(name: str) -> dict[str, int]:
    """/sys/block/NAME/stat (Documentation/block/stat.rst): the fields used here."""
    f = [int(x) for x in Path(f"/sys/block/{name}/stat").read_text().split()]
    return {"read_ios": f[0], "read_sectors": f[2], "write_ios": f[4], "write_sectors": f[6],
            "flush_ios": f[15] if len(f) > 15 else 0}


def _start_background(s: Scenario, ctx: Mapping[str, Any], log: Path,
                      say: Callable[[str], None], rid: str) -> Optional[subprocess.Popen]:
    if not s.background:
        return None
    cmd = _expand(s.background, ctx)
    say(f"{rid}: background: {shlex.join(cmd)}")
    with open(log, "wb") as lf:
        proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT)
    if _LEDGER is not None:
        _LEDGER.add(f"proc:{proc.pid}", "proc", pid=proc.pid,
                    start=labstate.proc_start(proc.pid), what="background")
    time.sleep(0.5)              # let it get going before the window opens
    if proc.poll() is not None:
        raise LabError(f"background: {shlex.join(cmd)} exited {proc.returncode}: "
                       f"{log.read_text(errors='replace').strip()[-800:]}")
    return proc


def _stop(proc: subprocess.Popen, what: str) -> None:
    """SIGTERM to PROC (ours, by PID), then SIGKILL if it does not end."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if _LEDGER is not None:
        _LEDGER.remove(f"proc:{proc.pid}")


def _proc_cpu_ticks(pid: int) -> Optional[int]:
    """utime + stime of PID (all its threads) in clock ticks, from /proc/PID/stat."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = raw[raw.rindex(")") + 2:].split()
    return int(f[11]) + int(f[12])       # fields 14 and 15 of proc(5)


def _attach_run(s: Scenario, cmd: list[str], ctx: Mapping[str, Any],
                paths: Mapping[str, Path], devs: Sequence[str]) -> dict[str, Any]:
    """Start CMD, attach to it for s.attach_s seconds while sampling its CPU time every
    20 ms, stop it. Returns the samples ([monotonic ns, utime+stime ticks])."""
    import threading
    pidfile = Path(ctx["pidfile"])
    log = Path(ctx["pidfile"]).with_suffix(".log")
    with open(log, "wb") as lf:
        proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT)
    if _LEDGER is not None:
        _LEDGER.add(f"proc:{proc.pid}", "proc", pid=proc.pid,
                    start=labstate.proc_start(proc.pid), what="workload")
    samples: list[list[int]] = []
    done = threading.Event()
    try:
        deadline = time.monotonic() + 30
        while not pidfile.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise LabError(f"attach: {shlex.join(cmd)} did not start: "
                               f"{log.read_text(errors='replace').strip()[-800:]}")
            time.sleep(0.02)
        pid = int(pidfile.read_text().strip())
        if pid != proc.pid:
            raise LabError(f"attach: {pidfile} names {pid}, not the workload ({proc.pid})")

        def sample() -> None:
            while not done.is_set():
                t = _proc_cpu_ticks(pid)
                if t is not None:
                    samples.append([time.monotonic_ns(), t])
                done.wait(0.02)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        full = [*iowhy_command(), "attach", "-q", "-o", str(paths["trace"]),
                "--label", s.label(),
                *[a for dv in devs for a in ("--dev", dv)], "-p", str(pid),
                "-d", f"{s.attach_s:g}"]
        with outfile.open_new(paths["record_log"], binary=False) as lf2:
            lf2.write(shlex.join(full) + "\n")
            lf2.flush()
            rec = subprocess.Popen(full, stdout=lf2, stderr=subprocess.STDOUT)
            with _noted(rec, "iowhy attach"):
                rc = _wait_record(rec)
        done.set()
        sampler.join()
        if rc != 0:
            tail = paths["record_log"].read_text(errors="replace").strip()[-1500:]
            raise LabError(f"iowhy attach exited {rc}: {tail}")
        if proc.poll() is not None:
            raise LabError(f"attach: the workload ended during the window "
                           f"(exit {proc.returncode})")
    finally:
        done.set()
        _stop(proc, "workload")
    return {"proc_cpu_samples": samples, "clk_tck": os.sysconf("SC_CLK_TCK"),
            "workload_pid": pid}


def analyze_run(s: Scenario, fs: str, disk: str, paths: Mapping[str, Path],
                disk_info: Mapping[str, Any], command: Sequence[str]) -> dict[str, Any]:
    """Report (text, JSON, HTML when available) and validation of a recorded run."""
    from iowhy import abi
    from iowhy.analysis import AnalysisConfig, analyze
    from iowhy.reports.terminal import render_report
    from iowhy.traceformat import read_trace
    tr = read_trace(str(paths["trace"]))
    from iowhy.reports.html import render_html
    full = analyze(tr, AnalysisConfig(figures=True, keep_causal=True))
    from iowhy.whatif.predict import for_report
    full["_whatif"] = for_report(tr, full)  # the page's "what if" (iowhy whatif)
    full.pop("_causal", None)
    report = {k: v for k, v in full.items() if not k.startswith("_")}
    outfile.write_output(paths["report_json"], json.dumps(report, indent=2) + "\n")
    outfile.write_output(paths["report_text"], render_report(report) + "\n")
    outfile.write_output(paths["report_html"], render_html(full))
    truth = emudisk.read_truth(paths["truth"])
    dname = f"loop{disk_info['minor']}" if disk_info else ""
    for dd in tr.meta.get("devices", []) or []:
        if (dd.get("major"), dd.get("minor")) == (disk_info["major"], disk_info["minor"]):
            dname = dd.get("name") or dname
    maj, mn = int(disk_info["major"]), int(disk_info["minor"])
    w0, w1 = int(report["trace"]["start_ns"]), int(report["trace"]["end_ns"])
    counts = validate.request_counts(truth, tr.records("request"), w0, w1, maj, mn)
    emulation = validate.emulation_latency(truth, tr.records("request"), w0, w1, maj, mn)
    val = validate.compare(report, truth, tr.meta, dname, maj, mn,
                           jitter_ns=emulation["jitter_ns"], delay_ns=emulation["total_ns"])
    dev = validate.find_device(report, maj, mn) or {}
    tsum = validate.truth_summary(truth, report, tr.meta, dname)
    fsv = report.get("fsync") or {}
    com = report.get("commits") or {}
    return {
        "scenario": s.name, "fs": fs, "disk": disk, "cache": s.cache,
        "cache_setting": CACHE_MODES[s.cache], "group": s.group,
        "label": s.label(),
        "summary": describe(s), "description": s.description.format(**s.params),
        "params": dict(s.params), "command": list(command),
        "device": {**{k: v for k, v in disk_info.items() if k != "independent"},
                   "name": dname},
        # what the run measured without iowhy (causal scenarios): CPU time samples,
        # block stat of an upper device, the workload's own timings
        "independent": disk_info.get("independent") or {},
        "files": {k: str(p) for k, p in paths.items() if p.exists() or k == "run"},
        "elapsed_ns": report["elapsed_ns"],
        "attribution_ns": report["attribution_ns"],
        "attribution_pct": report["attribution_pct"],
        "attribution_detail_ns": report.get("attribution_detail_ns"),
        "device_view": {
            "busy_ns": dev.get("busy_ns", 0),
            "busy_by_category_ns": dev.get("busy_by_category_ns", {}),
            "flush_count": (dev.get("flush") or {}).get("count", 0),
            "flush_total_ns": (dev.get("flush") or {}).get("total_ns", 0),
            "requests": dev.get("requests", 0),
        },
        "flushes": report["flushes"]["count"],
        "fsync": {"count": fsv.get("count", 0), "latency_ns": fsv.get("latency_ns"),
                  "split_ns": fsv.get("split_ns")},
        "commits": {"count": com.get("count", 0),
                    "fsyncs_per_commit": com.get("fsyncs_per_commit")},
        "placement_positioning_ns": {k: v.get("positioning_ns")
                                     for k, v in (report.get("placement") or {}).items()},
        "problems": report.get("problems", []),
        "lost_events": report.get("lost_events", 0),
        "request_events_lost": sum(int(tr.counters.get(k, 0))
                                   for k in abi.REQUEST_LOSS_COUNTERS),
        "truth": tsum,
        "request_counts": counts,
        "emulation": emulation,
        "validation": val,
        "ok": all(e["ok"] for e in val if e.get("comparable", True)),
    }


def render_run(r: Mapping[str, Any]) -> str:
    """A run as a few lines of text: the attribution and the validation table."""
    el = r["elapsed_ns"]
    att = r["attribution_pct"]
    top = sorted(att.items(), key=lambda kv: -kv[1])
    parts = ", ".join(f"{k} {v:.1f}%" for k, v in top if v >= 0.5)
    dv = r["device_view"]
    lines = [
        f"== {r['scenario']} on {r['fs']}, {r['disk']} ({r['cache_setting']})",
        f"   {r['summary']}",
        f"   elapsed {el / 1e9:.3f} s: {parts}",
        f"   device {r['device']['name']}: busy {dv['busy_ns'] / 1e9:.3f} s, "
        f"{dv['flush_count']} flushes ({dv['flush_total_ns'] / 1e9:.3f} s); "
        f"fsync calls {r['fsync']['count']}, commits {r['commits']['count']}, "
        f"fsyncs/commit {r['commits']['fsyncs_per_commit']}",
    ]
    rc = r.get("request_counts")
    if rc:
        tt, tc = rc["truth"], rc["trace"]
        lines.append(f"   requests served (truth / trace): reads {tt['reads']}/{tc['reads']}, "
                     f"writes {tt['writes']}/{tc['writes']}, flushes "
                     f"{tt['flushes']}/{tc['flushes']}" + ("" if tt == tc else "  MISMATCH"))
    em = r.get("emulation")
    if em and em["matched"]:
        lines.append(f"   emulation latency (loop + FUSE): median {em['median_ns'] / 1e3:.0f} us "
                     f"per request, {em['total_ns'] / 1e6:.1f} ms in all "
                     f"({100 * em['total_ns'] / max(el, 1):.2f}% of elapsed), jitter above "
                     f"the median {em['jitter_ns'] / 1e6:.1f} ms")
    if r.get("problems"):
        lines.append("   problems: " + "; ".join(r["problems"]))
    lines.append("")
    lines += ["   " + ln for ln in validate.render_table(r["validation"]).splitlines()]
    lines.append("")
    lines.append(f"   files: {Path(r['files']['run']).parent}/"
                 f"{run_id(r['scenario'], r['fs'], r['disk'])}.*")
    return "\n".join(lines)


def all_runs(fs: Optional[str] = None) -> list[tuple[str, str]]:
    """(scenario, fs) of `lab run all`: every scenario on each of its filesystems, or on
    FS only."""
    return [(n, f) for n, s in SCENARIOS.items() for f in s.filesystems
            if fs is None or f == fs]


def reanalyze(run_json: str | os.PathLike) -> dict[str, Any]:
    """Analyze and validate a recorded run again (after a change to iowhy's analysis),
    from the files a run left; rewrites its reports and .run.json."""
    prev = json.loads(Path(run_json).read_text())
    s = SCENARIOS[prev["scenario"]]
    # the files beside RUN_JSON (a run's directory may have been moved or copied)
    files = run_files(Path(run_json).parent,
                      run_id(prev["scenario"], prev["fs"], prev["disk"]))
    disk_info = {k: v for k, v in prev["device"].items() if k != "name"}
    disk_info["independent"] = prev.get("independent") or {}
    result = analyze_run(s, prev["fs"], prev["disk"], files, disk_info, prev["command"])
    result["run_seconds"] = prev.get("run_seconds")
    outfile.write_output(files["run"], json.dumps(result, indent=2) + "\n")
    return result


# -- gallery: the seeds' comparisons as `iowhy compare` pages -------------------------------

# (baseline A, B): each page explains why B differs from A, on the same filesystem.
GALLERY_PAIRS = (
    ("tar", "fsync-tar"), ("tar", "eatmydata-tar"), ("fsync-tar", "fsync-tar-wc-off"),
    ("wc-nobarrier", "wc-barrier"), ("wc-nobarrier", "wc-off"), ("wc-barrier", "wc-off"),
    ("fsync-tasks-1", "fsync-tasks-8"), ("fsync-tasks-8", "fsync-tasks-32"),
    ("sqlite-off", "sqlite-full"), ("fio-seq", "fio-rand"),
)


def gallery(out_dir: str | os.PathLike, disk: str = "hdd-7200",
            only: Optional[set[str]] = None) -> list[Path]:
    """Comparison pages (text and HTML) for every pair of
    GALLERY_PAIRS whose two runs are in OUT_DIR; with ONLY (run ids), just the pairs
    involving one of them. Returns the files written."""
    from iowhy.compare import compare
    from iowhy.reports.compare_text import render_compare
    from iowhy.reports.html import render_compare_html
    from iowhy.traceformat import read_trace
    out = Path(out_dir)
    written = []
    for a, b in GALLERY_PAIRS:
        for fs in FILESYSTEMS:
            ra, rb = run_id(a, fs, disk), run_id(b, fs, disk)
            if only is not None and ra not in only and rb not in only:
                continue
            ja, jb = out / f"{ra}.report.json", out / f"{rb}.report.json"
            if not (ja.exists() and jb.exists()):
                continue
            rep_a, rep_b = json.loads(ja.read_text()), json.loads(jb.read_text())
            meta_a = read_trace(str(out / f"{ra}.iowt")).meta
            meta_b = read_trace(str(out / f"{rb}.iowt")).meta
            result = compare(rep_a, rep_b, meta_a, meta_b)
            base = out / f"compare-{a}-vs-{b}-{fs}-{disk}"
            outfile.write_output(f"{base}.txt", render_compare(result) + "\n")
            written.append(Path(f"{base}.txt"))
            outfile.write_output(f"{base}.html", render_compare_html(rep_a, rep_b, result))
            written.append(Path(f"{base}.html"))
    return written
