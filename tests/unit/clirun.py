"""`iowhy` run in-process for the unit tier's command tests: its exit status and output,
and the one line a refused input gets."""

from __future__ import annotations

from iowhy import cli


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """cli.main(argv): (exit status, stdout, stderr), captured by pytest's capsys."""
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def one_line(err: str) -> str:
    """The single `iowhy: ...` line on stderr (no traceback)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("iowhy: ") and "Traceback" not in err, err
    return lines[0]
