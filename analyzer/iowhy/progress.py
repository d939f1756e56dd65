"""Progress on a terminal for the slow steps: after PROGRESS_AFTER_S seconds, one line on
stderr (`iowhy: analyzing big.iowt ... 3 s`) rewritten every second, erased when the
step ends. Only when stderr is a terminal: nothing reaches a pipe, a file or a test's
captured output.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Iterator, TextIO


class Step:
    """What the progress line says is running now (set from any thread)."""

    def __init__(self) -> None:
        self.name = ""

    def __call__(self, name: str) -> None:
        self.name = name


PROGRESS_AFTER_S = 2.0  # steps shorter than this print nothing
TICK_S = 1.0


def shown(stream: TextIO | None = None) -> bool:
    """Whether progress is shown on `stream` (stderr): only on a terminal."""
    s = sys.stderr if stream is None else stream
    try:
        return bool(s is not None and s.isatty())
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def progress(what: str, stream: TextIO | None = None,
             after_s: float = PROGRESS_AFTER_S) -> Iterator[Step]:
    """Show `iowhy: WHAT (STEP) ... N s` on `stream` (stderr) while the block runs longer
    than `after_s` seconds, when it is a terminal. The block may name its current step
    by calling the Step it is given (AnalysisConfig.progress takes it)."""
    s = sys.stderr if stream is None else stream
    step = Step()
    if not shown(s):
        yield step
        return
    from .reports.escape import printable
    done = threading.Event()
    t0 = time.monotonic()
    wrote = [0]

    def run() -> None:
        if done.wait(after_s):
            return
        while not done.is_set():
            now = f" ({step.name})" if step.name else ""
            msg = printable(f"iowhy: {what}{now} ... {time.monotonic() - t0:.0f} s")[:79]
            try:
                s.write("\r" + msg.ljust(wrote[0]))
                s.flush()
            except (OSError, ValueError):
                return
            wrote[0] = max(wrote[0], len(msg))
            done.wait(TICK_S)

    th = threading.Thread(target=run, name="iowhy-progress", daemon=True)
    th.start()
    try:
        yield step
    finally:
        done.set()
        th.join()
        if wrote[0]:
            try:
                s.write("\r" + " " * wrote[0] + "\r")
                s.flush()
            except (OSError, ValueError):
                pass
