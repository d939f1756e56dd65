"""Figures of the HTML report: the per-request data they need, and one PNG per figure.

The analysis computes what the figures draw (iowhy.views.series.FigureData, in
result["_figures"] when run with AnalysisConfig(figures=True)); nothing here reads a
trace or derives a figure. The `*_figure()` functions draw with matplotlib's object
API (Figure + Agg canvas, never pyplot: safe in threads and without a display) and return
PNG bytes. Times on every time axis are seconds since the start of the window.

Nothing here writes HTML; iowhy.reports.html embeds the PNGs and adds the captions.
"""

from __future__ import annotations

import io
from typing import Any, Mapping, Sequence

import numpy as np

from iowhy.categories import colours, dark, display_order
from iowhy.findings import plural
from iowhy.kernels import union_intervals
from iowhy.names import CLASS_NAMES
from iowhy.views.series import SCATTER_LIMIT, FigureData, Scatter

from .escape import printable_lines

MAX_TIMELINE_THREADS = 30  # fsync timeline rows; the threads with the most call time
DPI = 110
WIDTH_IN = 11.0

# One colour per class and per time category, the same in every figure and table
# (Okabe-Ito based: tells apart under the common colour-vision deficiencies).
CLASS_COLORS = {
    "flush": "#D55E00", "log": "#CC79A7", "metadata": "#E69F00", "data": "#0072B2",
    "read": "#009E73", "readahead": "#56B4E9", "discard": "#8C6D31",
}
# The time categories' colours and order: iowhy.categories (colours(), display_order()).
CALL_COLORS = {
    "fsync": "#0072B2", "fdatasync": "#009E73", "sync": "#D55E00", "syncfs": "#E69F00",
    "sync_file_range": "#CC79A7", "msync": "#8C6D31", "osync_write": "#56B4E9",
}


def mpl_text(s: Any) -> str:
    """Text from the trace made literal for matplotlib (a `$` would start math mode), each
    line printable (a name's control characters and lone surrogates escaped: matplotlib
    cannot draw a surrogate)."""
    return printable_lines(str(s)).replace("\\", "\\\\").replace("$", r"\$")


def new_figure(height_in: float, width_in: float = WIDTH_IN) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Any) -> bytes:
    """The figure as PNG bytes (Agg canvas)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11,
            color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])


def _si(x: float) -> str:
    """Axis numbers in few characters: 512, 4k, 1.5M, 2G."""
    a = abs(x)
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def _fmt_us(ns: float | None) -> str:
    """A latency in the unit of the latency axis: `123.8 us`."""
    from .units import time_text
    return "-" if ns is None else time_text(int(ns), "us") + " us"


def _dur(ns: float) -> str:
    """A bucket width in words: 850 us, 5.03 ms, 1.4 s."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def _count_axis(ax: Any) -> None:
    """Integer counts on the y axis, in few characters (300k, not 300000)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=3))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _si(v)))


def _time_axis(ax: Any, elapsed_s: float) -> None:
    ax.set_xlim(0, max(elapsed_s, 1e-9))
    ax.set_xlabel("time (s) since the start of the recording")
    ax.grid(True, axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)  # grid lines behind bars and dots


# -- figures ------------------------------------------------------------------------------

def attribution_figure(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> bytes:
    """The attribution as one stacked horizontal bar per analysis result, each as shares
    of its own elapsed time (0 to 1), in the table's order.

    runs: (label, result) pairs; one pair for a report, two for a comparison.
    """
    fig = new_figure(0.9 + 0.65 * len(runs))
    ax = fig.subplots()
    present = [k for k in display_order() if any(k in r["attribution_ns"] for _, r in runs)]
    colour, white = colours(), dark()
    for i, (label, r) in enumerate(runs):
        att = r["attribution_ns"]
        el = r["elapsed_ns"] or 1
        left = 0.0
        for k in present:
            w = att.get(k, 0) / el
            if w <= 0:
                continue
            ax.barh(i, w, left=left, height=0.6, color=colour[k],
                    edgecolor="white", linewidth=0.5, label=k if i == 0 else None)
            if w >= 0.035:
                text = f"{k}\n{100 * w:.0f}%" if w >= 0.07 else f"{100 * w:.0f}%"
                ax.text(left + w / 2, i, text, ha="center", va="center",
                        fontsize=8, color="white" if k in white else "black")
            left += w
    # Categories that got no time still appear in the legend (so a zero is visible).
    handles = []
    from matplotlib.patches import Patch
    for k in present:
        handles.append(Patch(facecolor=colour[k], label=k))
    ax.legend(handles=handles, ncol=min(len(present), 6), loc="lower center",
              bbox_to_anchor=(0.5, 1.0), fontsize=8, frameon=False)
    ax.set_yticks(range(len(runs)))
    ax.set_yticklabels([mpl_text(label) for label, _ in runs])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(lambda x, _: f"{100 * x:.0f}%")
    ax.set_xlabel("share of elapsed")
    ax.grid(True, axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    return png_bytes(fig)


def attribution_area_figure(series: Sequence[Mapping[str, Any]]) -> bytes:
    """The elapsed attribution over time: per interval (views.causal.interval_view), each
    category's share of the interval, stacked in the table's order."""
    fig = new_figure(2.6)
    ax = fig.subplots()
    # Steps: each interval's shares hold from its start to its end.
    x = [i["start_ns"] / 1e9 for i in series] + [series[-1]["end_ns"] / 1e9 if series else 0]
    present = [k for k in display_order() if any(i["attribution_ns"].get(k) for i in series)]
    ys = [[i["attribution_ns"].get(k, 0) / max(1, i["end_ns"] - i["start_ns"])
           for i in series] for k in present]
    ys = [y + y[-1:] for y in ys]
    ax.stackplot(x, ys, colors=[colours()[k] for k in present], labels=present,
                 step="post", linewidth=0)
    ax.set_ylim(0, 1)
    if series:
        ax.set_xlim(series[0]["start_ns"] / 1e9, series[-1]["end_ns"] / 1e9)
    ax.yaxis.set_major_formatter(lambda y, _: f"{100 * y:.0f}%")
    ax.set_ylabel("share of interval")
    ax.set_xlabel("time (s) from the start of recording")
    ax.legend(ncol=min(len(present), 6) or 1, loc="lower center", bbox_to_anchor=(0.5, 1.0),
              fontsize=8, frameon=False)
    return png_bytes(fig)


def _class_rows(hists: Mapping[str, Sequence[int]]) -> list[str]:
    return [c for c in CLASS_NAMES if hists.get(c) and sum(hists[c])]


def latency_figure(d: FigureData, result: Mapping[str, Any]) -> bytes:
    """Device latency per class: log2 buckets on a log time axis, p50 and p99 marked."""
    rows = _class_rows(d.latency_hist_us)
    if not rows:
        fig = new_figure(1.6)
        _empty(fig.subplots(), "no fully observed requests")
        return png_bytes(fig)
    fig = new_figure(0.55 + 1.35 * len(rows))
    axes = fig.subplots(len(rows), 1, sharex=True, squeeze=False)[:, 0]
    hi = max(len(d.latency_hist_us[c]) for c in rows)
    from matplotlib.ticker import FuncFormatter
    for ax, c in zip(axes, rows):
        counts = np.asarray(d.latency_hist_us[c], dtype=float)
        # slot i holds [2^i, 2^(i+1)) us; slot 0 also 0 us (drawn from 0.5 us).
        edges = np.array([0.5] + [2.0 ** i for i in range(1, len(counts) + 1)])
        ax.stairs(counts, edges, fill=True, color=CLASS_COLORS[c], alpha=0.85)
        dn = result["requests"][c]["device_ns"]
        for q, style in (("p50", "--"), ("p99", ":")):
            if dn.get(q) is not None:
                ax.axvline(max(dn[q], 500) / 1e3, color="black", linestyle=style,
                           linewidth=1)
        n = int(counts.sum())
        # The histogram holds the requests the percentiles are over, which need not be
        # those the class table counts (FIGURES["fig-latency"]): say so where they differ.
        table = result["requests"][c].get("count")
        other = f" (table: {table:,})" if isinstance(table, int) and table != n else ""
        ax.set_title(f"{c}: {n:,} requests with a device time{other}, "
                     f"p50 {_fmt_us(dn.get('p50'))}, "
                     f"p99 {_fmt_us(dn.get('p99'))}, max {_fmt_us(dn.get('max'))}",
                     fontsize=9, loc="left")
        ax.set_ylabel("requests", fontsize=8)
        _count_axis(ax)
        # Every row keeps its tick labels: no reading across rows to find a bucket.
        ax.tick_params(labelsize=8, labelbottom=True)
        ax.grid(True, axis="x", color="#e5e5e5", linewidth=0.6)
        ax.set_axisbelow(True)
    ax = axes[-1]
    ax.set_xscale("log", base=10)
    ax.set_xlim(0.5, 2.0 ** hi)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("device latency (us), issue to completion, log2 buckets")
    return png_bytes(fig)


def seek_slot_label(i: int) -> str:
    """Slot 0: contiguous; slot i >= 1: |seek| in [2^(i-1), 2^i) sectors, labelled by its
    lower bound: exact up to 4096, then in Ki/Mi/Gi (powers of 1024) so labels stay exact."""
    if i == 0:
        return "0"
    v = 1 << (i - 1)
    for suffix, shift in (("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if v > 4096 and v >= 1 << shift:
            return f"{v >> shift}{suffix}"
    return str(v)


def seek_figure(d: FigureData, result: Mapping[str, Any]) -> bytes:
    """|seek distance| per class in log2 buckets, slot 0 = contiguous."""
    rows = _class_rows(d.seek_hist)
    if not rows:
        fig = new_figure(1.6)
        _empty(fig.subplots(), "no seek distances (fewer than two data-bearing requests)")
        return png_bytes(fig)
    fig = new_figure(0.6 + 1.35 * len(rows))
    axes = fig.subplots(len(rows), 1, sharex=True, squeeze=False)[:, 0]
    hi = max(len(d.seek_hist[c]) for c in rows)
    pl = result.get("placement") or {}
    for ax, c in zip(axes, rows):
        counts = np.asarray(d.seek_hist[c], dtype=float)
        colors = [CLASS_COLORS[c]] * len(counts)
        ax.bar(np.arange(len(counts)), counts, width=0.85, color=colors)
        if len(counts):
            ax.bar([0], counts[:1], width=0.85, color=CLASS_COLORS[c], hatch="//",
                   edgecolor="white")
        n = int(counts.sum())
        seq = counts[0] / n if n else 0.0
        p = pl.get(c) or {}
        p50 = (p.get("seek_sectors") or {}).get("p50")
        ax.set_title(f"{c}: {n:,} seeks, {seq:.0%} contiguous (seek 0)"
                     + (f", p50 {_si(p50)} sectors" if p50 is not None else ""),
                     fontsize=9, loc="left")
        ax.set_ylabel("requests", fontsize=8)
        _count_axis(ax)
    step = 1 if hi <= 24 else 2
    ticks = list(range(0, hi, step))
    for ax in axes:
        ax.set_xticks(ticks)
        ax.set_xticklabels([seek_slot_label(i) for i in ticks], fontsize=8)
        ax.tick_params(labelsize=8, labelbottom=True)
    ax = axes[-1]
    ax.set_xlim(-0.6, hi - 0.4)
    ax.set_xlabel("|seek distance| (sectors of 512 B; Ki = 1024), log2 buckets: lower bound")
    return png_bytes(fig)


def sector_figure(d: FigureData) -> bytes:
    """Where on the disk each request went, over time (seekwatcher style)."""
    if not d.scatters:
        fig = new_figure(1.6)
        _empty(fig.subplots(), "no data-bearing requests")
        return png_bytes(fig)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter
    fig = new_figure(0.8 + 3.6 * len(d.scatters))
    axes = fig.subplots(len(d.scatters), 1, squeeze=False)[:, 0]
    for ax, sc in zip(axes, d.scatters):
        present = [k for k in range(len(CLASS_NAMES)) if (sc.cls == k).any()]
        # Large classes first, so the rare ones (log, metadata) are drawn on top.
        present.sort(key=lambda k: -int((sc.cls == k).sum()))
        size = 6.0 if len(sc.t_s) < 5000 else 2.0 if len(sc.t_s) < 50_000 else 0.6
        handles: list[Any] = []
        for lo, hi in sc.log_ranges:
            ax.axhspan(lo, hi, color=CLASS_COLORS["log"], alpha=0.15, linewidth=0)
        if sc.log_ranges:
            handles.append(Patch(facecolor=CLASS_COLORS["log"], alpha=0.3,
                                 label=mpl_text(f"{sc.log_label} range")))
        for k in present:
            m = sc.cls == k
            ax.scatter(sc.t_s[m], sc.sector[m], s=size, color=CLASS_COLORS[CLASS_NAMES[k]],
                       marker="o", linewidths=0, rasterized=True)
        for k in sorted(present):
            handles.append(Line2D([], [], marker="o", linestyle="", markersize=5,
                                  color=CLASS_COLORS[CLASS_NAMES[k]],
                                  label=f"{CLASS_NAMES[k]} ({int((sc.cls == k).sum()):,})"))
        if sc.total == len(sc.t_s):
            title = f"{sc.name}: {sc.total:,} requests"
        else:
            title = (f"{sc.name}: {len(sc.t_s):,} of {sc.total:,} requests drawn (fixed-seed "
                     "random sample; the legend counts drawn points)")
        ax.set_title(mpl_text(title), fontsize=9, loc="left")
        ax.set_ylabel("sector")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _si(v)))
        ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  frameon=False)
        _time_axis(ax, d.elapsed_ns / 1e9)
        lo_s = min([float(sc.sector.min())] + [a for a, _ in sc.log_ranges]) \
            if len(sc.sector) else 0.0
        hi_s = max([float(sc.sector.max())] + [b for _, b in sc.log_ranges]) \
            if len(sc.sector) else 1.0
        pad = max((hi_s - lo_s) * 0.03, 8.0)
        ax.set_ylim(lo_s - pad, hi_s + pad)
    return png_bytes(fig)


def throughput_figure(d: FigureData, result: Mapping[str, Any]) -> bytes:
    """MiB/s completed (reads and writes) and the queue depth per device, over time."""
    from matplotlib.ticker import MaxNLocator
    fig = new_figure(5.0)
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    el = d.elapsed_ns / 1e9
    step_s = d.tput_step_ns / 1e9
    edges = np.arange(len(d.tput_write) + 1) * step_s
    edges[-1] = max(min(edges[-1], el), edges[-2] if len(edges) > 1 else 0.0) or step_s
    for arr, label, color in ((d.tput_write, "write", CLASS_COLORS["data"]),
                              (d.tput_read, "read", CLASS_COLORS["read"])):
        if arr.sum() > 0:
            ax1.stairs(arr / 2**20 / max(step_s, 1e-12), edges, color=color, linewidth=1.4,
                       baseline=None,
                       label=f"{label}\n({arr.sum() / 2**20:,.1f} MiB)")
    if d.tput_write.sum() + d.tput_read.sum() > 0:
        ax1.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    else:
        ax1.text(0.5, 0.5, "no data transferred", ha="center", va="center",
                 transform=ax1.transAxes, color="#555555")
    ax1.set_ylabel("MiB/s")
    ax1.set_ylim(bottom=0)
    ax1.set_title(f"throughput: bytes completed per {_dur(d.tput_step_ns)} bucket",
                  fontsize=9, loc="left")
    ax1.grid(True, axis="x", color="#e5e5e5", linewidth=0.6)
    wl = set(result.get("workload", {}).get("devices") or [])
    devs = [x for x in result.get("devices", []) if x["name"] in wl] or \
        [x for x in result.get("devices", []) if x["busy_ns"]]
    drawn = 0
    for i, dv in enumerate(devs[:6]):
        q = dv["queue_depth"]
        series = np.asarray(q.get("series") or [], dtype=float)
        if not len(series):
            continue
        st = q["step_ns"] / 1e9
        e = np.minimum(np.arange(len(series) + 1) * st, max(el, st))
        ax2.stairs(series, e, linewidth=1.4, baseline=None, label=mpl_text(
            f"{dv['name']}\n(max {q['max']}, busy mean {q['mean_busy']:.2f})"),
            color=["#333333", "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00"][i])
        drawn += 1
    if drawn:
        ax2.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax2.set_ylabel("queue depth (requests)")
    ax2.set_ylim(bottom=0)
    ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
    step_q = devs[0]["queue_depth"]["step_ns"] if devs else 0
    ax2.set_title(f"queue depth: mean requests on the device per {_dur(step_q)} bucket",
                  fontsize=9, loc="left")
    _time_axis(ax2, el)
    return png_bytes(fig)


def fsync_timeline_figure(d: FigureData) -> bytes:
    """fsync-family calls per thread as bars, commit-side events as marks below them."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    el = d.elapsed_ns / 1e9
    tids = np.unique(d.calls_tid)
    busy = {int(t): float((d.calls_exit_s - d.calls_enter_s)[d.calls_tid == t].sum())
            for t in tids}
    shown = sorted(busy, key=lambda t: -busy[t])[:MAX_TIMELINE_THREADS]
    shown.sort()
    marks = [(k, v) for k, v in d.marks.items() if len(v)]
    nrows = len(shown) + len(marks)
    if not nrows:
        fig = new_figure(1.6)
        _empty(fig.subplots(), "no fsync-family calls and no commits in this trace")
        return png_bytes(fig)
    fig = new_figure(1.3 + 0.32 * nrows)
    ax = fig.subplots()
    # Calls shorter than a pixel would vanish: widen them to a pixel, then merge what
    # overlaps (one bar per stretch), so a million calls still draw quickly.
    px = max(el, 1e-9) / 1000
    labels = []
    types_seen: list[str] = []
    for row, tid in enumerate(shown):
        m = d.calls_tid == tid
        for ctype in sorted(set(d.calls_type[m].tolist())):
            mm = m & (d.calls_type == ctype)
            s = d.calls_enter_s[mm]
            e = np.maximum(d.calls_exit_s[mm], s + px)
            us, ue = union_intervals(np.round(s * 1e9).astype(np.int64),
                                     np.round(e * 1e9).astype(np.int64))
            bars = list(zip((us / 1e9).tolist(), ((ue - us) / 1e9).tolist()))
            ax.broken_barh(bars, (row - 0.35, 0.7), color=CALL_COLORS.get(ctype, "#777777"))
            if ctype not in types_seen:
                types_seen.append(ctype)
        n = int(m.sum())
        labels.append(mpl_text(f"{d.tasks.get(tid) or '?'} tid {tid}: {plural(n, 'call')}"))
    mark_colors = ["#222222", "#CC79A7", "#E69F00", "#D55E00", "#0072B2"]
    for j, (label, t) in enumerate(marks):
        row = len(shown) + j
        ax.plot(t, np.full(len(t), row), linestyle="", marker="|", markersize=11,
                markeredgewidth=1.2, color=mark_colors[j % len(mark_colors)])
        labels.append(f"{label}: {len(t):,}")
    if shown and marks:
        ax.axhline(len(shown) - 0.5, color="#999999", linewidth=0.8)
    ax.set_yticks(range(nrows))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_ylim(nrows - 0.5, -0.5)
    handles: list[Any] = [Patch(color=CALL_COLORS.get(c, "#777777"), label=c)
                          for c in types_seen]
    if marks:
        handles.append(Line2D([], [], linestyle="", marker="|", markersize=9, color="#222222",
                              label="commit-side event"))
    if handles:
        ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  frameon=False)
    hidden = len(tids) - len(shown)
    title = (f"{plural(len(d.calls_tid), 'fsync-family call')} by "
             f"{plural(len(tids), 'thread')}"
             if len(tids) else "no fsync-family calls")
    if hidden > 0:
        title += f"; the {len(shown)} threads with the most call time shown"
    ax.set_title(title, fontsize=9, loc="left")
    _time_axis(ax, el)
    return png_bytes(fig)


def task_summary(tasks: Mapping[int, str], limit: int = 8) -> list[tuple[str, int]]:
    """(comm, threads) by number of threads, then name: who ran in the workload."""
    counts: dict[str, int] = {}
    for c in tasks.values():
        c = c or "(unnamed)"
        counts[c] = counts.get(c, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


__all__ = [
    "CLASS_COLORS", "FigureData", "SCATTER_LIMIT",
    "Scatter", "attribution_area_figure", "attribution_figure", "fsync_timeline_figure",
    "latency_figure", "mpl_text",
    "png_bytes", "sector_figure", "seek_figure", "task_summary", "throughput_figure",
]
