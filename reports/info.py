"""The human `iowhy info` output: what a trace holds, what it lost, where it came from.

render_info() takes the dictionary `iowhy info --json` prints (cli.info_dict) and the
trace's problems in words (Trace.problems()) and returns text at most 100 columns wide.
"""

from __future__ import annotations

import shlex
import textwrap
from typing import Any, Sequence

from .escape import printable
from .fmt import WIDTH, aligned

_LABEL = 22  # width of the "label:" column of the key/value lines


def _cut(s: str, width: int, keep: str = "head") -> str:
    """Shorten `s` to `width` columns with "..." (keeping its head or its tail)."""
    if len(s) <= width:
        return s
    if width <= 3:
        return s[:width]
    if keep == "tail":
        return "..." + s[-(width - 3):]
    return s[:width - 3] + "..."


def _kv(label: str, value: Any) -> str:
    text = "-" if value is None or value == "" else str(value)
    return _cut(f"{label + ':':<{_LABEL}}{text}", WIDTH)


def _command(cmd: Any) -> str:
    if cmd is None or cmd == "" or cmd == []:
        return "-"
    if isinstance(cmd, (list, tuple)):
        return shlex.join(str(c) for c in cmd)
    return str(cmd)


def _yes_no(v: Any) -> str:
    if v is None or v == "":
        return "?"
    if isinstance(v, str):
        return v
    return "yes" if v else "no"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool],
           indent: int = 2) -> list[str]:
    """Aligned columns; right[i] right-aligns column i."""
    widths = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))

    def line(cells: Sequence[str]) -> str:
        return _cut(aligned(cells, widths, right, indent), WIDTH)

    return [line(headers)] + [line(r) for r in rows]


def _duration(d: dict) -> str:
    ns = d.get("duration_ns") or 0
    if not ns:
        return "unknown (no recorder start time or end time)"
    return f"{ns / 1e9:.3f}"


def _stop(d: dict) -> str:
    reason = d.get("stop_reason")
    if reason is None:
        return "unknown (no trailer)"
    status = d.get("exit_status")
    return f"{reason} (exit status {status})" if status is not None else str(reason)


def _records(d: dict) -> list[str]:
    recs = d.get("records") or {}
    rows = [[name, f"{int(n):,}"] for name, n in recs.items()]
    rows.append(["total", f"{sum(int(n) for n in recs.values()):,}"])
    return _table(["record type", "records (count)"], rows, [False, True])


def _counters(d: dict) -> list[str]:
    nonzero = {k: int(v) for k, v in (d.get("counters") or {}).items() if v}
    if not nonzero:
        src = "trailer" if d.get("stop_reason") is not None else "last progress chunk"
        if not d.get("counters"):
            return [_kv("counters", "none recorded (no trailer or progress chunk)")]
        return [_kv("counters", f"all zero (from the {src})")]
    rows = [[k, f"{v:,}"] for k, v in sorted(nonzero.items())]
    out = [f"counters (non-zero; lost events: {int(d.get('lost_events') or 0):,})"]
    return out + _table(["counter", "value (count)"], rows, [False, True])


def _probes(d: dict) -> list[str]:
    probes = d.get("probes") or {}
    if not probes:
        return [_kv("probes", "unknown (no recorder chunk)")]
    skipped = {k: str(v) for k, v in probes.items() if str(v).startswith("skipped")}
    attached = len(probes) - len(skipped)
    out = [_kv("probes (count)", f"{attached} attached, {len(skipped)} skipped")]
    for name, why in sorted(skipped.items()):
        reason = why.split(":", 1)[1].strip() if ":" in why else "no reason given"
        out.append(_cut(f"  skipped {name}: {reason}", WIDTH))
    return out


SYSCALL_ROWS = 10


def _syscalls(d: dict) -> list[str]:
    """The per-syscall totals, largest first: which calls cost the workload the most time
    (on and off CPU). With --syscalls sync only the fsync and write families are there."""
    sc = d.get("syscalls") or []
    mode = d.get("syscalls_mode")
    scope = {"sync": "fsync and write families only (--syscalls sync)",
             "all": "every syscall (--syscalls all)"}.get(str(mode), "unknown")
    if not sc:
        return [_kv("syscalls", f"none counted; timed: {scope}")]
    rows = [[_cut(str(e["name"]), 20), str(e["count"]), f"{e['total_ns'] / 1e6:.3f}",
             f"{e['total_ns'] / e['count'] / 1e3:.1f}"] for e in sc[:SYSCALL_ROWS]]
    more = len(sc) - SYSCALL_ROWS
    tail = [f"  ... {more} more in `iowhy info --json`"] if more > 0 else []
    return ([f"syscalls (timed: {scope}), largest total first"]
            + _table(["syscall", "calls (count)", "total (ms)", "mean (us)"], rows,
                     [False, True, True, True]) + tail)


PROBE_ROWS = 8


def _cost(d: dict) -> list[str]:
    """What recording cost while it ran: the recorder's own CPU time, and with
    --probe-stats the kernel's count and run time of each BPF program (every event on the
    machine, not only the workload's; the programs run on the CPU of the event, so their
    time is taken from whatever ran there). Compare both with duration x CPUs."""
    cpu = d.get("recorder_cpu_ns")
    out = []
    if isinstance(cpu, dict):
        u, s = int(cpu.get("user", 0)), int(cpu.get("system", 0))
        out.append(_kv("recorder cpu (ms)", f"{(u + s) / 1e6:.1f} (user {u / 1e6:.1f}, "
                                            f"system {s / 1e6:.1f}) while recording"))
    else:
        out.append(_kv("recorder cpu (ms)", "not recorded (older recorder)"))
    z = d.get("chunk_zstd")
    if isinstance(z, dict) and z.get("level"):
        raw, stored = int(z.get("data_bytes", 0)), int(z.get("stored_bytes", 0))
        ratio = f", {raw / stored:.2f}x" if stored else ""
        out.append(_kv("compression", f"zstd {z['level']}: {raw:,} -> {stored:,} bytes"
                                      f"{ratio}, {int(z.get('cpu_ns', 0)) / 1e6:.1f} ms cpu"))
    ps = d.get("probe_stats")
    if ps is None:
        out.append(_kv("probe cost", "not measured (record with --probe-stats)"))
        return out
    total = sum(r["run_ns"] for r in ps)
    runs = sum(r["runs"] for r in ps)
    out.append(_kv("probe cost (ms)", f"{total / 1e6:.1f} in {runs:,} program runs "
                                      "(with the statistics' own clock reads)"))
    rows = [[_cut(r["program"], 28), f"{r['runs']:,}", f"{r['run_ns'] / 1e6:.2f}",
             f"{r['run_ns'] / max(r['runs'], 1):.0f}"] for r in ps[:PROBE_ROWS]]
    more = len(ps) - PROBE_ROWS
    tail = [f"  ... {more} more in `iowhy info --json`"] if more > 0 else []
    return out + _table(["program", "runs (count)", "total (ms)", "per run (ns)"], rows,
                        [False, True, True, True]) + tail


def _devices(d: dict) -> list[str]:
    devs = d.get("devices") or []
    if not devs:
        return [_kv("devices", "none described (no META chunk)")]
    rows = []
    for v in devs:
        size = v.get("size_bytes")
        rows.append([
            _cut(str(v.get("name") or "?"), 16),
            f"{v.get('major', '?')}:{v.get('minor', '?')}",
            f"{size / 2**30:.2f}" if isinstance(size, (int, float)) else "?",
            _yes_no(v.get("rotational")),
            _cut(_yes_no(v.get("write_cache")), 13),
            _yes_no(v.get("fua")),
            _cut(str(v.get("scheduler") or "-"), 16),
        ])
    return ["devices"] + _table(
        ["name", "maj:min", "size (GiB)", "rotational", "write cache", "fua", "scheduler"],
        rows, [False, False, True, False, False, False, False])


def _log_bytes(log: dict) -> int | None:
    if isinstance(log.get("bytes"), (int, float)):
        return int(log["bytes"])
    ranges = log.get("ranges")
    if isinstance(ranges, list) and ranges:
        try:
            return sum(int(e) - int(s) for s, e in ranges) * 512
        except (TypeError, ValueError):
            return None
    return None


def _filesystems(d: dict) -> list[str]:
    fss = d.get("filesystems") or []
    if not fss:
        return [_kv("filesystems", "none described (no META chunk)")]
    rows = []
    for f in fss:
        log = f.get("log") if isinstance(f.get("log"), dict) else {}
        lb = _log_bytes(log)
        rows.append([
            _cut(str(f.get("fstype") or "?"), 8),
            _cut(str(f.get("source") or "?"), 24, keep="tail"),
            _cut(str(f.get("mountpoint") or "?"), 28, keep="tail"),
            _cut(str(log.get("kind") or "-"), 14),
            f"{lb / 2**20:.1f}" if lb else "-",
        ])
    return ["filesystems"] + _table(
        ["fstype", "source", "mountpoint", "log kind", "log (MiB)"],
        rows, [False, False, False, False, True])


def render_info(d: dict, problems: list[str]) -> str:
    """The `iowhy info` text for info_dict `d`; `problems` come first as WARNING lines."""
    out: list[str] = []
    for p in problems:
        out += textwrap.wrap(printable(f"WARNING: {p}"), WIDTH, subsequent_indent=" " * 9,
                             break_long_words=True, break_on_hyphens=False)
    if problems:
        out.append("")
    host, kernel = d.get("host"), d.get("kernel")
    out += [
        _kv("trace", d.get("path")),
        _kv("format version", d.get("format_version")),
        _kv("iowhy version", d.get("iowhy_version")),
        _kv("host / kernel", f"{host or '?'} / {kernel or '?'}"),
        _kv("command", _command(d.get("command"))),
    ]
    cg = d.get("cgroup")
    if cg:  # only a recording with --cgroup has one
        out.append(_kv("cgroup", f"{printable(str(cg.get('path')))} (id {cg.get('id')})"))
    out += [
        _kv("duration (s)", _duration(d)),
        _kv("stop reason", _stop(d)),
        _kv("chunks (count)", d.get("chunks")),
    ]
    damage = [(d.get("missing_bytes"), "unreadable(bytes)"),
              (d.get("bad_regions"), "damaged regions (count)"),
              (d.get("unknown_chunks"), "unknown chunks (count)")]
    if any(v for v, _ in damage):
        out.append(_kv("damage", ", ".join(f"{label} {v}" for v, label in damage if v)))
    out.append("")
    out += _records(d)
    out.append("")
    out += _counters(d)
    out.append("")
    out += _probes(d)
    out += _cost(d)
    out.append("")
    out += _syscalls(d)
    out.append("")
    out += _devices(d)
    out.append("")
    out += _filesystems(d)
    return "\n".join(_cut(printable(line), WIDTH) for line in out)
