"""Display units: one unit per column, named in its label with a space before it
(`lat (us)`, `time (s)`). Figures are integer ns and bytes inside; a unit applies to the
displayed text only (JSON keeps integer ns).
"""

from __future__ import annotations

import shutil
import sys
from typing import Any

# Time units a column can be shown in: ns per unit. Microseconds by default, as
# biolatency and biosnoop print latencies.
TIME_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
DEFAULT_TIME_UNIT = "us"
# hist's slot names (biolatency's) and the unit each one is.
HIST_UNITS = {"nsecs": "ns", "usecs": "us", "msecs": "ms"}

MAX_WIDTH = 100  # columns of every text output when stdout is not a terminal


def time_text(ns: Any, unit: str = DEFAULT_TIME_UNIT, missing: str = "-",
              sign: str = "", decimals: int | None = None) -> str:
    """ns shown in `unit`, without a suffix (the column label names the unit): 3
    decimals below 100, 1 below 10,000, none above (a value keeps about 4 significant
    digits and fits a 10-column cell up to 100 s in us); integer ns; `decimals` fixes
    them. `missing` for None or, unless `sign` is "+", a negative value (not observed);
    sign "+" writes the sign of a difference."""
    if ns is None or (ns < 0 and sign != "+"):
        return missing
    if ns == 0:
        return "0"
    if unit == "ns":
        return f"{int(ns):{sign},}"
    v = ns / TIME_UNITS[unit]
    d = decimals if decimals is not None else 3 if abs(v) < 100 else 1 if abs(v) < 10_000 else 0
    return f"{v:{sign},.{d}f}"


def label(name: str, unit: str) -> str:
    """A column label with its unit: `device (us)`."""
    return f"{name} ({unit})"


def output_width() -> int:
    """The width text output must fit: MAX_WIDTH, or the terminal's when stdout is a
    narrower terminal (at least 60 columns)."""
    if not sys.stdout.isatty():
        return MAX_WIDTH
    cols = shutil.get_terminal_size((MAX_WIDTH, 24)).columns
    return max(60, min(MAX_WIDTH, cols))
