"""Display units: one unit per column, named in its label with a space before it
(`lat (us)`, `time (s)`). Figures are integer ns and bytes inside; a unit applies to the
displayed text only (JSON keeps integer ns).
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

# Time units a column can be shown in: ns per unit. Microseconds by default, as
# biolatency and biosnoop print latencies.
TIME_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
DEFAULT_TIME_UNIT = "us"
# Decimals shown per unit: exact to the ns up to ms, to the us for seconds.
DECIMALS = {"ns": 0, "us": 1, "ms": 3, "s": 6}
# hist's slot names (biolatency's) and the unit each one is.
HIST_UNITS = {"nsecs": "ns", "usecs": "us", "msecs": "ms"}

MAX_WIDTH = 100  # columns of every text output when stdout is not a terminal


def time_text(ns: Any, unit: str = DEFAULT_TIME_UNIT, missing: str = "-") -> str:
    """ns shown in `unit` (no unit suffix: the column label names it); `missing` for
    None or a negative value (not observed)."""
    if ns is None or ns < 0:
        return missing
    d = DECIMALS[unit]
    v = ns / TIME_UNITS[unit]
    return f"{int(ns):,}" if d == 0 else f"{v:,.{d}f}"


def label(name: str, unit: str) -> str:
    """A column label with its unit: `device (us)`."""
    return f"{name} ({unit})"


def output_width() -> int:
    """The width text output must fit: the terminal's (at most MAX_WIDTH) when stdout
    is a terminal, else MAX_WIDTH ($COLUMNS is honoured when it is smaller)."""
    width = MAX_WIDTH
    try:
        cols = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        cols = 0
    if 0 < cols < width:
        width = cols
    if sys.stdout.isatty():
        width = min(width, shutil.get_terminal_size((width, 24)).columns)
    return max(60, width)
