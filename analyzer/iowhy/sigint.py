"""Imports that a Ctrl-C may interrupt without a traceback (the command's start)."""

from __future__ import annotations

from typing import Callable, TypeVar

# the C module: `signal` builds its enums first, a few milliseconds of the start
import _signal

T = TypeVar("T")


def with_default_sigint(load: Callable[[], T]) -> T:
    """load(), with SIGINT's default action while it runs: a Ctrl-C then ends the process
    by the signal, as a C tool's would (the shell sees it), instead of raising
    KeyboardInterrupt out of some module's import (numpy even turns it into an
    ImportError and a page of advice on broken installs). Python's handler is put back
    after. A SIGINT ignored from the start (nohup, `&` in a script) or a caller's own
    handler is left alone, and so is any off the main thread (only it may set one)."""
    if _signal.getsignal(_signal.SIGINT) is not _signal.default_int_handler:
        return load()
    try:
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    except ValueError:  # not the main thread
        return load()
    try:
        return load()
    finally:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
