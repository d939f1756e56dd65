"""log2 histograms: text in the shape of biolatency's print_log2_hist, or a PNG.

Slot i holds values in [2^i, 2^(i+1)); slot 0 also holds 0 (as in bcc's log2()). The
PNG uses matplotlib's object API (Figure + Agg canvas), never pyplot: safe in threads
and without a display.
"""

from __future__ import annotations

from typing import Sequence

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


def render_png(counts: Sequence[int], val_type: str, fmt: str = "png", title: str = "") -> bytes:
    """A bar chart of the log2 histogram as the bytes of a FMT file (png, svg or pdf)."""
    import io

    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(8, 4.5), dpi=100)
    ax = fig.subplots()
    n = len(counts)
    labels = []
    for i in range(n):
        low = 0 if i == 0 else 1 << i
        labels.append(f"{low}-{(1 << (i + 1)) - 1}")
    ax.bar(range(n), list(counts), color="#4c72b0")
    ax.set_xticks(range(n))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax.set_xlabel(val_type)
    ax.set_ylabel("count")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if title:
        ax.set_title(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt)
    return buf.getvalue()


def write_png(counts: Sequence[int], val_type: str, out: str, title: str = "") -> None:
    """render_png() written to OUT (format from its suffix) by iowhy.outfile's rules:
    never through a symlink, atomically, mode 0600."""
    import os

    from iowhy.outfile import write_output
    fmt = os.path.splitext(out)[1][1:].lower() or "png"
    write_output(out, render_png(counts, val_type, fmt, title))
