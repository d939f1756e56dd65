"""The attribution's categories, each declared once: what every view, report, export
and test reads for a category's name, level, order, colour and words.

Two levels (docs/design.md, "The two levels of the causal attribution"). Level one
(`attribution_ns`) is what the workload waited for; level two (`attribution_detail_ns`)
is what served it, a *part*, each part counting toward its `parent` level one when no
segment on the way to it set another (model/wakeups.py, NATURAL_L1).

The rows' order within a level is the code order: the JSON's key order and the indices
of the causal engine's arrays (model/wakeups.py: the `L_*` level-one indices and the
`KIND_NAMES` kinds follow it; tests/unit/test_categories.py checks they agree). The
display order (terminal, HTML, figures, compare) is `display`.

Kept free of numpy: the command line's help reads it (names.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Category:
    name: str
    level: int  # 1: what the workload waited for; 2: what served it (a part)
    help: str  # level one: a wait goes here when...; level two: the part, in words
    # Level one:
    display: int = -1  # place in the reports' order (terminal, HTML, figures, compare)
    colour: str = ""  # the same in every figure and table (Okabe-Ito based)
    dark: bool = False  # a label on its colour is white (else black)
    short: str | None = None  # `iowhy top`'s column heading; None: not a column there
    own: str | None = None  # its own part: not worth naming when it is the only one
    correlational: bool = False  # also a category of the correlational attribution
    device: bool = False  # a request's class names it (model/classify.py CATEGORIES)
    by_whose: bool = False  # its parts are told as whose time it is (WHOSE_WORDS)
    # Level two:
    parent: str | None = None  # the level one it counts toward by itself
    words: str = ""  # "served by: <words>"
    whose: str | None = None  # "which thread: <whose>", for a part of a `by_whose` level one


def _one(name: str, display: int, colour: str, help: str, **kw: Any) -> Category:
    return Category(name, 1, help, display=display, colour=colour, **kw)


def _two(name: str, parent: str, words: str, **kw: Any) -> Category:
    return Category(name, 2, words, parent=parent, words=words, **kw)


CATEGORIES: tuple[Category, ...] = (
    # Level one, in code order.
    _one("cpu", 6, "#4D4D4D", "the recorded thread ran on a CPU", dark=True, short="cpu",
         own="cpu", correlational=True, by_whose=True),
    _one("runqueue", 7, "#F0E442", "the recorded thread was runnable, waiting for a CPU",
         short="rq", own="runqueue", correlational=True, by_whose=True),
    _one("barrier", 0, "#D55E00", "the completion of a cache flush it waited for",
         dark=True, short="bar", own="flush", correlational=True, device=True),
    _one("log", 1, "#CC79A7", "the end of a journal commit (the journal thread), or the "
         "completion of a journal/log write", short="log", own="log", correlational=True,
         device=True),
    _one("metadata", 2, "#E69F00", "the completion of a metadata request (or the log's "
         "metadata writeback thread)", short="met", own="metadata", correlational=True,
         device=True),
    _one("data", 3, "#0072B2", "the completion of a data write (or discard)", dark=True,
         short="dat", own="data", correlational=True, device=True),
    _one("read", 4, "#009E73", "the completion of a read", short="rea", own="read",
         correlational=True, device=True),
    _one("throttle", 5, "#999933", "nothing else: the kernel throttled the workload "
         "(dirty pages, the block layer's throttles and tags)", short="thr"),
    _one("helper-cpu", 8, "#8E7CC3", "a kernel helper thread while it ran, doing something "
         "no wait names", own="helper-cpu"),
    _one("helper-runqueue", 9, "#C5B8E8", "a kernel helper thread while it waited for a "
         "CPU, doing something no wait names", own="helper-runqueue"),
    _one("sleep", 10, "#A6CEE3", "a timer (nanosleep, poll/epoll/select timeouts)",
         short="slp", own="sleep"),
    _one("external", 11, "#8C564B", "a process outside the workload", dark=True,
         short="ext", own="external"),
    _one("wait-other", 12, "#BDBDBD", "nothing that explains it, or no thread alive",
         short="oth", own="wait-other", correlational=True),
    # Level two, in code order (model/wakeups.py KIND_NAMES).
    _two("cpu", "cpu", "on CPU", whose="the thread itself"),
    _two("runqueue", "runqueue", "waiting for a CPU", whose="the thread itself"),
    _two("flush", "barrier", "cache flushes"),
    _two("log", "log", "journal/log writes"),
    _two("metadata", "metadata", "metadata I/O"),
    _two("data", "data", "data I/O"),
    _two("read", "read", "reads"),
    _two("helper-cpu", "helper-cpu", "a kernel helper on CPU"),
    _two("helper-runqueue", "helper-runqueue", "a kernel helper waiting for a CPU"),
    _two("sleep", "sleep", "timers"),
    _two("external", "external", "other processes"),
    _two("wait-other", "wait-other", "unexplained"),
    _two("queue", "wait-other", "queued before issue"),
    _two("dirty-pages", "throttle", "dirty-page throttling"),
    _two("block-throttle", "throttle", "block-layer throttling"),
    _two("thread-cpu", "cpu", "another workload thread on CPU",
         whose="other workload threads"),
    _two("thread-runqueue", "runqueue", "another workload thread waiting for a CPU",
         whose="other workload threads"),
)


# -- read at each use (the reports' order and colours; a test adds a row) ----------------

def level_one() -> tuple[Category, ...]:
    """Level one's rows, in code order."""
    return tuple(c for c in CATEGORIES if c.level == 1)


def level_two() -> tuple[Category, ...]:
    """Level two's rows (the parts), in code order."""
    return tuple(c for c in CATEGORIES if c.level == 2)


def display_order() -> tuple[str, ...]:
    """Level one's names in the reports' order."""
    return tuple(c.name for c in sorted(level_one(), key=lambda c: c.display))


def colours() -> dict[str, str]:
    """Level one's name -> its colour."""
    return {c.name: c.colour for c in level_one()}


def dark() -> frozenset[str]:
    """The level ones whose colour takes white text."""
    return frozenset(c.name for c in level_one() if c.dark)


# -- fixed at import (code order: the engine's arrays, the JSON keys) ---------------------

# Level one, in code order; a trace without wakeup links has CORRELATIONAL only.
ATTRIBUTION_CATEGORIES: tuple[str, ...] = tuple(c.name for c in level_one())
CORRELATIONAL: tuple[str, ...] = tuple(c.name for c in level_one() if c.correlational)
# The level ones a request's class names (model/classify.py), contiguous in code order.
DEVICE_CATEGORIES: tuple[str, ...] = tuple(c.name for c in level_one() if c.device)
# Level two, in code order (model/wakeups.py KIND_NAMES).
PART_NAMES: tuple[str, ...] = tuple(c.name for c in level_two())
# Level two in words ("served by: ..."), and whose time a part of cpu/runqueue is.
PART_WORDS: dict[str, str] = {c.name: c.words for c in level_two()}
WHOSE_WORDS: dict[str, str] = {c.name: c.whose for c in level_two() if c.whose}
BY_WHOSE: frozenset[str] = frozenset(c.name for c in level_one() if c.by_whose)
# Level one -> its own part (a level one without one, as throttle, is absent).
OWN_PART: dict[str, str] = {c.name: c.own for c in level_one() if c.own}
# `iowhy top`'s columns, in code order, and their headings.
TOP_SHORT: dict[str, str] = {c.name: c.short for c in level_one() if c.short}
HELP: dict[str, str] = {c.name: c.help for c in level_one()}
