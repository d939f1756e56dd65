"""The terminal report of `iowhy report`: plain text, every line at most 100 columns.

Renders the dict of iowhy.analysis.analyze(); computes nothing new.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from iowhy import cmdline
from iowhy.abi import OPEN_END_VERSION
from iowhy.categories import display_order  # the categories' order: read at each use
from iowhy.findings import fmt_ns, plural, served_text  # one format for findings and tables

from .escape import printable
from .fmt import (SERVED_BELOW_NOTE, WIDTH, cgroup_name, fit_line, fmt_count, fmt_mib,
                  fmt_pct, remapped_note, served_below, short_command, wrap_text, yes_no)
from .units import DEFAULT_TIME_UNIT, label, time_text

BAR = 46


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f}"


def title(r: Mapping[str, Any]) -> str:
    """The workload's name in headings: its label, else its short command."""
    return cmdline.title(r.get("trace") or {})


def damage_first(damage: Any, who: str = "") -> list[str]:
    """The damage line that comes first in every output of a damaged trace (`damage` is
    Damage.as_dict(), in results as "damage"); [] for a sound trace."""
    if not isinstance(damage, Mapping) or not damage.get("damaged"):
        return []
    return wrap_text(printable(f"{who}{damage.get('summary') or 'trace is damaged'}"),
                     "WARNING: ", "         ")


def flight_first(line: str | None, who: str = "") -> list[str]:
    """A flight recorder dump's line (Trace.flight_line()), first in the outputs that do
    not list a trace's problems; [] for any other trace."""
    return wrap_text(printable(f"{who}{line}"), "NOTE: ", "      ") if line else []


def problems_first(tr: Any, who: str = "") -> list[str]:
    """What was lost, first, for the outputs that are not a report (hist, requests,
    export, query): a flight dump's window, the damage, then every other problem of the
    trace (Trace.problems(): the kernel's losses, unmatched completions, ...), each
    prefixed with `who` (a query's run); [] for a sound, complete trace."""
    fl = tr.flight_line()
    lines = flight_first(fl, who)
    shown = {fl}
    if tr.damage.damaged:
        lines += damage_first(tr.damage.as_dict(), who)
        shown.add(tr.damage.summary())
    for p in tr.problems():
        if p not in shown:
            lines += wrap_text(printable(f"{who}{p}"), "! ", "  ")
    return lines


def _title(r: Mapping[str, Any]) -> list[str]:
    """The first lines: the damage (if any), what this is, and what was lost."""
    dmg = r.get("damage") or {}
    lines = damage_first(dmg)
    lines.append(f"iowhy report  {title(r)}")
    for p in r.get("problems") or []:
        if lines[0:1] and p == dmg.get("summary"):
            continue  # already the first line
        lines += wrap_text(p, "! ", "  ")
    return lines


def _recorded(r: Mapping[str, Any]) -> list[str]:
    """What was recorded (after the answer): trace, command, filesystems, devices,
    duration."""
    tr = r.get("trace") or {}
    lines = ["RECORDED", f"  trace       {tr.get('path') or '-'}"]
    if tr.get("label"):
        lines.append(f"  label       {tr['label']}")
    lines += wrap_text(short_command(r), "  workload    ", "              ")[:3]
    names = set(r["workload"].get("devices") or [])
    fss = [f for f in r.get("filesystems") or [] if not names or f.get("disk") in names]
    for i, f in enumerate(fss[:3]):
        desc = f"{f.get('fstype') or '?'} {f.get('source') or ''} on {f.get('mountpoint') or '?'}"
        if f.get("log_kind") and f.get("log_bytes"):
            desc += f" (log: {f['log_kind']}, {f['log_bytes'] / 2**20:,.0f} MiB)"
        lines.append(("  filesystem  " if i == 0 else "              ") + desc)
    if len(fss) > 3:
        lines.append(f"              and {len(fss) - 3} more")
    for i, d in enumerate(x for x in r["devices"] if x["name"] in names):
        wc = d.get("write_cache") or "unknown"
        fua = yes_no(d.get("fua"))
        rot = yes_no(d.get("rotational"))
        lines.append(("  device      " if i == 0 else "              ")
                     + f"{d['name']}: write cache {wc}, FUA {fua}, rotational {rot}")
    stop = tr.get("stop_reason")
    who = f"pid {tr['pid']}, " if tr.get("pid") else ""
    lines.append(f"  duration    {fmt_ns(r['elapsed_ns'])}" + (f" ({stop})" if stop else "")
                 + f"; {who}{r['workload']['threads']} thread(s)")
    return lines


def root_wait_note(r: Mapping[str, Any]) -> str | None:
    """The caveat of `root_event_wait` (docs/report-json.md) in words, or None."""
    rw = r.get("root_event_wait")
    if not rw or not r.get("elapsed_ns"):
        return None
    who = (r.get("trace") or {}).get("pid") or r["workload"].get("root_tid")
    n = int(rw.get("waits", 1))
    waker = f"{printable(rw['waker_comm']) or 'thread'} (tid {rw['waker_tid']})"
    share = f"{100.0 * rw['ns'] / r['elapsed_ns']:.0f}%"
    if n == 1:
        head = (f"pid {who} spent {share} of the window in one {printable(rw['syscall'])} "
                f"wait, ended by {waker}; the shares above are what that thread did")
    else:
        head = (f"pid {who} spent {share} of the window in {n:,} event waits (mostly "
                f"{printable(rw['syscall'])}) that other workload threads ended (mostly "
                f"{waker}); the shares above are what those threads did")
    return (head + f" meanwhile: the cause if the process waited for {'it' if n == 1 else 'them'}"
            ", not if it was idle (a server's master process): read THREAD TIME then")


def cpu_to_stop_note(r: Mapping[str, Any]) -> str | None:
    """The caveat of `cpu_to_stop` (docs/report-json.md) in words, or None."""
    tail = r.get("cpu_to_stop")
    if not tail:
        return None
    return (f"recorded before format {OPEN_END_VERSION}, which writes no sleep still open at "
            f"the stop: {plural(tail['threads'], 'thread')}, {fmt_ns(tail['ns'])} from the last "
            "switch-in to the stop counted as cpu, part of which may be a sleep")


def _where(r: Mapping[str, Any]) -> list[str]:
    el = r["elapsed_ns"]
    if r.get("attribution_ns") is None:
        return [f"{'WHERE THE TIME WENT: not available':<60}{'elapsed ' + fmt_ns(el):>40}",
                *wrap_text(str(r.get("attribution_unavailable") or "no off-CPU data"),
                           "  ", "  ")]
    att = r["attribution_ns"]
    how = ("along the critical path" if r["workload"].get("attribution") == "causal"
           else "")
    lines = [f"{'WHERE THE TIME WENT ' + how:<60}{'elapsed ' + fmt_ns(el):>40}"]
    lines += _bars(att, el, r.get("attribution_detail_ns"))
    for key, what in (("wait_other_by_syscall_ns", "wait-other by syscall"),
                      ("wait_other_by_waker_ns", "wait-other by waker"),
                      ("external_by_comm_ns", "external by process"),
                      ("sleep_by_syscall_ns", "sleep by syscall")):
        wo = r.get(key) or {}
        if wo:
            parts = ", ".join(f"{printable(k)} {fmt_ns(v)}" for k, v in list(wo.items())[:6])
            lines += wrap_text(f"{what}: {parts}", "  ", "    ")
    bg = [d for d in (r.get("background") or {}).get("devices") or []
          if d.get("set_apart", True)]
    if bg:
        parts = ", ".join(f"{printable(d['name'])} {d['requests']:,} requests "
                          f"({fmt_mib(d['read_bytes'] + d['write_bytes'])} MiB)" for d in bg[:4])
        lines += wrap_text(f"background I/O, not waited on: {parts}", "  ", "    ")
    note = root_wait_note(r)
    if note:
        lines += wrap_text(f"note: {note}", "  ", "    ")
    note = cpu_to_stop_note(r)
    if note:
        lines += wrap_text(f"note: {note}", "  ", "    ")
    un = r.get("unseen_wakers") or {}
    if un.get("count"):
        lines += wrap_text(f"waker not seen: {un['count']:,} waits, {fmt_ns(un['blocked_ns'])} "
                           "blocked (still blocked at the stop, or the wakeup was not recorded)",
                           "  ", "    ")
    return lines


def _bars(att: Mapping[str, int], whole: int,
          detail: Mapping[str, Mapping[str, int]] | None = None) -> list[str]:
    """One line per category: time, share of `whole`, a bar scaled to the largest; under
    a category served by more than its own part (level two), what served it, largest
    first, in shares of `whole`."""
    lines = []
    top = max(att.values()) if att else 0
    for k in display_order():
        if k not in att:
            continue
        v = att[k]
        pct = 100.0 * v / whole if whole else 0.0
        bar = "#" * (round(BAR * v / top) if top else 0)
        if v and not bar:
            bar = "."
        lines.append(f"  {k:<16}{fmt_ns(v) if v else '0':>10}{pct:>7.1f}%  {bar}")
        line = served_text(k, (detail or {}).get(k), whole)
        if line:
            lines += wrap_text(line, "      ", "        ")
    return lines


def _thread_time(r: Mapping[str, Any]) -> list[str]:
    """The thread time: every workload thread's life in the same categories, and the
    syscalls the threads spent it in."""
    tt = r.get("thread_time")
    if not tt or not tt.get("total_ns"):
        return []
    tot = tt["total_ns"]
    lines = [f"{'THREAD TIME (all ' + str(tt['threads']) + ' threads)':<60}"
             f"{'total ' + fmt_ns(tot):>40}"]
    lines += _bars({k: v for k, v in tt["attribution_ns"].items() if v}, tot,
                   tt.get("attribution_detail_ns"))
    for name, c in [x for x in tt.get("by_syscall", {}).items()
                    if x[1]["total_ns"] >= 0.01 * tot][:4]:
        parts = ", ".join(f"{k} {100.0 * v / tot:.0f}%" for k, v in
                          sorted(c["attribution_ns"].items(), key=lambda kv: -kv[1])[:4])
        lines += wrap_text(f"{100.0 * c['total_ns'] / tot:.0f}% of thread time in "
                           f"{printable(name)}: {parts}", "  ", "    ")
    if tt["threads"] > 1:
        for t in (tt.get("by_thread") or [])[:3]:
            life = t["total_ns"]
            if not life:
                continue
            lines += wrap_text(thread_line(t), "  ", "    ")
    return lines


CGROUP_ROWS = 10  # cgroups shown, the most blocked first (--json lists all)


def _by_cgroup(r: Mapping[str, Any], unit: str) -> list[str]:
    """--by cgroup: one row per cgroup v2, the most blocked first, its threads' own
    time and its fsync-family calls; then what its threads were blocked in and what
    explains their time."""
    cg = r.get("cgroups")
    if not cg:
        return []
    if not cg.get("recorded"):
        return ["BY CGROUP", f"  cgroup: not recorded ({cg.get('why', '')})"]
    groups = cg["groups"]
    nthreads = sum(g["threads"] for g in groups)
    lines = [f"BY CGROUP ({len(groups)} cgroup{'s' if len(groups) != 1 else ''}, "
             f"{nthreads} thread{'s' if nthreads != 1 else ''}; each thread in the cgroup it "
             "was first seen in)"]
    timed = any("thread_ns" in g for g in groups)
    head = f"  {'cgroup':<28}{'procs':>6}{'thr':>5}"
    if timed:
        head += (f"{label('thread', unit):>13}{label('on CPU', unit):>13}"
                 f"{label('blocked', unit):>14}")
    head += f"{'syncs':>7}{label('sync', unit):>12}"
    lines.append(head)
    for g in groups[:CGROUP_ROWS]:
        calls = g.get("calls") or {}
        n = sum(c["count"] for c in calls.values())
        t = sum(c["total_ns"] for c in calls.values())
        row = f"  {cgroup_name(g, 27):<28}{g['processes']:>6}{g['threads']:>5}"
        if timed:
            row += (f"{time_text(g.get('thread_ns'), unit):>13}"
                    f"{time_text(g.get('on_cpu_ns'), unit):>13}"
                    f"{time_text(g.get('blocked_ns'), unit):>14}")
        row += f"{n:>7,}{time_text(t, unit):>12}"
        lines.append(row)
        life = g.get("thread_ns") or 0
        parts = []
        if life and g.get("runqueue_ns", 0) >= 0.01 * life:
            parts.append(f"runnable {100.0 * g['runqueue_ns'] / life:.0f}%")
        if life:
            bl = [f"{printable(k)} {100.0 * v / life:.0f}%"
                  for k, v in (g.get("blocked_in_ns") or {}).items() if v >= 0.01 * life]
            if bl:
                parts.append("blocked in " + ", ".join(bl[:3]))
            ex = sorted((g.get("attribution_ns") or {}).items(), key=lambda kv: -kv[1])[:4]
            if ex:
                parts.append("explained: " + ", ".join(f"{k} {100.0 * v / life:.0f}%"
                                                       for k, v in ex))
        if parts:
            lines += wrap_text("; ".join(parts), "      ", "        ")
    if len(groups) > CGROUP_ROWS:
        lines.append(f"  ... {len(groups) - CGROUP_ROWS} more cgroups (--json lists all)")
    if cg.get("unknown_threads"):
        lines += wrap_text(f"{cg['unknown_threads']} threads under (unknown): no record names "
                           "their cgroup", "  ", "    ")
    if cg.get("unnamed_cgroups"):
        lines += wrap_text(f"{cg['unnamed_cgroups']} cgroups were removed before the recorder "
                           "named them: shown by id", "  ", "    ")
    if cg.get("moved_threads"):
        lines += wrap_text(f"{cg['moved_threads']} threads moved to another cgroup while "
                           "recording: counted in the one they were first seen in", "  ", "    ")
    return lines


def thread_line(t: Mapping[str, Any]) -> str:
    """A thread's own state, then what explains its time: 'thread 812 python3 (2.5 s): on
    CPU 2%, blocked in futex 97%; waiting for thread 813; explained: log 74%, data 7%'."""
    life = t["total_ns"]
    own = [("on CPU", t.get("on_cpu_ns", 0)), ("runnable", t.get("runqueue_ns", 0))]
    own += [(f"blocked in {printable(k)}", v) for k, v in (t.get("blocked_in_ns") or {}).items()]
    own = sorted([x for x in own if x[1] >= 0.01 * life], key=lambda x: -x[1])[:3]
    text = f"thread {t['tid']} {printable(t['comm'])} ({fmt_ns(life)}): " + ", ".join(
        f"{w} {100.0 * v / life:.0f}%" for w, v in own)
    wf = t.get("waiting_for") or []
    if wf and wf[0]["ns"] >= 0.05 * life:
        text += f"; waiting for thread {wf[0]['tid']}"
        if wf[0].get("comm"):
            text += f" {printable(wf[0]['comm'])}"
    ex = sorted((t.get("explained_ns") or {}).items(), key=lambda kv: -kv[1])[:4]
    if ex:
        text += "; explained: " + ", ".join(f"{k} {100.0 * v / life:.0f}%" for k, v in ex)
    return text


def render_intervals(r: Mapping[str, Any], unit: str = DEFAULT_TIME_UNIT) -> str:
    """The elapsed attribution per interval, after the report's first lines (what was
    lost): one row per interval, one column per category that has time, named as in the
    report and in `unit` (reports.units), each row summing to its interval. Columns that
    do not fit WIDTH go to a further table of the same rows."""
    iv = r.get("intervals") or []
    cats = [k for k in display_order() if any(i["attribution_ns"].get(k) for i in iv)]
    width = {k: max([len(time_text(i["attribution_ns"].get(k, 0), unit)) for i in iv]
                    + [len(k)]) + 2 for k in cats}
    blocks: list[list[str]] = []
    for k in cats:  # as many columns as fit beside the two times, in the report's order
        if not blocks or 18 + sum(width[c] for c in blocks[-1]) + width[k] > WIDTH:
            blocks.append([])
        blocks[-1].append(k)
    lines = _title(r) + ["", f"ATTRIBUTION PER INTERVAL ({unit})"]
    for b, block in enumerate(blocks):
        if b:
            lines.append("")
        lines.append(f"{'from (s)':>9}{'to (s)':>9}"
                     + "".join(f"{k:>{width[k]}}" for k in block))
        for i in iv:
            a = i["attribution_ns"]
            lines.append(f"{i['start_ns'] / 1e9:>9.3f}{i['end_ns'] / 1e9:>9.3f}"
                         + "".join(f"{time_text(a.get(k, 0), unit):>{width[k]}}"
                                   for k in block))
    return "\n".join(fit_line(printable(x)) for x in lines) + "\n"


def _classes(r: Mapping[str, Any], unit: str = DEFAULT_TIME_UNIT) -> list[str]:
    lines = [f"{'REQUESTS BY CLASS':<26}{'device latency':^33}",
             f"  {'class':<10}{'count':>6}{'MiB':>8}{label('p50', unit):>11}"
             f"{label('p99', unit):>11}{label('max', unit):>11}"
             f"{label('queue p50', unit):>15}{'seek p50 (sectors)':>19}{'seq':>7}"]
    pl = r.get("placement") or {}
    for name, c in r["requests"].items():
        if not c["count"]:
            continue
        dn = c["device_ns"]
        seek = c["seek_sectors"]["p50"]
        seq = (pl.get(name) or {}).get("sequential_share")
        mib = c["bytes"] / 2**20
        size = fmt_mib(c["bytes"]) if mib < 1000 else f"{mib:,.0f}"  # fits 7 columns to 9 TiB
        lines.append(f"  {name:<10}{fmt_count(c['count']):>6}{size:>8}"
                     f"{time_text(dn['p50'], unit):>11}{time_text(dn['p99'], unit):>11}"
                     f"{time_text(dn['max'], unit):>11}"
                     f"{time_text(c['queue_ns']['p50'], unit):>15}"
                     f"{fmt_count(seek):>19}{fmt_pct(seq):>7}")
    if (r.get("flushes") or {}).get("empty_preflush"):
        lines += wrap_text(preflush_text(r), "  ", "    ")
    for e in r.get("stack_carried") or []:
        if e["requests"] or e.get("flushes"):
            lines += wrap_text(f"counted once per stack: {carried_text(e)} of "
                               f"{printable(e['lower'])} only carried "
                               f"{printable(e['upper'])}'s I/O and are counted at "
                               f"{printable(e['upper'])} only", "  ", "    ")
    for d in r.get("devices") or []:
        if d.get("bios"):
            lines += wrap_text(f"includes {d['bios']:,} bios of {printable(d['name'])} (bio-based: "
                               "counted at their end, no latency)", "  ", "    ")
    for d in (r.get("background") or {}).get("devices") or []:
        if not d.get("set_apart", True):
            lines += wrap_text(f"background: {d['requests']:,} requests "
                               f"({fmt_mib(d['read_bytes'] + d['write_bytes'])} MiB) of "
                               f"{printable(d['name'])} were other processes' I/O and are not "
                               "in this table", "  ", "    ")
    return lines


def _fsync(r: Mapping[str, Any]) -> list[str]:
    fs = r["fsync"]
    com = r["commits"]
    lines = ["FSYNC AND COMMITS"]
    if not fs["count"]:
        lines.append("  no fsync-family calls")
    for name, c in fs.get("by_call", {}).items():
        lat = c["latency_ns"]
        lines.append(f"  {name:<12}{c['count']:>9,} calls  p50 {fmt_ns(lat['p50'])}  p90 "
                     f"{fmt_ns(lat['p90'])}  p99 {fmt_ns(lat['p99'])}  max {fmt_ns(lat['max'])}")
        sp = c["split_ns"]
        tot = sum(sp.values())
        if tot:
            lines.append(f"  {'':<12}waiting for: own data {sp['data'] / tot:.0%}, commit/log "
                         f"{sp['commit'] / tot:.0%}, own flushes {sp['flush'] / tot:.0%}, "
                         f"other {sp['other'] / tot:.0%}")
    if com["count"]:
        parts = [f"{com['count']:,} commits"]
        if com.get("fsyncs_per_commit"):
            parts.append(f"{com['fsyncs_per_commit']:.2f} fsync calls per commit")
        if com.get("bytes_logged_per_commit") is not None:
            parts.append(f"{com['bytes_logged_per_commit'] / 1024:,.1f} KiB logged per commit")
        lines += wrap_text(", ".join(parts), f"  {'commits':<12}", " " * 14)
        for key, line in COMMIT_LINES:
            if com.get(key):
                lines += wrap_text(line(com[key]), " " * 14, " " * 16)
    return lines


def _jbd2_line(j: Mapping[str, Any]) -> str:
    ph = j["phases_ns"]
    return (f"jbd2 p50: commit {fmt_ns(j['duration_ns']['p50'])}, "
            f"locking {fmt_ns(ph['locking']['p50'])}, flushing "
            f"{fmt_ns(ph['flushing']['p50'])}, logging {fmt_ns(ph['logging']['p50'])}")


def xfs_text(x: Mapping[str, Any]) -> str:
    """The XFS log's figures (the report's `commits.xfs`) in words, text and HTML."""
    cp = f", {plural(x['checkpoints'], 'checkpoint')} the calls forced" \
        if x.get("checkpoints") else ""
    return (f"{plural(x['count'], 'iclog write')}, {plural(x['forces'], 'log force')}{cp}, "
            f"force to iclog done p50 {fmt_ns(x['force_to_iclog_done_ns']['p50'])}, iclog p50 "
            f"{fmt_ns(x['iclog_ns']['p50'])}")


def _xfs_line(x: Mapping[str, Any]) -> str:
    return "xfs: " + xfs_text(x)


def _btrfs_line(b: Mapping[str, Any]) -> str:
    return f"btrfs: {b['transaction_commits']:,} transaction commits, " \
        f"{b['log_syncs']:,} log-tree syncs"


def _fast_commit_line(fc: Mapping[str, Any]) -> str:
    st = ", ".join(f"{k} {v:,}" for k, v in fc["by_status"].items())
    return f"ext4 fast commits: {fc['count']:,} ({st})"


# The line under "commits" of each kind of journal's figures (the keys of the report's
# `commits` a journal kind adds: views/commits.py JOURNAL_FIGURES), in this order.
COMMIT_LINES: tuple[tuple[str, Callable[[Mapping[str, Any]], str]], ...] = (
    ("jbd2", _jbd2_line), ("xfs", _xfs_line), ("btrfs", _btrfs_line),
    ("ext4_fast_commit", _fast_commit_line))


def preflush_text(r: Mapping[str, Any]) -> str:
    """What the flush row counts, when empty PREFLUSH requests were merged into it."""
    e = plural(r["flushes"]["empty_preflush"], "empty PREFLUSH request")
    if r["requests"]["flush"]["count"]:
        return f"flush counts the FF flushes issued; merged into them: {e} (never issued " \
            "themselves)"
    return f"flush counts the FF flushes issued: none; {e}, never issued, had no FF flush " \
        "in the trace"


def carried_text(e: Mapping[str, Any]) -> str:
    """What a `stack_carried` edge's lower device carried: its requests (and their bytes)
    and its flushes, those it has."""
    parts = []
    if e["requests"]:
        parts.append(f"{e['requests']:,} requests "
                     f"({fmt_mib(e['read_bytes'] + e['write_bytes'])} MiB)")
    if e.get("flushes"):
        parts.append(plural(e["flushes"], "flush", "flushes"))
    return " and ".join(parts)


def lower_devices(r: Mapping[str, Any]) -> dict[str, list[str]]:
    """{lower device: the upper devices whose I/O it carried} (`stack_carried`): a disk
    serving the workload's devices from below, not one of them."""
    out: dict[str, list[str]] = {}
    for e in r.get("stack_carried") or []:
        out.setdefault(e["lower"], []).append(e["upper"])
    return out


def _devices(r: Mapping[str, Any]) -> list[str]:
    lines = ["DEVICES"]
    mine = set(r["workload"].get("devices") or [])
    below = lower_devices(r)
    shown = ([d for d in r["devices"] if d["name"] in mine]
             + [d for d in r["devices"] if d["name"] not in mine
                and (d["busy_ns"] or d.get("bios"))])
    for d in shown:
        b = d["busy_by_category_ns"]
        busy = d["busy_ns"] or 1
        cats = " ".join(f"{k} {100 * v / busy:.0f}%" for k, v in b.items() if v)
        tag = "" if d["name"] in mine else (
            f" (below {', '.join(printable(u) for u in below[d['name']])})"
            if d["name"] in below else " (not the workload's)")
        if d.get("bios") and d["bios"] == d["requests"]:
            # A bio-based device: its bios have an end, no start (no busy time).
            lines += wrap_text(f"{d['name']}{tag}  bio-based: {d['bios']:,} bios, "
                               f"{fmt_mib(d['read_bytes'])} MiB read, {fmt_mib(d['write_bytes'])} "
                               "MiB written (completion times only: busy time and queue depth "
                               "not measured)", "  ", "      ")
            continue
        lines += wrap_text(f"{d['name']}{tag}  busy {100 * d['utilisation']:.1f}% "
                           f"({fmt_ns(d['busy_ns'])}): {cats or 'idle'}", "  ", "      ")
        q = d["queue_depth"]
        fl = d["flush"]
        extra = f"queue depth mean {q['mean']:.2f} (busy {q['mean_busy']:.2f}) max {q['max']}"
        if fl["count"]:
            extra += f"; {fl['count']:,} flushes ({fmt_ns(fl['total_ns'])})"
            if fl["waiters"]:  # a flush-sequenced request waits on them; an fsync's own
                extra += f" waited on by {fl['waiters']:,} flush-sequenced requests"
        lines += wrap_text(extra, "      ", "      ")
        lines += _served_below(r, d["name"])
    return lines


def _served_below(r: Mapping[str, Any], name: str) -> list[str]:
    """How the devices below a loop device served its busy time (`stack_service`)."""
    sb = served_below(r, name)
    if sb is None:
        return []
    lines = wrap_text(f"served below by {', '.join(sb[0])} ({SERVED_BELOW_NOTE}):",
                      "      ", "        ")
    for t in sb[1]:
        lines += wrap_text(t, "        ", "          ")
    return lines


def _placement(r: Mapping[str, Any], unit: str = DEFAULT_TIME_UNIT) -> list[str]:
    pl = r.get("placement") or {}
    loc = r.get("locality")
    md = r.get("metadata_data") or {}
    lines = ["PLACEMENT AND LOCALITY"]
    ratio = r.get("metadata_data_ratio")
    lines.append(f"  metadata:data {'-' if ratio is None else f'{ratio:.2f}'} by bytes written "
                 f"({fmt_mib(md.get('metadata_bytes', 0))} MiB metadata, "
                 f"{fmt_mib(md.get('data_bytes', 0))} MiB data, {fmt_mib(md.get('log_bytes', 0))} "
                 "MiB log)")
    if pl:
        lines.append(f"  {'class':<10}{'sequential':>10}{'seek p50 (sectors)':>19}"
                     f"{'seek p90 (sectors)':>19}{label('positioning', unit):>17}"
                     f"{label('dev time', unit):>14}{'share':>7}")
        for name, p in pl.items():
            base = p["positioning_basis"] > 0  # no zero-seek baseline: no positioning figure
            share = p["positioning_ns"] / p["device_ns"] if p["device_ns"] and base else None
            sk = p["seek_sectors"]
            posn = time_text(p["positioning_ns"], unit) if base else "-"
            if base and p.get("baseline") == "fastest decile":
                posn = ">= " + posn  # no contiguous request to compare with: a lower bound
            lines.append(f"  {name:<10}{fmt_pct(p['sequential_share']):>10}"
                         f"{fmt_count(sk['p50']):>19}{fmt_count(sk['p90']):>19}"
                         f"{posn:>17}{time_text(p['device_ns'], unit):>14}{fmt_pct(share):>7}")
        if any(p["positioning_basis"] > 0 and p.get("baseline") == "fastest decile"
               for p in pl.values()):
            lines.append("  >= : lower bound: no contiguous request on the device to take the "
                         "transfer time from")
        lines += wrap_text(remapped_note(r), "  ", "  ") if r.get("placement_remapped") else []
    if loc:
        if loc["adjacent_pairs"]:
            lines.append(f"  adjacent write pairs issued > {loc['gap_ns'] / 1e6:g} ms apart: "
                         f"{fmt_pct(loc['late_share'])} ({loc['late_pairs']:,} of "
                         f"{loc['adjacent_pairs']:,})")
        else:
            lines.append("  no write pairs adjacent on disk")
    return lines


def _findings(r: Mapping[str, Any]) -> list[str]:
    if "findings" in r and r["findings"] is None:
        return []       # none asked for (--findings 0): no section at all
    fs = r.get("findings") or []
    lines = ["FINDINGS"]
    if not fs:
        lines.append("  nothing stands out")
    for i, f in enumerate(fs, 1):
        lines += wrap_text(f["text"], f"  {i}. ", "     ")
    return lines


def render_report(r: Mapping[str, Any], unit: str = DEFAULT_TIME_UNIT) -> str:
    """The whole report as one string (no trailing newline); the time columns of its
    tables in `unit` (reports.units.TIME_UNITS)."""
    # the answer first: what was lost, then where the time went, then what was recorded
    head = _title(r)
    sections: Sequence[list[str]] = (
        _where(r), _recorded(r), _thread_time(r), _by_cgroup(r, unit), _classes(r, unit),
        _fsync(r), _devices(r),
        _placement(r, unit), _findings(r))
    out = [fit_line(printable(line).rstrip()) for line in head]
    for s in sections:
        if not s:
            continue
        out.append("")
        out += [fit_line(printable(line).rstrip()) for line in s]
    return "\n".join(out)


def render_where(r: Mapping[str, Any]) -> str:
    """The short "where the time went" printed when a recording stops."""
    lines = [fit_line(printable(p)) for p in (r.get("problems") or [])[:3]]
    lines += [fit_line(line.rstrip()) for line in _where(r)]
    fs = r.get("findings") or []
    if fs:
        lines += [printable(line) for line in wrap_text(fs[0]["text"], "  -> ", "     ")]
    return "\n".join(lines)
