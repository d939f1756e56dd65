"""The `iowhy` command (`python -m iowhy`; the venv's script and `make install`'s launcher
both start here)."""

import sys

# the C module: `signal` builds its enums first, a few milliseconds of the window below
import _signal


def run() -> int:
    """cli.main, started so that a Ctrl-C at any moment ends it without a traceback.

    The imports before main() take tens of milliseconds, and a SIGINT there would raise
    KeyboardInterrupt out of some module's import. While they run, SIGINT has its default
    action (the process ends by the signal, as a C tool would, and the shell sees that);
    main() then handles it as every command does (exit status 130, no traceback). A
    SIGINT ignored from the start stays ignored."""
    pythons_handler = _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler
    if pythons_handler:  # else ignored from the start (nohup, `&` in a script): it stays
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    from .cli import main
    if pythons_handler:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    return main()


if __name__ == "__main__":
    sys.exit(run())
