"""The `iowhy` command line: one entry point, one subcommand per job.

Errors the user can fix end in one line on stderr (`iowhy: <what>` and a hint) and a
non-zero exit, never a traceback. Warnings go through `logging` to stderr.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import math
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from . import __version__, cmdline
from .commands import add_analysis_parsers
from .errors import (EXIT_FAIL, EXIT_NOT_FOUND, EXIT_USAGE, UserError, add_decode_ratio, load,
                     set_decode_ratio)

if TYPE_CHECKING:
    from .traceformat import Trace

# Modules that import numpy (abi, traceformat, the analysis) are imported where they are
# used: `iowhy record` stays the recorder's parent for the whole run, and numpy would
# hold 20 MiB of its memory meanwhile (bench/README, "Memory").

log = logging.getLogger("iowhy")

EXIT_NOT_EXECUTABLE = 126

# The recorder's limits (probes/recorder.h: MAX_DURATION_S, MAX_RINGBUF_MIB): a ring
# buffer map's size is a u32 power of two, so 2048 MiB is the largest the kernel takes.
MAX_DURATION_S = 2592000.0
MAX_RINGBUF_MIB = 2048
PF_KTHREAD = 0x00200000


# -- recorder ----------------------------------------------------------------------------

def find_recorder() -> str:
    """The C recorder: $IOWHY_RECORDER, the install's libexec, or the checkout's probes/."""
    cands = []
    if os.environ.get("IOWHY_RECORDER"):
        cands.append(Path(os.environ["IOWHY_RECORDER"]))
    cands.append(Path(sys.prefix) / "libexec" / "iowhy" / "iowhy-record")
    cands.append(Path(__file__).resolve().parents[2] / "probes" / "iowhy-record")
    for c in cands:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    raise UserError("the recorder iowhy-record is not installed",
                    "run `make install` from the iowhy source, or `make` there and set "
                    "IOWHY_RECORDER to its probes/iowhy-record")


def check_privileges() -> None:
    if os.geteuid() != 0:
        raise UserError("recording needs root (CAP_BPF and CAP_PERFMON)",
                        "run it with sudo")
    btf = os.environ.get("IOWHY_SYSFS_BTF", "/sys/kernel/btf/vmlinux")
    if not Path(btf).exists():
        raise UserError(f"this kernel has no BTF ({btf} is missing)",
                        "iowhy's CO-RE probes need a kernel built with CONFIG_DEBUG_INFO_BTF=y")


def parse_dev(spec: str) -> tuple[int, int]:
    """--dev accepts a block device path or MAJ:MIN."""
    from .metadata import block_device_number
    try:
        return block_device_number(spec)
    except ValueError as e:
        raise UserError(str(e), "pass a block device such as /dev/loop0 or MAJ:MIN") from None


_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _check_output_name(path: str) -> None:
    """-o names a file: "" or a path ending in / or . would have the recorder write
    PATH.partial-PID in a directory, record the whole workload, then fail to rename it."""
    if os.path.basename(path) in ("", ".", ".."):
        raise UserError(f"-o '{path}' is not a file name",
                        "give the trace's file name, e.g. -o out.iowt", EXIT_USAGE)


def _check_output(path: str) -> None:
    """Refuse what the recorder would refuse, before anything is loaded: the trace is
    written next to PATH and renamed onto it, never through a symlink or into a file
    that is not a regular one."""
    _check_output_name(path)
    d = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.exists(d) and not os.path.isdir(d):
        raise UserError(f"cannot write {path}: {d} is not a directory",
                        "choose an output path in an existing directory with -o")
    if not os.path.isdir(d):
        raise UserError(f"cannot write {path}: directory {d} does not exist",
                        "choose an output path in an existing directory with -o")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror}", "choose another -o path") from None
    if mode is not None and not stat.S_ISREG(mode):
        kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
        raise UserError(f"refusing to write {path}: it is {kind}",
                        "give a new name or the path of a regular file with -o")
    if not os.access(d, os.W_OK):
        raise UserError(f"cannot write {path}: {d} is not writable", "choose another -o path")


def _check_limits(args: argparse.Namespace) -> None:
    rb = args.ringbuf
    if rb < 1 or rb > MAX_RINGBUF_MIB or rb & (rb - 1):
        raise UserError(f"--ringbuf {rb} is not a power of two between 1 and "
                        f"{MAX_RINGBUF_MIB} MiB", "try --ringbuf 64 or 256", EXIT_USAGE)
    d = args.duration
    if d is not None and not (math.isfinite(d) and 0 < d <= MAX_DURATION_S):
        raise UserError(f"--duration {d} is not a number of seconds above 0 and at most "
                        f"{MAX_DURATION_S:.0f}", "leave it out to record until the end",
                        EXIT_USAGE)
    if args.label is not None:
        why = cmdline.check_label(args.label)
        if why:
            raise UserError(f"--label: {why}", "give a short name such as --label "
                            "'nightly import, 2000 files'", EXIT_USAGE)


def _metadata_fd(meta: dict) -> int:
    """The metadata in an anonymous file (memfd) the recorder inherits: nothing named
    is ever left behind, even when this process is killed."""
    fd = os.memfd_create("iowhy-meta")
    with os.fdopen(fd, "wb", closefd=False) as f:
        f.write(json.dumps(meta).encode())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _devices_below(meta: dict, devs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The devices the given ones' I/O reaches (a loop device's backing disk, dm/md
    slaves, followed to the bottom, and their filesystems' external log devices: META
    `lower_devices`), not already given: a wait on an upper device often ends with a
    completion on a lower one, so with --dev both are recorded and the lower one's
    requests are the upper one's, not background."""
    out: list[tuple[int, int]] = []
    for d in meta.get("lower_devices") or []:
        dev = (d.get("major"), d.get("minor"))
        if None not in dev and dev not in devs and dev not in out:
            out.append(dev)
    return out


def _run_recorder(args: argparse.Namespace, target: list[str]) -> int:
    from .metadata import collect
    _check_limits(args)
    _check_output_name(args.output)  # a usage error: before root is asked for
    cgroup = None
    if getattr(args, "cgroup", None) is not None:
        from .cgroups import cgroup_target
        cgroup = cgroup_target(args.cgroup, force=getattr(args, "force", False))
    check_privileges()
    recorder = find_recorder()
    _check_output(args.output)
    devs = [parse_dev(d) for d in (args.dev or [])]
    command = None
    if target and target[0] != "-p":  # as the trace keeps it (the recorder says if cut)
        from .names import CMD_LIMIT, clip_command
        lead = target[:1] if target[0] == "--" else []
        command = lead + clip_command(target[len(lead):], entries=CMD_LIMIT - len(lead))[0]
    try:  # the metadata can take a moment (superblocks, sysfs): Ctrl-C says where it was
        meta = collect(command=command, devices=devs or None)
    except KeyboardInterrupt:
        raise UserError("stopped by SIGINT while collecting the metadata: nothing was "
                        "recorded" + (" and the workload was not started"
                                      if command is not None else ""), "",
                        128 + signal.SIGINT) from None
    if args.label is not None:
        meta["label"] = args.label
    if cgroup is not None:
        meta["cgroup"] = cgroup
    mfd = _metadata_fd(meta)
    cmd = [recorder, "-o", args.output, "--meta-fd", str(mfd), "-r", str(args.ringbuf)]
    for maj, mn in devs + _devices_below(meta, devs):
        cmd += ["-D", f"{maj}:{mn}"]
    if args.duration is not None:
        cmd += ["-d", repr(args.duration)]
    if getattr(args, "force", False):
        cmd.append("--force")
    if cgroup is not None:
        cmd += ["--cgroup", cgroup["path"]]
    flight = getattr(args, "flight", None)
    if flight is not None:
        cmd += ["--flight", repr(flight)]
        for t in args.trigger or []:
            cmd += ["--trigger", t]
        if args.after is not None:
            cmd += ["--after", repr(args.after)]
        if args.max_dumps is not None:
            cmd += ["--max-dumps", str(args.max_dumps)]
        if args.dump_on_exit:
            cmd.append("--dump-on-exit")
    if args.quiet:
        cmd.append("-q")
    cmd += ["--syscalls", args.syscalls]
    if args.eager_writes:
        cmd.append("--eager-writes")
    if args.probe_stats:
        cmd.append("--probe-stats")
    if getattr(args, "dry_run", False):
        cmd.append("-n")
    cmd += target
    # SIGINT and SIGTERM sent to this process stop the recording: they are passed on to
    # the recorder, which stops the workload (run mode) and writes its trailer. Ctrl-C
    # reaches the recorder directly too (same process group): a second one changes
    # nothing. If this process is killed, the recorder stops by itself (PDEATHSIG).
    procs: list[subprocess.Popen] = []
    pending: list[int] = []

    def forward(sig: int, _frame: object) -> None:
        if procs:
            procs[0].send_signal(sig)
        else:
            pending.append(sig)

    def block_usr1() -> None:
        # the recorder takes SIGUSR1 once its handler is set (it unblocks it then): one
        # sent while it starts waits for it
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})

    old_int = signal.signal(signal.SIGINT, forward)
    old_term = signal.signal(signal.SIGTERM, forward)
    # --flight: SIGUSR1 asks the recorder for a dump (it would end this process otherwise)
    old_usr1 = signal.signal(signal.SIGUSR1, forward) if flight is not None else None
    try:
        procs.append(subprocess.Popen(cmd, pass_fds=(mfd,),
                                      preexec_fn=block_usr1 if flight is not None else None))
        os.close(mfd)
        for sig in pending:
            procs[0].send_signal(sig)
        rc = procs[0].wait()
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
        if old_usr1 is not None:
            signal.signal(signal.SIGUSR1, old_usr1)
        if not procs:
            os.close(mfd)
    if rc < 0:
        rc = 128 - rc
    if (not getattr(args, "dry_run", False) and not args.quiet and flight is None
            and os.path.exists(args.output)
            and os.path.getsize(args.output) > 64):
        _after_record(args.output)
    return rc


def _after_record(path: str) -> None:
    """Print the short "where the time went" once a recording stops."""
    from .summary import short_summary
    from .traceformat import TraceError
    try:
        text = short_summary(path)
    except TraceError as e:
        log.warning("cannot summarize %s: %s", path, e)
        return
    if text:
        print(text, file=sys.stderr)


def cmd_record(args: argparse.Namespace) -> int:
    target = list(args.command)
    if target and target[0] == "--":
        target = target[1:]
    if not target and not args.dry_run:
        raise UserError("no workload command given", "usage: iowhy record -o OUT -- CMD [ARGS...]",
                        EXIT_USAGE)
    if target:
        _check_command(target[0])
    return _run_recorder(args, ["--", *target] if target else [])


def _check_command(name: str) -> None:
    """As a shell decides: missing -> 127; a directory or a file without x -> 126."""
    if "/" in name:
        cands = [name]
    else:
        if shutil.which(name) is not None:
            return
        cands = [os.path.join(d or ".", name)
                 for d in os.environ.get("PATH", os.defpath).split(os.pathsep)]
    for c in cands:
        if not os.path.exists(c):
            continue
        if os.path.isdir(c):
            if "/" in name:
                raise UserError(f"cannot run {name}: it is a directory",
                                "give an executable file", EXIT_NOT_EXECUTABLE)
            continue
        if not os.access(c, os.X_OK):
            raise UserError(f"cannot run {name}: permission denied (not executable)",
                            f"chmod +x {c}, or run it through its interpreter",
                            EXIT_NOT_EXECUTABLE)
        return
    raise UserError(f"command not found: {name}",
                    "check the spelling or give the full path", EXIT_NOT_FOUND)


def _check_target(pid: int, force: bool) -> None:
    """Refuse a zombie (attach would never end), and PID 1 and kernel threads (attach
    would follow the whole system) unless --force."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes() if pid > 0 else b""
    except OSError:
        raw = b""
    fields = raw[raw.rfind(b")") + 2:].split() if b")" in raw else []
    if len(fields) < 7:
        raise UserError(f"no process with PID {pid}", "check the PID with `pgrep -a NAME`")
    state, flags = fields[0], int(fields[6])
    if state in (b"Z", b"X"):
        raise UserError(f"PID {pid} has exited (a zombie its parent has not reaped): "
                        "there is nothing to record", "attach to a running process")
    if force:
        return
    if pid == 1 or pid == 2:
        raise UserError(f"refusing to attach to PID {pid} "
                        f"({'init' if pid == 1 else 'kthreadd'}): it would follow every "
                        "process on the system", "give --force to record that")
    if flags & PF_KTHREAD:
        raise UserError(f"refusing to attach to PID {pid}: it is a kernel thread",
                        "give --force to record it anyway")


FLIGHT_MAX_MIB = 256  # probes/recorder.h
FLIGHT_MAX_S = 86400.0
TRIGGER_RE = re.compile(r"(fsync|request|flush|blocked)>([0-9]+(?:\.[0-9]+)?)(ns|us|ms|s)?")


def _check_flight(args: argparse.Namespace) -> None:
    """--flight and its options, as the recorder takes them (one line otherwise)."""
    if args.flight is None:
        if (args.trigger or args.after is not None or args.max_dumps is not None
                or args.dump_on_exit):
            raise UserError("--trigger, --after, --max-dumps and --dump-on-exit need "
                            "--flight SECONDS",
                            "e.g. iowhy attach -p PID --flight 30 --trigger fsync>200ms",
                            EXIT_USAGE)
        return
    if not (math.isfinite(args.flight) and 1 <= args.flight <= FLIGHT_MAX_S):
        raise UserError(f"--flight {args.flight} is not a number of seconds from 1 to "
                        f"{FLIGHT_MAX_S:.0f}", "e.g. --flight 30", EXIT_USAGE)
    if args.after is not None and not (math.isfinite(args.after)
                                       and 0 <= args.after <= FLIGHT_MAX_S):
        raise UserError(f"--after {args.after} is not a number of seconds from 0 to "
                        f"{FLIGHT_MAX_S:.0f}", "e.g. --after 1", EXIT_USAGE)
    if args.max_dumps is not None and not 1 <= args.max_dumps <= 10000:
        raise UserError(f"--max-dumps {args.max_dumps} is not from 1 to 10000",
                        "e.g. --max-dumps 10", EXIT_USAGE)
    for t in args.trigger or []:
        m = TRIGGER_RE.fullmatch(t)
        if not m or float(m.group(2)) <= 0:
            raise UserError(f"--trigger {t!r} is not KIND>TIME",
                            "KIND is fsync, request, flush or blocked; TIME a number with "
                            "ns, us, ms (the default) or s, e.g. fsync>200ms", EXIT_USAGE)
    if len(args.trigger or []) > 16:
        raise UserError("more than 16 --trigger", "combine them", EXIT_USAGE)


def cmd_attach(args: argparse.Namespace) -> int:
    _check_flight(args)
    if (args.pid is not None) + (args.cgroup is not None) + args.all != 1:
        raise UserError("attach needs one target: -p PID, --cgroup PATH or -a",
                        "e.g. iowhy attach -p 1234, or iowhy attach --cgroup "
                        "/sys/fs/cgroup/system.slice/NAME.service", EXIT_USAGE)
    if args.cgroup is not None:
        return _run_recorder(args, [])
    if args.all:  # every process: init's tree, as -p 1 --force
        args.force = True
        return _run_recorder(args, ["-p", "1"])
    _check_target(args.pid, args.force)
    return _run_recorder(args, ["-p", str(args.pid)])


def syscall_totals(tr: Trace) -> list[dict]:
    """The kernel's per-syscall count and total time (`syscall` records), largest total
    first; which syscalls they cover depends on the recording's `syscalls` mode."""
    from .syscalls import syscall_name
    sc = tr.records("syscall")
    arch = tr.meta.get("machine")
    out = [{"name": syscall_name(int(nr), arch), "nr": int(nr), "count": int(c),
            "total_ns": int(t)}
           for nr, c, t in zip(sc["syscall_nr"], sc["count"], sc["total_ns"]) if c]
    return sorted(out, key=lambda e: (-e["total_ns"], e["nr"]))


def probe_stats(tr: Trace) -> list[dict] | None:
    """TRAILER `probe_stats` (recorded with --probe-stats) as a list, costliest program
    first: `program`, `runs`, `run_ns`; None when the trace has none."""
    ps = (tr.trailer or {}).get("probe_stats")
    if not isinstance(ps, dict):
        return None
    rows = [{"program": str(k), "runs": int(v.get("runs", 0)), "run_ns": int(v.get("run_ns", 0))}
            for k, v in ps.items() if isinstance(v, dict)]
    return sorted(rows, key=lambda r: (-r["run_ns"], r["program"]))


def info_dict(tr: Trace) -> dict:
    from . import abi
    from .traceformat import recording
    records = {name: tr.count(name) for name in abi.RECORD_NAMES}
    rec = recording(tr)
    return {
        "path": rec["path"],
        "format_version": rec["format_version"],
        "iowhy_version": rec["iowhy_version"],
        "host": rec["host"],
        "kernel": rec["kernel"],
        "command": rec["command"],
        "start_ns": tr.start_ns,
        "end_ns": tr.end_ns,
        "duration_ns": tr.duration_ns,
        "records": records,
        "counters": tr.counters,
        "lost_events": rec["lost_events"],
        "truncated": rec["truncated"],
        "missing_bytes": tr.missing_bytes,
        "bad_regions": tr.bad_regions,
        "unknown_chunks": tr.unknown_chunks,
        "chunks": tr.chunk_count,
        "stop_reason": rec["stop_reason"],
        "exit_status": rec["exit_status"],
        "probes": tr.recorder.get("probes", {}),
        "attach_mode": tr.recorder.get("attach_mode"),
        "task_state": tr.recorder.get("task_state"),
        "syscalls_mode": tr.recorder.get("syscalls"),
        "syscalls": syscall_totals(tr),
        "recorder_cpu_ns": (tr.trailer or {}).get("recorder_cpu_ns"),
        "chunk_zstd": (tr.trailer or {}).get("chunk_zstd"),
        "probe_stats": probe_stats(tr),
        "devices": [{k: d.get(k) for k in ("name", "major", "minor", "size_bytes", "rotational",
                                           "write_cache", "fua", "scheduler")}
                    for d in rec["devices"]],
        "filesystems": [{k: f.get(k) for k in ("source", "mountpoint", "fstype", "options", "log")}
                        for f in rec["filesystems"]],
    }


def cmd_info(args: argparse.Namespace) -> int:
    from .progress import progress
    with progress(f"reading {args.trace}") as step:
        step("read trace")
        tr = load(args.trace)
        step("summary")
        d = info_dict(tr)
    if tr.damage.damaged:  # only then: a sound trace's output is as before
        d["damage"] = tr.damage.as_dict()
    if isinstance(tr.meta.get("cgroup"), dict):  # recorded with --cgroup
        d["cgroup"] = tr.meta["cgroup"]
    flight = (tr.trailer or {}).get("flight")
    if isinstance(flight, dict):  # a flight recorder's dump
        d["flight"] = flight
    if args.json:
        json.dump(d, sys.stdout, indent=2, sort_keys=True, allow_nan=False)
        print()
        return 0
    from .reports.info import render_info
    print(render_info(d, tr.problems()))
    return 0


# -- parser ------------------------------------------------------------------------------

def _record_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("recording")
    g.add_argument("-o", "--output", default="iowhy.iowt",
                   help="trace file to write, mode 0600, owned by the invoking user under "
                        "sudo. Written as OUTPUT.partial-PID and renamed to OUTPUT when "
                        "recording stops (a crashed recorder leaves the partial file, "
                        "readable up to its last complete chunk); an existing OUTPUT is kept "
                        "as OUTPUT.old, as perf does; a symlink or a file that is not a "
                        "regular one is refused (default: %(default)s)")
    g.add_argument("-d", "--duration", type=float, default=None, metavar="SEC",
                   help="stop recording after SEC seconds, more than 0 and at most "
                        f"{MAX_DURATION_S:.0f} (30 days); the workload keeps running "
                        "(default: when the workload exits)")
    g.add_argument("-l", "--label", metavar="TEXT",
                   help="name the workload in every report's headings and in comparisons "
                        f"(at most {cmdline.LABEL_CHARS} characters; META `label`); the "
                        "exact command line is kept in the trace either way (default: the "
                        "command, shortened)")
    g.add_argument("-r", "--ringbuf", type=int, default=64, metavar="MiB",
                   help="BPF ring buffer size in MiB, a power of two from 1 to "
                        f"{MAX_RINGBUF_MIB} (the kernel's largest) (default: %(default)s)")
    g.add_argument("--dev", action="append", metavar="DEV",
                   help="only record block requests of this device (path or MAJ:MIN) and of "
                        "the devices below it (a loop device's backing disk, dm/md slaves); "
                        "repeatable (default: every device)")
    g.add_argument("--syscalls", choices=("sync", "all"), default="sync",
                   help="sync: count and time only the fsync and write families, about +16 ns "
                        "per other syscall on the test VM; all: count and time every syscall "
                        "of the workload, about +145 ns per syscall. Off-CPU time is named by "
                        "its syscall either way (default: %(default)s)")
    g.add_argument("--eager-writes", action="store_true",
                   help="with --syscalls sync, time write(2) and its family from the start "
                        "(about +175 ns per write on the test VM). Default: the write family "
                        "is attached at the first O_SYNC/O_DSYNC write the filesystem syncs, "
                        "which is then timed from that sync event (flagged late_entry)")
    g.add_argument("--probe-stats", action="store_true",
                   help="measure what the probes cost: runs and run time of each BPF program "
                        "over the recording, shown by `iowhy info` (kernel BPF statistics, "
                        "about +50 ns per program run on the test VM; default: off)")
    g.add_argument("--cgroup", metavar="PATH",
                   help="record every process of this cgroup v2 and of the cgroups below it, "
                        "those that join while recording included (moved in, or forked into "
                        "it); a process is followed from then on until it exits. With record, "
                        "beside CMD, until CMD exits; with attach, until Ctrl-C, --duration or "
                        "the cgroup's removal. cgroup v1 is refused (META `cgroup`)")
    g.add_argument("-q", "--quiet", action="store_true", help="print nothing when recording stops")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="iowhy",
        description="Where did the elapsed time of this I/O-heavy workload go? "
                    "Record block requests, flushes, journal commits, fsyncs and off-CPU time "
                    "with eBPF, then attribute the elapsed time.")
    p.add_argument("-V", "--version", action="version", version=f"iowhy {__version__}")
    p.add_argument("--log-level", default="warning",
                   choices=["debug", "info", "warning", "error"],
                   help="stderr log level (default: %(default)s)")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    r = sub.add_parser("record", help="run a command and record where its time goes",
                       description="Attach every probe, start CMD, record until it exits. "
                                   "Exits with CMD's exit status (126: not executable, "
                                   "127: not found). Ctrl-C, SIGINT or SIGTERM stop the "
                                   "recording: CMD gets the same signal and is waited for "
                                   "(SIGKILL after 5 s), and its status is recorded.")
    _record_options(r)
    r.add_argument("-n", "--dry-run", action="store_true",
                   help="load and attach every probe, then detach and exit")
    r.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]",
                   help="the workload")
    r.set_defaults(func=cmd_record)

    a = sub.add_parser("attach", help="record a running process and its future children",
                       description="Track PID (all its threads) and every child it forks from "
                                   "now on, until it exits, Ctrl-C or --duration; or, with "
                                   "--cgroup PATH, every process of a cgroup v2. The "
                                   "target is never signalled.")
    a.add_argument("-p", "--pid", type=int, help="process to attach to (or --cgroup PATH, -a)")
    a.add_argument("-a", "--all", action="store_true",
                   help="every process on the system (init's tree, as -p 1 --force)")
    a.add_argument("--force", action="store_true",
                   help="attach even to PID 1, a kernel thread (PID 2, kthreadd, forks "
                        "them all) or the root cgroup (--cgroup), which follows every process on "
                        "the system")
    _record_options(a)
    f = a.add_argument_group("flight recorder")
    f.add_argument("--flight", type=float, metavar="SECONDS",
                   help="stay attached until Ctrl-C (or --duration) keeping only the records "
                        "of the last SECONDS in memory, at most "
                        f"{FLIGHT_MAX_MIB} MiB of compressed chunks (beyond it the oldest are "
                        "dropped and counted on the first line of every output of the dump), "
                        "and 2 MiB naming the cgroup of each live thread; "
                        "on SIGUSR1 or a --trigger, write them and --after seconds more to "
                        "OUTPUT, then OUTPUT.1.iowt, OUTPUT.2.iowt, ...; each dump is a trace "
                        "that says it is a flight window and what fired when")
    f.add_argument("--trigger", action="append", metavar="EXPR",
                   help="write the window when fsync>TIME (an fsync-family call), request>TIME "
                        "(a block request, submission to completion), flush>TIME (a cache "
                        "flush) or blocked>TIME (a workload thread in uninterruptible sleep, "
                        "D, that long, to its wakeup) is seen; TIME in ns, us, ms (default) "
                        "or s, e.g. fsync>200ms; repeatable. A trigger while a dump is "
                        "pending joins that dump")
    f.add_argument("--after", type=float, metavar="SECONDS",
                   help="how long to keep recording past a trigger before writing the dump "
                        "(default: 1)")
    f.add_argument("--max-dumps", type=int, metavar="N",
                   help="stop after N dumps (default: 10)")
    f.add_argument("--dump-on-exit", action="store_true",
                   help="also write the window when the recording stops (Ctrl-C, SIGTERM, "
                        "--duration, the target's exit), its trigger `stop (SIGINT)`... "
                        "(default: only SIGUSR1 and the triggers write; a dump a trigger made "
                        "pending is written at the stop in any case)")
    a.set_defaults(func=cmd_attach)

    i = sub.add_parser("info", help="what a trace holds: records, losses, devices",
                       description="Summarize a trace file: counts per record type, loss "
                                   "counters, truncation, devices and filesystems.")
    i.add_argument("trace", help="trace file (.iowt)")
    i.add_argument("--json", action="store_true", help="print JSON (keys in docs/trace-format.md)")
    i.set_defaults(func=cmd_info)

    add_analysis_parsers(sub)
    from .whatif.cli import add_whatif_parser
    add_whatif_parser(sub)
    from .top import add_top_parser
    add_top_parser(sub)
    from .export.cli import add_export_parsers
    add_export_parsers(sub)
    for name in READING_COMMANDS:  # each command that reads traces
        add_decode_ratio(sub.choices[name])
    return p


READING_COMMANDS = ("info", "report", "hist", "compare", "requests", "export", "query")


_PARSER: list[argparse.ArgumentParser] = []


def _import_numpy() -> None:
    """Import numpy before the command starts, a Ctrl-C meanwhile ending the process by
    the signal (sigint.py): numpy turns a KeyboardInterrupt inside its C extensions'
    import into an ImportError and a page of advice on broken installs."""
    if "numpy" not in sys.modules:
        from .sigint import with_default_sigint
        with_default_sigint(lambda: importlib.import_module("numpy"))


def main(argv: list[str] | None = None) -> int:
    """The `iowhy` command: its exit status. Ctrl-C at any point of it (building the
    parser, the command, printing its error) exits with 130, without a traceback."""
    try:
        return _command(argv)
    except KeyboardInterrupt:
        return 130


def _command(argv: list[str] | None) -> int:
    # One parser per process: building it (every subcommand's help through gettext)
    # costs more than most commands on a small trace, and tests call main() thousands of
    # times in one process. Parsing leaves no state in it.
    if not _PARSER:
        _PARSER.append(build_parser())
    parser = _PARSER[0]
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="iowhy: %(levelname)s: %(message)s")
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.cmd not in ("record", "attach"):  # those two never import numpy
        _import_numpy()
    from .outfile import flush_stdout, guarded_stdout, silence_stdout
    try:
        set_decode_ratio(getattr(args, "decode_ratio", None))
        with guarded_stdout():      # a full stdout: one line, not a traceback
            rc = func(args)
            flush_stdout()          # ... nor an error at exit
        return rc
    except UserError as e:
        from .escape import printable
        msg = f"iowhy: {e}"
        if e.hint:
            msg += f" ({e.hint})"
        print(printable(msg), file=sys.stderr)
        return e.code
    except OverflowError as e:  # times of a damaged trace too far apart to key
        from .escape import printable
        print(printable(f"iowhy: cannot analyze this trace: {e} (its times are out of "
                        "range: the trace is damaged; `iowhy info` shows what it holds)"),
              file=sys.stderr)
        return EXIT_FAIL
    except MemoryError:  # a trace read whole, but too large to analyze in this much memory
        print("iowhy: not enough memory for this command (run it where there is more "
              "memory, or raise the address-space limit: ulimit -v)", file=sys.stderr)
        return EXIT_FAIL
    except BrokenPipeError:
        silence_stdout()    # the reader went away (`| head`): exit quietly
        return 0
