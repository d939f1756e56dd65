"""log2 histograms: text in the shape of biolatency's print_log2_hist, or a PNG.

Slot i holds values in [2^i, 2^(i+1)); slot 0 also holds 0 (as in bcc's log2()). The
PNG uses matplotlib's object API (Figure + Agg canvas), never pyplot: safe in threads
and without a display.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from iowhy.kernels import log2_hist

STARS_MAX = 40


def log2_counts(values: Sequence[int] | np.ndarray) -> list[int]:
    """Counts per log2 slot of non-negative integers, trailing empty slots dropped
    (iowhy.kernels.log2_hist, the slots of every log2 histogram iowhy shows)."""
    return log2_hist(np.asarray(values, dtype=np.int64))


def _stars(val: int, val_max: int, width: int) -> str:
    n = min(val, val_max) * width // val_max if val_max else 0
    return "*" * n + " " * (width - n) + ("+" if val > val_max else "")


def render_log2_hist(counts: Sequence[int], val_type: str = "usecs") -> str:
    """Text exactly as biolatency prints it (header line, then one line per slot)."""
    idx_max = -1
    val_max = 0
    for i, v in enumerate(counts):
        if v > 0:
            idx_max = i
        val_max = max(val_max, int(v))
    if idx_max < 0:
        return ""
    small = idx_max <= 32
    lines = [f"{'':{5 if small else 15}}{val_type:<{19 if small else 29}} : count    distribution"]
    stars = STARS_MAX if small else STARS_MAX // 2
    width = 10 if small else 20
    for i in range(idx_max + 1):
        low = (1 << (i + 1)) >> 1
        high = (1 << (i + 1)) - 1
        if low == high:
            low -= 1
        val = int(counts[i])
        lines.append(f"{low:>{width}} -> {high:<{width}} : {val:<8} |"
                     f"{_stars(val, val_max, stars)}|")
    return "\n".join(lines)


def _si(v: int) -> str:
    """A slot bound in few characters: 512, 1K, 64K, 2M, 1G (binary multiples)."""
    for shift, suffix in ((30, "G"), (20, "M"), (10, "K")):
        if v >= 1 << shift and v % (1 << shift) == 0:
            return f"{v >> shift}{suffix}"
    return str(v)


def slot_position(value: float) -> float:
    """Where `value` falls on the bar axis (bar i centred on i, spanning slot i's
    [2^i, 2^(i+1)); slot 0 spans [0, 2)), linear within its slot: for the percentile
    lines."""
    if value < 2:
        return -0.5 + max(0.0, float(value)) / 2
    i = int(value).bit_length() - 1
    low = 1 << i
    return i - 0.5 + (value - low) / low


def hist_figure(groups: Sequence[tuple[str, Sequence[int], Mapping[str, float | None]]],
                axis_label: str, title: str, log_y: bool = False, value_unit: str = ""
                ) -> Any:
    """A matplotlib Figure of log2 histograms, one panel per group: (panel name, counts
    per log2 slot, {"p50": value, "p99": value} in the slots' unit, drawn as lines).
    Titled `title`, x axis `axis_label` (the metric and its unit), y axis `count`
    (logarithmic with log_y); the percentile values are labelled with
    `value_unit`. Sized and lettered for a slide."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    n = max(1, len(groups))
    fig = Figure(figsize=(10, 2.2 + 2.6 * n), dpi=120, layout="constrained")
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    slots = max([len(c) for _, c, _ in groups] + [1])
    for ax, (name, counts, pct) in zip(axes, groups):
        ax.bar(range(len(counts)), list(counts), width=0.85, color="#4c72b0")
        for q, color, style in (("p50", "#dd8452", "--"), ("p99", "#c44e52", ":")):
            v = pct.get(q)
            if v is not None:
                ax.axvline(slot_position(float(v)), color=color, linestyle=style,
                           linewidth=2, label=(f"{q} {v:,.0f}" if float(v).is_integer()
                                               else f"{q} {v:,.2f}") + f" {value_unit}")
        ax.set_xlim(-0.6, slots - 0.4)
        step = max(1, (slots + 15) // 16)  # at most 16 labelled slots
        ticks = list(range(0, slots, step))
        ax.set_xticks(ticks)
        ax.set_xticklabels([_si(0 if i == 0 else 1 << i) for i in ticks], fontsize=11)
        ax.tick_params(axis="y", labelsize=11)
        ax.set_ylabel("count", fontsize=12)
        if log_y:
            # bars grow from 0: clipped to the axis bottom (masked, they would vanish)
            ax.set_yscale("log", nonpositive="clip")
            ax.set_ylim(bottom=0.5, top=max([max(counts, default=1), 1]) * 2)
        else:
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, axis="y", color="#e5e5e5", linewidth=0.6)
        ax.set_axisbelow(True)
        if name:
            ax.set_title(name, fontsize=12, loc="left")
        if any(pct.get(q) is not None for q in ("p50", "p99")):
            ax.legend(fontsize=11, loc="best")
    axes[-1].set_xlabel(axis_label + "  (log2 slots: [low, 2 x low))", fontsize=12)
    fig.suptitle(title, fontsize=15)
    return fig


def figure_bytes(fig: Any, fmt: str = "png") -> bytes:
    """The bytes of `fig` as a FMT file (png, svg or pdf)."""
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt)
    return buf.getvalue()


def render_png(counts: Sequence[int], val_type: str, fmt: str = "png", title: str = "") -> bytes:
    """One log2 histogram (hist_figure) as the bytes of a FMT file (png, svg or pdf)."""
    return figure_bytes(hist_figure([("", counts, {})], val_type, title), fmt)


def render_hist_json(doc: Mapping[str, Any]) -> str:
    """`iowhy hist --json`: the document commands.cmd_hist assembled (docs/hist-json.md)."""
    import json
    return json.dumps(doc, indent=2, allow_nan=False)
