"""Progress on a terminal for the slow steps: after PROGRESS_AFTER_S seconds, one line on
stderr (`iowhy: analyzing big.iowt (workload view) ... 12 s, 4.1 M records, 0.34 M
records/s`) rewritten every second, erased when the step ends. Only when stderr is a
terminal: nothing reaches a pipe, a file, stdout or a test's captured output.

The line names the phase running now (the Step it was given, or phase() from code
below the command) and the records read so far (Step.add, or count(): errors.load
counts every record chunk it reads) with their rate: records over the seconds since the
line's start, what the command's end-to-end rate would be if it ended now.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Iterator, TextIO


class Step:
    """What the progress line says: the phase running now (named by calling the Step,
    from any thread) and the records handled so far (add).

    Each thread's last named phase is kept: a thread names its next phase when it starts
    it, and the analysis runs its phases on two threads (analysis.run_graph). The line
    shows the phase that has run longest among those of the threads still alive: a
    thread that has finished its phases and waits keeps its last name, but that phase
    started later than the one the other thread is still running."""

    def __init__(self) -> None:
        self.records = 0
        self._running: dict[int, tuple[float, str]] = {}

    def __call__(self, name: str) -> None:
        self._running[threading.get_ident()] = (time.monotonic(), name)

    @property
    def name(self) -> str:
        alive = {t.ident for t in threading.enumerate()}
        now = [v for k, v in list(self._running.items()) if k in alive]
        return min(now)[1] if now else ""

    def add(self, n: int) -> None:
        self.records += int(n)


PROGRESS_AFTER_S = 2.0  # steps shorter than this print nothing
TICK_S = 1.0
_active: list[Step] = []  # the lines being shown, innermost last


def phase(name: str) -> None:
    """Name the phase of the progress line being shown, if any: for code below a
    command, which has no Step of its own (the exporters, the importers)."""
    if _active:
        _active[-1](name)


def count(n: int) -> None:
    """Add n records handled to the progress line being shown, if any."""
    if _active:
        _active[-1].add(n)


def shown(stream: TextIO | None = None) -> bool:
    """Whether progress is shown on `stream` (stderr): only on a terminal."""
    s = sys.stderr if stream is None else stream
    try:
        return bool(s is not None and s.isatty())
    except (AttributeError, ValueError):
        return False


def _num(x: float) -> str:
    """1.2 M, 53.4 k or 712: a count or a rate, in three figures."""
    if x >= 1e6:
        return f"{x / 1e6:.1f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


def line(what: str, step: Step, seconds: float, width: int = 79) -> str:
    """The progress line, at most `width` columns. Short of room, the count of records
    goes first, then `what` loses its middle (a path keeps its file name), then the
    phase its end: the time and the rate always show."""
    from .escape import printable
    now = printable(f" ({step.name})") if step.name else ""
    what = printable(what)
    tail = f" ... {seconds:.0f} s"
    if step.records:
        rate = f"{_num(step.records / max(seconds, 1e-3))} records/s"
        full = f"{tail}, {_num(step.records)} records, {rate}"
        short = len("iowhy: ") + min(len(what), 24) + len(now) + len(full) > width
        tail = f"{tail}, {rate}" if short else full
    room = width - len(tail) - len("iowhy: ")
    if len(what) + len(now) > room:
        keep = max(room - len(now), 24)
        if len(what) > keep:
            what = what[:10] + "..." + what[len(what) - (keep - 13):]
        now = now[:max(room - len(what), 0)]
    return f"iowhy: {what}{now}{tail}"[:width]


def _width(s: TextIO) -> int:
    """Columns of the terminal `s` is, less one (79 when it cannot tell)."""
    import os
    try:
        cols = os.get_terminal_size(s.fileno()).columns
    except (AttributeError, ValueError, OSError):
        cols = 0
    return max(cols - 1, 40) if cols else 79  # 0: a terminal that does not say


@contextlib.contextmanager
def progress(what: str, stream: TextIO | None = None,
             after_s: float | None = None) -> Iterator[Step]:
    """Show `iowhy: WHAT (PHASE) ... N s, R M records, X M records/s` on `stream`
    (stderr) while the block runs longer than `after_s` seconds (default
    PROGRESS_AFTER_S), when it is a terminal. The block names its phase by calling the
    Step it is given (AnalysisConfig.progress takes it) and counts records with its
    add(); phase() and count() reach the innermost line from anywhere."""
    s = sys.stderr if stream is None else stream
    step = Step()
    if not shown(s):
        yield step
        return
    delay = PROGRESS_AFTER_S if after_s is None else after_s
    width = _width(s)
    done = threading.Event()
    t0 = time.monotonic()
    wrote = [0]

    def run() -> None:
        if done.wait(delay):
            return
        while not done.is_set():
            msg = line(what, step, time.monotonic() - t0, width)
            try:
                s.write("\r" + msg.ljust(wrote[0]))
                s.flush()
            except (OSError, ValueError):
                return
            wrote[0] = max(wrote[0], len(msg))
            done.wait(TICK_S)

    th = threading.Thread(target=run, name="iowhy-progress", daemon=True)
    _active.append(step)
    th.start()
    try:
        yield step
    finally:
        done.set()
        th.join()
        _active.remove(step)
        if wrote[0]:
            try:
                s.write("\r" + " " * wrote[0] + "\r")
                s.flush()
            except (OSError, ValueError):
                pass
