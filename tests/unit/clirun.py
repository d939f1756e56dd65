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


class Parsed:
    """A workload script's main() that only parses: its workload functions `names` of
    `module` replaced (monkeypatch) by ones that note (name, arguments) and return 0."""

    def __init__(self, monkeypatch, module, names) -> None:
        self.module, self.got = module, []
        for name in names:
            monkeypatch.setattr(module, name,
                                lambda a, name=name: self.got.append((name, a)) or 0)

    def __call__(self, argv: list[str]) -> tuple[str, dict]:
        """The workload argv runs and its arguments (without `func`)."""
        assert self.module.main(argv) == 0
        name, a = self.got.pop()
        d = vars(a)
        d.pop("func")
        return name, d
