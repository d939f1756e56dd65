"""What the commands share: the error a user can fix, exit codes, and opening a trace
(kept free of numpy, like names.py: `iowhy record` imports it for the whole run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .traceformat import Trace

EXIT_USAGE = 2
EXIT_FAIL = 1
EXIT_NOT_FOUND = 127


class UserError(Exception):
    """A problem the user can fix: printed as one line plus a hint, exit non-zero."""

    def __init__(self, message: str, hint: str = "", code: int = EXIT_FAIL) -> None:
        super().__init__(message)
        self.hint = hint
        self.code = code


def load(path: str) -> Trace:
    """Open a trace; a trace that cannot be read is a UserError. The records read count
    on the progress line being shown, if any (progress.count)."""
    from .progress import count
    from .traceformat import TraceError, read_trace
    try:
        return read_trace(path, on_records=count)
    except TraceError as e:
        raise UserError(str(e), e.hint) from None
