"""What the commands share: the error a user can fix, exit codes, and opening a trace
(kept free of numpy, like names.py: `iowhy record` imports it for the whole run)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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


# `--decode-ratio` of the command being run (cli.main sets it; None: the reader's default).
DECODE_RATIO: int | None = None
DEFAULT_DECODE_RATIO = 64  # traceformat.ZSTD_BUDGET_RATIO, kept here free of numpy


def add_decode_ratio(p: Any) -> None:
    """The option of every command that reads traces."""
    p.add_argument("--decode-ratio", type=int, metavar="N",
                   help="decode at most N bytes of records per byte of the trace file (plus "
                        "1 MiB): what a file may claim is bounded by its size (recorded "
                        "traces decode to 10-16 times theirs); the chunks past it are "
                        "skipped and counted on the first line "
                        f"(default: {DEFAULT_DECODE_RATIO})")


def set_decode_ratio(n: int | None) -> None:
    """Take --decode-ratio (None: the default); a value out of range is a usage error."""
    global DECODE_RATIO
    if n is not None and not 1 <= n <= 1 << 20:
        raise UserError(f"--decode-ratio {n} is out of range", "give N from 1 to 1048576",
                        EXIT_USAGE)
    DECODE_RATIO = n


def load(path: str) -> Trace:
    """Open a trace; a trace that cannot be read is a UserError. The records read count
    on the progress line being shown, if any (progress.count)."""
    from .progress import count
    from .traceformat import TraceError, read_trace
    try:
        return read_trace(path, on_records=count, decode_ratio=DECODE_RATIO)
    except TraceError as e:
        raise UserError(str(e), e.hint) from None
