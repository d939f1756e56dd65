"""The `iowhy` command (`python -m iowhy`; the venv's script and `make install`'s launcher
both start here)."""

import sys
from types import ModuleType

from .sigint import with_default_sigint


def _cli() -> ModuleType:
    from . import cli
    return cli


def run() -> int:
    """cli.main, started so that a Ctrl-C at any moment ends it without a traceback: the
    imports before it (tens of milliseconds) run with SIGINT's default action
    (sigint.py); main() then handles it as every command does (exit status 130)."""
    return int(with_default_sigint(_cli).main())


if __name__ == "__main__":
    sys.exit(run())
