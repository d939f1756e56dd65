"""The HTML report of `iowhy report --html OUT`: one self-contained file.

Figures are PNGs embedded as base64 data URIs, the stylesheet is inline, there is no
script and nothing is fetched: the file can be mailed, attached to a ticket and opened
offline. It holds the tables of the terminal report (iowhy.reports.terminal; its
formatting helpers are reused) and the figures of iowhy.reports.figures.

A page is assembled from section functions that return HTML fragments, so other pages
(the `iowhy compare` page, render_compare_html) reuse them:

* the building blocks, in reports/htmlkit.py: `page(title, parts)` (the document around
  the fragments: stylesheet, <h1>), `section(sec_id, title, *parts)`, `table(headers,
  rows, ...)`, `kv_table(pairs)`, `figure_block(fig_id, ...)`;
* `section_problems(r)`, `section_header(r, tasks)`, `section_where(r)`,
  `section_findings(r)`, `section_classes(r)`, `section_fsync(r)`, `section_devices(r)`,
  `section_placement(r)`: one analysis result (iowhy.analysis.analyze) each;
  `section_whatif(w)`: the result's "_whatif" (iowhy.whatif.predict.for_report);
* `figure_sections(r, data)`: the figure blocks of one result, by section.

Escaping: every value a helper puts into the page goes through html.escape unless it is
a `Raw` (markup built here). Everything from the trace (command line, comm, paths,
device names, syscall names) is plain text to these helpers, so it is always escaped,
after its control characters and undecodable bytes are made visible (escape.printable);
a last pass over the page (escape.neutralise_page) catches any that came another way.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from . import figures as F
from .escape import neutralise_page
from iowhy.categories import colours, display_order  # read at each use
from iowhy.findings import served_text

from .fmt import (SERVED_BELOW_NOTE, cgroup_name, command_text, fmt_count, fmt_mib, fmt_pct,
                  remapped_note, served_below, short_command, yes_no)
from .terminal import (carried_text, cpu_to_stop_note, fmt_ns, lower_devices, preflush_text,
                       root_wait_note, thread_line, title, xfs_text)
from .units import time_text
from .htmlkit import (Raw, _bar, _label, _swatch, esc, figure_block, kv_table, nav, page,
                      prefix_ids, section, section_mapping, table, text_block)


def _us(ns: int | None) -> str:
    """A time cell of the tables: microseconds, as the text report's default."""
    return time_text(ns, "us")


__all__ = [
    "Raw", "esc", "page", "section", "table", "kv_table", "figure_block", "nav",
    "section_problems", "section_header", "section_where", "section_findings",
    "section_classes", "section_fsync", "section_devices", "section_placement",
    "section_whatif",
    "section_mapping", "text_block", "prefix_ids", "figure_sections", "render_html",
    "render_compare_html", "FIGURES",
]


def section_problems(r: Mapping[str, Any]) -> str:
    """Everything lost or suspicious, in words, in the order of the terminal report."""
    probs = r.get("problems") or []
    if not probs:
        return "<div id=\"problems\" class=\"muted\"><p>No events lost, trace complete.</p></div>"
    lines = "".join(f"<p>{esc(p)}</p>\n" for p in probs)
    if not changes_figures(r):
        # Counted and shown, in one line that opens to the list: none of these changes
        # what the figures below say.
        n = len(probs)
        return (f"<div id=\"problems\" class=\"muted\"><details><summary>{n} note"
                f"{'s' if n > 1 else ''} on what was recorded (none changes the figures): "
                f"{esc(probs[0])}</summary>\n{lines}</details></div>")
    return (f"<div id=\"problems\" class=\"problems\">\n{lines}<p class=\"note\">The figures "
            "below are computed from what was recorded; read them with the above in mind.</p>"
            "\n</div>")


def changes_figures(r: Mapping[str, Any]) -> bool:
    """Whether what the problems say changes the figures: events the kernel lost, a
    damaged or cut trace (its damage line starts with "trace is": traceformat's
    Damage.summary), an imported capture (what its source lacks), or a result with no
    trace summary to tell. Requests completed that began before the recording, requests
    whose submitter is unknown (the kernel runs no BPF program for PID 1) and the like
    are counted, not figures changed."""
    tr = r.get("trace")
    if not isinstance(tr, Mapping):
        return True
    probs = [str(p) for p in r.get("problems") or []]
    return bool(r.get("lost_events") or tr.get("truncated") or r.get("attribution_unavailable")
                or any(p.startswith("trace is") for p in probs)
                or str(tr.get("stop_reason") or "").startswith("imported"))


def header_pairs(r: Mapping[str, Any],
                 tasks: Mapping[int, str] | None = None) -> list[tuple[str, Any]]:
    """The header of the terminal report as (label, value) pairs."""
    tr = r.get("trace") or {}
    pairs: list[tuple[str, Any]] = [("trace", tr.get("path") or "-")]
    if tr.get("label"):
        pairs.append(("label", tr["label"]))
    pairs.append(("workload", command_cell(r)))
    if tasks:
        summ = F.task_summary(tasks)
        more = len(set(tasks.values())) - len(summ)
        text = ", ".join(f"{c} x{n}" if n > 1 else c for c, n in summ)
        pairs.append(("tasks", text + (f" and {more} more" if more > 0 else "")))
    names = set(r["workload"].get("devices") or [])
    for i, f in enumerate(x for x in r.get("filesystems") or []
                          if not names or x.get("disk") in names):
        desc = f"{f.get('fstype') or '?'} {f.get('source') or ''} on {f.get('mountpoint') or '?'}"
        if f.get("log_kind") and f.get("log_bytes"):
            desc += f" (log: {f['log_kind']}, {f['log_bytes'] / 2**20:,.0f} MiB)"
        if f.get("options"):
            desc += f"; options {f['options']}"
        pairs.append(("filesystem" if i == 0 else "", desc))
    for i, d in enumerate(x for x in r["devices"] if x["name"] in names):
        pairs.append(("device" if i == 0 else "",
                      f"{d['name']}: write cache {d.get('write_cache') or 'unknown'}, "
                      f"FUA {yes_no(d.get('fua'))}, rotational {yes_no(d.get('rotational'))}"))
    stop = tr.get("stop_reason")
    who = f"pid {tr['pid']}, " if tr.get("pid") else ""
    pairs.append(("duration", f"{fmt_ns(r['elapsed_ns'])}" + (f" ({stop})" if stop else "")
                  + f"; {who}{r['workload']['threads']} thread(s)"))
    if tr.get("exit_status") is not None:
        pairs.append(("exit status", tr["exit_status"]))
    pairs.append(("lost events", f"{r.get('lost_events', 0):,}"))
    return pairs


def command_cell(r: Mapping[str, Any]) -> Any:
    """The workload's command: the short form, the exact one folded under it when they
    differ (iowhy.cmdline)."""
    full, short = command_text(r), short_command(r)
    if short == full:
        return full
    return Raw(f"<details class=\"meta\"><summary><code>{esc(short)}</code></summary>"
               f"<code>{esc(full)}</code></details>")


def section_header(r: Mapping[str, Any], tasks: Mapping[int, str] | None = None) -> str:
    """What was recorded: trace, command, tasks, filesystems, devices, duration. The
    trace's own metadata block (class "meta"): the one place a page shows the paths of
    the machine that recorded it."""
    return kv_table(header_pairs(r, tasks), table_id="header", cls="meta")


def where_rows(r: Mapping[str, Any]) -> list[list[Any]]:
    """Rows (category, time, %, bar, what served it) of the attribution: level one, and
    level two in words (served_text) where it says more than the category."""
    el = r["elapsed_ns"]
    att = r["attribution_ns"]
    detail = r.get("attribution_detail_ns") or {}
    top = max(att.values()) if att else 0
    rows = []
    for k in display_order():
        if k not in att:
            continue
        v = att[k]
        color = colours()[k]
        rows.append([_label(k, color), fmt_ns(v) if v else "0",
                     f"{100.0 * v / el if el else 0.0:.1f}%",
                     Raw(f"<div class=\"barcell\">{_bar(v / top if top else 0, color)}</div>"),
                     served_text(k, detail.get(k), el).split(": ", 1)[-1]])
    return rows


def section_where(r: Mapping[str, Any], figure: str = "") -> str:
    """Where the time went: the attribution table (and its figure, when given)."""
    if r.get("attribution_ns") is None:
        return section("where", "Where the time went", (
            f"<p id=\"table-where\">Not available: "
            f"{esc(r.get('attribution_unavailable') or 'no off-CPU data')}. Elapsed "
            f"<b>{esc(fmt_ns(r['elapsed_ns']))}</b>; the requests, their latencies and "
            "classes below are as recorded.</p>"))
    how = ("what the recorded process was doing along its critical path: a wait is "
           "explained by what woke it (a request, a helper thread, another thread of the "
           "workload, a timer, another process)" if r["workload"].get("attribution") ==
           "causal" else "what the workload's best-off thread was doing, or what its disks "
           "were doing while all of them were blocked")
    parts = [f"<p>Elapsed <b>{esc(fmt_ns(r['elapsed_ns']))}</b>; every nanosecond is in "
             f"exactly one category ({esc(how)}).</p>",
             table(("category", "time", "% of elapsed", "", "served by (% of elapsed)"),
                   where_rows(r), numeric=(1, 2), table_id="table-where")]
    top = (r.get("findings") or [None])[0]
    if top:   # the first finding under the table, as the terminal's summary has it
        parts.append(f"<p class=\"lead\" id=\"finding-1\">&rarr; {esc(top['text'])}</p>")
    for key, what in (("wait_other_by_syscall_ns", "wait-other by syscall"),
                      ("wait_other_by_waker_ns", "wait-other by waker"),
                      ("external_by_comm_ns", "external by process"),
                      ("sleep_by_syscall_ns", "sleep by syscall")):
        wo = r.get(key) or {}
        if wo:
            parts.append(f"<p>{what}: " + esc(", ".join(
                f"{k} {fmt_ns(v)}" for k, v in list(wo.items())[:8])) + "</p>")
    bg = [d for d in (r.get("background") or {}).get("devices") or []
          if d.get("set_apart", True)]
    if bg:
        parts.append("<p>background I/O, not waited on: " + esc(", ".join(
            f"{d['name']} {d['requests']:,} requests" for d in bg[:8])) + "</p>")
    for note in (root_wait_note(r), cpu_to_stop_note(r)):
        if note:
            parts.append(f"<p>note: {esc(note)}</p>")
    un = r.get("unseen_wakers") or {}
    if un.get("count"):
        parts.append(f"<p>waker not seen: {un['count']:,} waits, "
                     f"{esc(fmt_ns(un['blocked_ns']))} blocked</p>")
    tt = r.get("thread_time")
    if tt and tt.get("total_ns"):
        parts.append(_thread_time_html(tt))
    if r.get("cgroups"):  # --by cgroup
        parts.append(_by_cgroup_html(r["cgroups"]))
    bl = r.get("blocked_by_syscall_ns") or {}
    if bl:
        parts.append("<p class=\"muted\">all blocked time by syscall: " + esc(", ".join(
            f"{k} {fmt_ns(v)}" for k, v in list(bl.items())[:8])) + "</p>")
    if figure:
        parts.append(figure)
    return section("where", "Where the time went", *parts)


def _thread_time_html(tt: Mapping[str, Any]) -> str:
    """The thread time: the categories over every workload thread's life, and by the
    syscall the threads were in."""
    tot = tt["total_ns"]
    detail = tt.get("attribution_detail_ns") or {}
    rows = [[_label(k, colours()[k]), fmt_ns(v), f"{100.0 * v / tot:.1f}%",
             served_text(k, detail.get(k), tot).split(": ", 1)[-1]]
            for k in display_order() if (v := tt["attribution_ns"].get(k, 0))]
    out = [f"<h3>Thread time</h3><p>All {tt['threads']:,} workload threads together: "
           f"{esc(fmt_ns(tot))} of thread time.</p>",
           table(("category", "time", "% of thread time", "served by (% of thread time)"),
                 rows, numeric=(1, 2), table_id="table-thread-time")]
    for name, c in [x for x in tt.get("by_syscall", {}).items()
                    if x[1]["total_ns"] >= 0.01 * tot][:6]:
        parts = ", ".join(f"{k} {100.0 * v / tot:.0f}%" for k, v in
                          sorted(c["attribution_ns"].items(), key=lambda kv: -kv[1])[:4])
        out.append(f"<p>{100.0 * c['total_ns'] / tot:.0f}% of thread time in "
                   f"{esc(name)}: {esc(parts)}</p>")
    if tt["threads"] > 1:
        out += [f"<p>{esc(thread_line(t))}</p>" for t in (tt.get("by_thread") or [])[:5]
                if t["total_ns"]]
    return "".join(out)


def _by_cgroup_html(cg: Mapping[str, Any]) -> str:
    """--by cgroup: the terminal's BY CGROUP as a table, every cgroup, the most blocked
    first."""
    if not cg.get("recorded"):
        return (f"<h3>By cgroup</h3><p>cgroup: not recorded "
                f"({esc(cg.get('why', ''))})</p>")
    rows = []
    for g in cg["groups"]:
        calls = g.get("calls") or {}
        life = g.get("thread_ns") or 0

        def share(items: Any) -> str:
            return ", ".join(f"{k} {100.0 * v / life:.0f}%" for k, v in items
                             if v >= 0.01 * life) if life else ""
        timed = "thread_ns" in g
        rows.append([cgroup_name(g, 80), f"{g['processes']:,}", f"{g['threads']:,}",
                     *((fmt_ns(g[k]) if timed else "-") for k in
                       ("thread_ns", "on_cpu_ns", "runqueue_ns", "blocked_ns")),
                     f"{sum(c['count'] for c in calls.values()):,}",
                     fmt_ns(sum(c["total_ns"] for c in calls.values())),
                     share(list((g.get("blocked_in_ns") or {}).items())[:3]),
                     share(sorted((g.get("attribution_ns") or {}).items(),
                                  key=lambda kv: -kv[1])[:4])])
    notes = []
    if cg.get("unknown_threads"):
        notes.append(f"{cg['unknown_threads']:,} threads under (unknown): no record names "
                     "their cgroup")
    if cg.get("unnamed_cgroups"):
        notes.append(f"{cg['unnamed_cgroups']:,} cgroups removed before the recorder named "
                     "them: shown by id")
    if cg.get("moved_threads"):
        notes.append(f"{cg['moved_threads']:,} threads moved to another cgroup while "
                     "recording: counted in the one they were first seen in")
    return ("<h3>By cgroup</h3><p>The workload's threads per cgroup v2, each in the cgroup "
            "it was first seen in; the most blocked first.</p>"
            + table(("cgroup", "processes", "threads", "thread time", "on CPU", "runnable",
                     "blocked", "sync calls", "sync time", "blocked in (% of thread time)",
                     "explained (% of thread time)"), rows, numeric=range(1, 9),
                    table_id="table-by-cgroup")
            + "".join(f"<p class=\"muted\">{esc(n)}</p>" for n in notes))


def section_findings(r: Mapping[str, Any]) -> str:
    """The findings, largest first."""
    fs = r.get("findings") or []
    if "findings" in r and r["findings"] is None:
        body = "<p id=\"findings-list\">Not asked for (<code>--findings 0</code>).</p>"
    elif not fs:
        body = "<p id=\"findings-list\">Nothing stands out (no finding above 1% of elapsed).</p>"
    else:
        body = ("<ol class=\"findings\" id=\"findings-list\">\n"
                + "\n".join(f"<li>{esc(f['text'])}</li>" for f in fs) + "\n</ol>")
    return section("findings", "Findings", body)


def class_rows(r: Mapping[str, Any]) -> list[list[Any]]:
    """Rows of the per-class request table (classes with requests only)."""
    pl = r.get("placement") or {}
    rows = []
    for name, c in r["requests"].items():
        if not c["count"]:
            continue
        dn = c["device_ns"]
        seq = (pl.get(name) or {}).get("sequential_share")
        rows.append([_label(name, F.CLASS_COLORS.get(name)), f"{c['count']:,}", fmt_mib(c["bytes"]),
                     _us(dn["p50"]), _us(dn["p90"]), _us(dn["p99"]), _us(dn["max"]),
                     _us(c["queue_ns"]["p50"]), _us(c["total_ns"]["p99"]),
                     fmt_count(c["seek_sectors"]["p50"]), fmt_pct(seq), f"{c['fua']:,}",
                     f"{c['preflush']:,}",
                     fmt_ns(c["flush_wait_ns"]) if c.get("flush_wait_ns") else "0"])
    return rows


def section_classes(r: Mapping[str, Any], figure: str = "") -> str:
    """Requests by class: counts, bytes, device/queue/total latency, seeks, FUA/PREFLUSH."""
    head = ("class", "requests", "MiB", "device p50 (us)", "p90 (us)", "p99 (us)", "max (us)",
            "queue p50 (us)", "total p99 (us)", "seek p50 (sectors)", "sequential", "FUA",
            "PREFLUSH", "flush wait")
    rows = class_rows(r)
    parts = [table(head, rows, numeric=range(1, len(head)), table_id="table-classes")
             if rows else "<p id=\"table-classes\">No block requests in the trace.</p>"]
    if (r.get("flushes") or {}).get("empty_preflush"):
        parts.append(f"<p class=\"muted\">{esc(preflush_text(r))}.</p>")
    for e in r.get("stack_carried") or []:
        if e["requests"] or e.get("flushes"):
            parts.append(f"<p class=\"muted\">counted once per stack: {esc(carried_text(e))} "
                         f"of {esc(e['lower'])} only carried {esc(e['upper'])}'s I/O and are "
                         f"counted at {esc(e['upper'])} only.</p>")
    for d in r.get("devices") or []:
        if d.get("bios"):
            parts.append(f"<p class=\"muted\">includes {d['bios']:,} bios of "
                         f"{esc(d['name'])} (bio-based: counted at their end, no "
                         "latency).</p>")
    for d in (r.get("background") or {}).get("devices") or []:
        if not d.get("set_apart", True):
            parts.append(f"<p class=\"muted\">background: {d['requests']:,} requests "
                         f"({fmt_mib(d['read_bytes'] + d['write_bytes'])} MiB) of "
                         f"{esc(d['name'])} were other processes' I/O and are not in this "
                         "table.</p>")
    parts.append("<p class=\"muted\">device = issue to final completion, queue = insert to "
                 "issue, total = submission to completion; fully observed requests only.</p>")
    if figure:
        parts.append(figure)
    return section("classes", "Requests by class", *parts)


def commit_pairs(r: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The commit lines of the terminal report as (label, value) pairs."""
    com = r["commits"]
    out: list[tuple[str, Any]] = []
    parts = [f"{com['count']:,} commits"]
    if com.get("fsyncs_per_commit"):
        parts.append(f"{com['fsyncs_per_commit']:.2f} fsync calls per commit")
    if com.get("bytes_logged_per_commit") is not None:
        parts.append(f"{com['bytes_logged_per_commit'] / 1024:,.1f} KiB logged per commit")
    out.append(("commits", ", ".join(parts)))
    out += [(label, text(com[key])) for key, label, text in COMMIT_ROWS if com.get(key)]
    out.append(("log written", f"{fmt_mib(com.get('log_bytes') or 0)} MiB"))
    return out


def _jbd2_text(j: Mapping[str, Any]) -> str:
    ph = j["phases_ns"]
    return (f"{j['count']:,} commits; p50: commit {fmt_ns(j['duration_ns']['p50'])}, locking "
            f"{fmt_ns(ph['locking']['p50'])}, flushing {fmt_ns(ph['flushing']['p50'])}, "
            f"logging {fmt_ns(ph['logging']['p50'])}; {j.get('blocks_logged', 0):,} "
            "blocks logged")


def _btrfs_text(b: Mapping[str, Any]) -> str:
    return f"{b['transaction_commits']:,} transaction commits, {b['log_syncs']:,} log-tree syncs"


def _fast_commit_text(fc: Mapping[str, Any]) -> str:
    st = ", ".join(f"{k} {v:,}" for k, v in fc["by_status"].items())
    return f"{fc['count']:,} ({st})"


# The row of each kind of journal's figures in the commits table (the keys of the
# report's `commits` a journal kind adds: views/commits.py JOURNAL_FIGURES), in this
# order: (key, label, text).
COMMIT_ROWS: tuple[tuple[str, str, Callable[[Mapping[str, Any]], str]], ...] = (
    ("jbd2", "jbd2", _jbd2_text), ("xfs", "xfs", xfs_text), ("btrfs", "btrfs", _btrfs_text),
    ("ext4_fast_commit", "ext4 fast commits", _fast_commit_text))


def section_fsync(r: Mapping[str, Any], figure: str = "") -> str:
    """fsync-family calls by type (latency and what they waited for) and commits."""
    fs = r["fsync"]
    parts = []
    if not fs["count"]:
        parts.append("<p id=\"table-fsync\">No fsync-family calls.</p>")
    else:
        rows = []
        for name, c in fs.get("by_call", {}).items():
            lat = c["latency_ns"]
            sp = c["split_ns"]
            tot = sum(sp.values())

            def share(k: str, sp: Mapping[str, int] = sp, tot: int = tot) -> str:
                return f"{sp[k] / tot:.0%}" if tot else "-"
            rows.append([name, f"{c['count']:,}", f"{c['incomplete']:,}", fmt_ns(lat["p50"]),
                         fmt_ns(lat["p90"]), fmt_ns(lat["p99"]), fmt_ns(lat["max"]),
                         fmt_ns(c["total_ns"]), share("data"), share("commit"),
                         share("flush"), share("other"), f"{c['needed_commit']:,}"])
        head = ("call", "calls", "still running", "p50", "p90", "p99", "max", "total",
                "own data", "commit/log", "own flushes", "other", "needed a commit")
        parts.append(table(head, rows, numeric=range(1, len(head)), table_id="table-fsync"))
        parts.append("<p class=\"muted\">own data / commit/log / own flushes / other: share of "
                     "the calls' time spent waiting for each; a time in two counts once, "
                     "first as own data, then as own flushes, then as commit/log.</p>")
    parts.append(kv_table(commit_pairs(r), table_id="table-commits"))
    if figure:
        parts.append(figure)
    return section("fsync", "fsync and commits", *parts)


def _busy_split(busy_by_category: Mapping[str, int], busy_ns: int) -> Raw:
    """'barrier 21% data 77%' with each category's colour swatch."""
    parts = [f"<span style=\"white-space:nowrap\">{_swatch(colours().get(k, '#999'))}"
             f"{esc(k)} {100 * v / busy_ns:.0f}%</span>"
             for k, v in busy_by_category.items() if v and busy_ns]
    return Raw(" ".join(parts) if parts else "idle")


def device_rows(r: Mapping[str, Any]) -> list[list[Any]]:
    """Rows of the device table: the workload's disks, then the others that were busy."""
    mine = set(r["workload"].get("devices") or [])
    below = lower_devices(r)
    shown = ([d for d in r["devices"] if d["name"] in mine]
             + [d for d in r["devices"] if d["name"] not in mine
                and (d["busy_ns"] or d.get("bios"))])
    rows = []
    for d in shown:
        q = d["queue_depth"]
        fl = d["flush"]
        what = (f"below {', '.join(below[d['name']])}" if d["name"] in below
                else "not the workload's")
        name = esc(d["name"]) + ("" if d["name"] in mine else
                                 f"<br><span class=\"muted\">{esc(what)}</span>")
        # A bio-based device: its bios have an end, no start (no busy time).
        bio = bool(d.get("bios")) and d["bios"] == d["requests"]
        rows.append([Raw(name), "-" if bio else f"{100 * d['utilisation']:.1f}%",
                     "-" if bio else fmt_ns(d["busy_ns"]),
                     Raw(f"bio-based: {d['bios']:,} bios, completion times only")
                     if bio else _busy_split(d["busy_by_category_ns"], d["busy_ns"]),
                     f"{q['mean']:.2f}", f"{q['mean_busy']:.2f}", f"{q['max']:,}",
                     f"{d['requests']:,}", fmt_mib(d["read_bytes"]), fmt_mib(d["write_bytes"]),
                     f"{fl['count']:,}", fmt_ns(fl["total_ns"]) if fl["count"] else "-",
                     f"{fl['waiters']:,}",
                     f"{d.get('write_cache') or 'unknown'}, FUA {yes_no(d.get('fua'))}"])
    return rows


def section_devices(r: Mapping[str, Any], figure: str = "") -> str:
    """Per disk: busy time by category, queue depth, bytes, flushes, cache settings."""
    head = ("device", "busy", "busy time", "busy time by category", "depth mean",
            "depth mean busy", "depth max", "requests", "read MiB", "write MiB", "flushes",
            "flush time", "flush-sequenced waiters", "write cache")
    rows = device_rows(r)
    parts = [table(head, rows, numeric=(1, 2, *range(4, len(head) - 1)),
                   table_id="table-devices")
             if rows else "<p id=\"table-devices\">No disk had requests.</p>"]
    parts.append("<p class=\"muted\">busy = time at least one request was on the device "
                 "(each instant counted once, for the highest-priority category in flight); "
                 "depth = requests on the device, time-weighted.</p>")
    for e in r.get("stack_service") or []:
        sb = served_below(r, e["upper"])
        if sb and sb[1]:
            parts.append(f"<p>{esc(e['upper'])}'s busy time as {esc(', '.join(sb[0]))} served "
                         f"it below ({esc(SERVED_BELOW_NOTE)}): "
                         + "; ".join(esc(t) for t in sb[1]) + ".</p>")
    if figure:
        parts.append(figure)
    return section("devices", "Devices", *parts)


def section_placement(r: Mapping[str, Any], *figs: str) -> str:
    """Metadata:data ratio, seeks and positioning per class, time locality."""
    pl = r.get("placement") or {}
    loc = r.get("locality")
    md = r.get("metadata_data") or {}
    ratio = r.get("metadata_data_ratio")
    parts = [f"<p>metadata:data <b>{'-' if ratio is None else f'{ratio:.2f}'}</b> by bytes "
             f"written ({esc(fmt_mib(md.get('metadata_bytes', 0)))} MiB metadata, "
             f"{esc(fmt_mib(md.get('data_bytes', 0)))} MiB data, "
             f"{esc(fmt_mib(md.get('log_bytes', 0)))} MiB log).</p>"]
    if pl:
        rows = []
        for name, p in pl.items():
            base = p["positioning_basis"] > 0
            share = p["positioning_ns"] / p["device_ns"] if p["device_ns"] and base else None
            sk = p["seek_sectors"]
            rows.append([_label(name, F.CLASS_COLORS.get(name)),
                         f"{p['requests_with_seek']:,}", fmt_pct(p["sequential_share"]),
                         fmt_count(sk["p50"]), fmt_count(sk["p90"]), fmt_count(sk["max"]),
                         (("≥ " if p.get("baseline") == "fastest decile" else "")
                          + _us(p["positioning_ns"])) if base else "-",
                         _us(p["device_ns"]), fmt_pct(share)])
        head = ("class", "with a seek", "sequential", "seek p50 (sectors)", "p90 (sectors)",
                "max (sectors)", "positioning (us)", "device time (us)", "share")
        parts.append(table(head, rows, numeric=range(1, len(head)), table_id="table-placement"))
        parts.append("<p class=\"muted\">positioning: service time (from the later of its "
                     "issue and the previous completion on the device) beyond the baseline "
                     "of contiguous requests of the same device, class and size, counted "
                     "for seeking requests above the baseline's own spread "
                     "(docs/report-json.md). ≥: a lower bound, the device had no "
                     "contiguous request to compare with.</p>")
        if r.get("placement_remapped"):
            parts.append(f"<p class=\"muted\">{esc(remapped_note(r))}</p>")
    else:
        parts.append("<p id=\"table-placement\" class=\"muted\">Placement not computed "
                     "(--no-placement).</p>")
    if loc:
        if loc["adjacent_pairs"]:
            parts.append(f"<p>adjacent write pairs issued &gt; {loc['gap_ns'] / 1e6:g} ms apart: "
                         f"<b>{esc(fmt_pct(loc['late_share']))}</b> ({loc['late_pairs']:,} of "
                         f"{loc['adjacent_pairs']:,}): too far apart to merge.</p>")
        else:
            parts.append("<p>no write pairs adjacent on disk.</p>")
    parts.extend(f for f in figs if f)
    return section("placement", "Placement and locality", *parts)


# id -> (title, how to read it). The ids are stable: tests and links use them.
FIGURES: dict[str, tuple[str, str]] = {
    "fig-attribution": (
        "Where the time went",
        "The elapsed time as one bar of shares of elapsed, left to right in the table's "
        "order; the wider a segment, the more of the run it explains."),
    "fig-attribution-time": (
        "Where the time went, over time",
        "The same attribution per interval of the run, each category's share of its "
        "interval stacked in the table's order: when each category dominated."),
    "fig-latency": (
        "Device latency per class",
        "One histogram per request class, log2 buckets on a log axis (each bucket twice as "
        "wide as the previous); dashed line = p50, dotted = p99; mass far right = slow "
        "requests. A histogram holds the requests whose device time was seen, those the "
        "table's percentiles are over; its title gives the table's count where that "
        "differs: the table counts a loop device's I/O once, on the loop device, while the "
        "disk below's requests that carried it have device times here, and it counts "
        "requests never issued or whose completion was lost, which have none."),
    "fig-fsync-timeline": (
        "fsync calls and commits over time",
        "Each row is a thread; a bar is one fsync-family call from entry to return (calls "
        "closer than a pixel merge); the rows below mark commit-side events of the "
        "filesystem (journal commits, log forces, iclog writes): long bars between sparse "
        "marks mean calls waiting for a commit."),
    "fig-throughput": (
        "Throughput and queue depth over time",
        "Top: MiB/s of reads and writes completed in each time bucket; bottom: mean number "
        "of requests on each device in the same time frame; dips in MiB/s with a full queue "
        "mean slow requests, dips with an empty queue mean nothing was submitted."),
    "fig-seek": (
        "Seek distance per class",
        "One histogram per class of the distance from the end of the previous request on "
        "the disk to the start of this one, in issue order; the hatched bar at 0 is "
        "contiguous (sequential), bars far right are long jumps."),
    "fig-sectors": (
        "Disk sectors over time",
        "Every dot is a request at its issue time and start sector, coloured by class; the "
        "shaded band is the filesystem's log; diagonal lines are sequential streams, "
        "scattered dots are random I/O, alternating bands are seeks between areas."),
}


def figure_sections(r: Mapping[str, Any], data: Any | None) -> dict[str, str]:
    """The figure blocks of one result, by id; `data` is the result's "_figures" (None:
    only the figures the result alone can draw)."""
    why = r.get("attribution_unavailable")
    out = {"fig-attribution": figure_block(
        "fig-attribution", *FIGURES["fig-attribution"],
        png=None if why else F.attribution_figure([("this run", r)]),
        note=f"no attribution: {why}" if why else "")}
    series = getattr(data, "attribution_series", None) if data is not None else None
    out["fig-attribution-time"] = figure_block(
        "fig-attribution-time", *FIGURES["fig-attribution-time"],
        png=F.attribution_area_figure(series) if series else None,
        note="" if series else "needs wakeup links (a trace of format version 4) and the "
                               "trace: analyze it with AnalysisConfig(figures=True)")
    if data is None:
        for fid in ("fig-latency", "fig-fsync-timeline", "fig-throughput", "fig-seek",
                    "fig-sectors"):
            out[fid] = figure_block(fid, *FIGURES[fid], png=None,
                                    note="needs the trace: analyze it with "
                                         "AnalysisConfig(figures=True)")
        return out
    out["fig-latency"] = figure_block("fig-latency", *FIGURES["fig-latency"],
                                      png=F.latency_figure(data, r))
    out["fig-fsync-timeline"] = figure_block("fig-fsync-timeline",
                                             *FIGURES["fig-fsync-timeline"],
                                             png=F.fsync_timeline_figure(data))
    out["fig-throughput"] = figure_block("fig-throughput", *FIGURES["fig-throughput"],
                                         png=F.throughput_figure(data, r))
    out["fig-seek"] = figure_block("fig-seek", *FIGURES["fig-seek"], png=F.seek_figure(data, r))
    note = ""
    sampled = [s for s in data.scatters if s.total > len(s.t_s)]
    if sampled:
        note = ("Downsampled: " + "; ".join(
            f"{s.name} shows {len(s.t_s):,} of {s.total:,} requests" for s in sampled)
            + f" (a fixed-seed random sample, the same on every run; above "
              f"{F.SCATTER_LIMIT:,} points in all).")
    hidden = data.scatter_devices_total - len(data.scatters)
    if hidden > 0:
        note += f" {hidden} more disk(s) with fewer requests not drawn."
    out["fig-sectors"] = figure_block("fig-sectors", *FIGURES["fig-sectors"],
                                      png=F.sector_figure(data), note=note.strip())
    return out


def _short(text: str, width: int = 110) -> str:
    """A heading-sized version of a long name (the header table has the command whole)."""
    return text if len(text) <= width else text[: width - 3] + "..."


def _heading_name(r: Mapping[str, Any], width: int = 110) -> Raw:
    """The workload's name in a heading, elided; its short command whole on hover (the
    exact one is in the metadata block, which alone names the recording machine's
    paths)."""
    return Raw(f"<span class=\"cmd\" title=\"{esc(short_command(r))}\">"
               f"{esc(_short(title(r), width))}</span>")


NAV = (("where", "where the time went"), ("findings", "findings"),
       ("recorded", "what was recorded"), ("classes", "requests"),
       ("fsync", "fsync & commits"), ("devices", "devices"), ("placement", "placement"))
NAV_WHATIF = (("whatif", "what if"),)


def section_whatif(w: Mapping[str, Any]) -> str:
    """What if (iowhy whatif, docs/whatif.md): the recording replayed without barriers,
    with the write cache off and on the emulated ssd (on a write-through recording: with
    the write cache on, with and without barriers, and on the ssd;
    whatif.predict.for_report), or why it was not."""
    if w.get("note"):
        return section("whatif", "What if", f"<p>{esc(w['note'])}</p>")
    preds = w.get("predictions") or []
    if not preds:
        return ""
    m = preds[0]["measured_elapsed_ns"]
    b = preds[0]["baseline_elapsed_ns"]
    rows = []
    for p in preds:
        el = p["predicted_elapsed_ns"]
        ch = "; ".join(c["text"] for c in p["changes"][:2]) or "no category moves by 1%"
        rows.append([p["name"], fmt_ns(el), f"{100.0 * (el - m) / m:+.0f}%" if m else "-", ch])
    parts = [f"<p>The recording replayed against changed storage: each thread keeps its "
             f"syscalls, CPU bursts and what ended each of its waits; the device is served "
             f"by the emulated disk's model. Measured {esc(fmt_ns(m))}; replayed against "
             f"the recorded device's fitted model {esc(fmt_ns(b))} "
             f"({100.0 * (b - m) / m:+.0f}%: the model's own error on this trace). "
             f"<code>iowhy whatif TRACE</code> prints each in full.</p>" if m else "",
             table(("what if", "predicted elapsed", "vs measured", "what changes"), rows,
                   numeric=(1, 2), table_id="table-whatif"),
             "<p class=\"muted\">What the trace cannot tell: " + esc(" ".join(
                 f"{c[0].upper()}{c[1:]}." for c in preds[0]["cannot_tell"][:3])) + "</p>"]
    return section("whatif", "What if", *parts)


def render_html(result: Mapping[str, Any]) -> str:
    """The whole report for one analysis result, the answer first: what was lost (one
    line when nothing was), where the time went, the findings, then what was recorded
    and the detail. With the figure data (the analysis run with
    AnalysisConfig(figures=True): result["_figures"]) every figure is drawn; without it
    only those the result alone gives."""
    data = result.get("_figures")
    figs = figure_sections(result, data)
    parts = [
        nav(NAV),
        section_problems(result),
        section_where(result, figs["fig-attribution"] + figs["fig-attribution-time"]),
        section_findings(result),
        section("recorded", "What was recorded",
                section_header(result, data.tasks if data is not None else None)),
        section_classes(result, figs["fig-latency"]),
        section_fsync(result, figs["fig-fsync-timeline"]),
        section_devices(result, figs["fig-throughput"]),
        section_placement(result, figs["fig-seek"], figs["fig-sectors"]),
    ]
    whatif = result.get("_whatif")
    if whatif:
        parts[0] = nav(NAV + NAV_WHATIF)
        parts.append(section_whatif(whatif))
    heading = Raw(f"iowhy report {_heading_name(result)}")
    return neutralise_page(page(f"iowhy report: {_short(title(result))}", parts,
                                heading=heading))


# -- comparison page -----------------------------------------------------------------------

def _where_compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """The attribution of A and B side by side, in us (the text's default unit)."""
    rows = []
    for k in display_order():
        va = a["attribution_ns"].get(k, 0)
        vb = b["attribution_ns"].get(k, 0)
        rows.append([_label(k, colours()[k]), _us(va), _us(vb),
                     time_text(vb - va, "us", sign="+")])
    d = b["elapsed_ns"] - a["elapsed_ns"]
    rows.append([Raw("<b>elapsed</b>"), _us(a["elapsed_ns"]), _us(b["elapsed_ns"]),
                 time_text(d, "us", sign="+")])
    return table(("category", "A (us)", "B (us)", "B - A (us)"), rows, numeric=(1, 2, 3),
                 table_id="table-where-compare")


def _compare_text(comparison: Mapping[str, Any], part: str, block_id: str) -> str:
    """A part of the terminal text of `iowhy compare` (iowhy.reports.compare_text),
    escaped; this page does not re-derive its sentences."""
    try:
        from . import compare_text
        render = {"explained": compare_text.render_explained,
                  "table": compare_text.render_side_by_side}[part]
        return text_block(render(comparison), block_id=block_id)
    except Exception as e:  # a comparison this renderer cannot read: keep the page
        return (f"<p id=\"{esc(block_id)}\" class=\"muted\">(the comparison text could "
                f"not be rendered: {esc(type(e).__name__)}: {esc(e)}; its figures are "
                "below)</p>")


COMPARE_NAV = (("changed", "what changed"), ("where", "where the time went"),
               ("runs", "the two runs"), ("side-by-side", "side by side"),
               ("comparison", "every figure"), ("run-a", "run A"), ("run-b", "run B"))


def render_compare_html(a: Mapping[str, Any], b: Mapping[str, Any],
                        comparison: Mapping[str, Any]) -> str:
    """A page comparing two analysis results (A, B) with the comparison computed by
    `iowhy compare` (iowhy.compare.compare, docs/compare-json.md).

    The answer first: what was lost in either run, what changed (the terminal text's
    sentences), the attribution of both on one time axis; then what was recorded of
    each run (its metadata block), the side-by-side table, every figure of the
    comparison (folded; commands and paths are in the runs' blocks), then the findings,
    per-class, fsync and device tables of each run.
    """
    att = figure_block("fig-attribution", "Where the time went, A and B",
                       "One bar per run on the same time axis, so the longer run has the "
                       "longer bar; compare segment widths category by category.",
                       png=F.attribution_figure([("A", a), ("B", b)]))
    in_runs = ("command", "path", "filesystems")    # shown in the runs' metadata blocks
    short = {"a": short_command(a), "b": short_command(b)}

    def outside_runs(val: Any) -> Any:
        """The figure without what the runs' metadata blocks hold: a difference in
        command names each run by its short command (the exact argv is in the block)."""
        if isinstance(val, Mapping):
            if val.get("key") == "command" and "a" in val and "b" in val:
                return {**val, **short}
            return {k: outside_runs(v) for k, v in val.items()}
        if isinstance(val, list):
            return [outside_runs(v) for v in val]
        return val
    figures = {k: outside_runs({kk: vv for kk, vv in val.items() if kk not in in_runs}
                               if k in ("a", "b") and isinstance(val, Mapping) else val)
               for k, val in comparison.items()}
    parts = [
        nav(COMPARE_NAV),
        section_problems({"problems": comparison.get("problems") or []}),
        section("changed", "What changed", _compare_text(comparison, "explained",
                                                         "compare-text")),
        section("where", "Where the time went", _where_compare(a, b), att),
        section("runs", "The two runs",
                "<div class=\"cols\">"
                f"<div><h3>A: {_heading_name(a, 60)}</h3>"
                f"{prefix_ids(section_problems(a) + section_header(a), 'a')}</div>"
                f"<div><h3>B: {_heading_name(b, 60)}</h3>"
                f"{prefix_ids(section_problems(b) + section_header(b), 'b')}</div>"
                "</div>"),
        section("side-by-side", "Side by side", _compare_text(comparison, "table",
                                                              "compare-table")),
        section_mapping("comparison", "Comparison: every figure", figures,
                        folded="show the comparison's figures (the keys of `iowhy compare "
                               "--json`; each run's command, trace and filesystems are under "
                               "\"The two runs\")"),
    ]
    for label, r in (("A", a), ("B", b)):
        parts.append(f"<h2 id=\"run-{label.lower()}\">Run {label}</h2>")
        for s in (section_findings(r), section_classes(r), section_fsync(r),
                  section_devices(r)):
            parts.append(prefix_ids(s, label.lower()))
    heading = Raw(f"iowhy compare {_heading_name(a, 60)} <span class=\"muted\">vs</span> "
                  f"{_heading_name(b, 60)}")
    return neutralise_page(page(f"iowhy compare: {_short(title(a), 60)} vs "
                                f"{_short(title(b), 60)}", parts, heading=heading))
