"""whatif/cli.py: `iowhy whatif`'s options and its refusals before any replay: each a
usage error (exit 2) or a failure (exit 1) in one line with a hint."""

from __future__ import annotations

import argparse

import pytest

import tracebuilder as tb
from iowhy.cli import main
from iowhy.whatif.cli import DISKS, add_whatif_parser


def _parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_whatif_parser(p.add_subparsers())
    return p.parse_args(["whatif", *argv])


def test_the_options():
    a = _parse("t.iowt")
    assert (a.trace, a.nobarrier, a.write_cache, a.disk, a.json, a.fit, a.output) == \
        ("t.iowt", False, None, None, False, False, None)
    a = _parse("t.iowt", "--nobarrier", "--write-cache", "off", "--disk", "ssd", "--json")
    assert (a.nobarrier, a.write_cache, a.disk, a.json) == (True, "off", "ssd", True)
    with pytest.raises(SystemExit):
        _parse("t.iowt", "--write-cache", "maybe")
    assert DISKS == ("hdd-7200", "ssd", "ram")


@pytest.mark.parametrize("args, code, words", [
    (("--fit",), 2, "--fit needs -o"),
    (("--fit", "--disk", "ssd", "-o", "p.json"), 2, "--fit takes no scenario"),
    (("-o", "p.json"), 2, "-o is for --fit only"),
    (("--disk", "floppy"), 2, "unknown disk 'floppy'"),
    (("--disk", "missing.json"), 1, "cannot read"),
])
def test_refusals_are_one_line(tmp_path, capsys, monkeypatch, args, code, words):
    monkeypatch.chdir(tmp_path)
    trace = tb.write_trace(tmp_path / "t.iowt")
    assert main(["whatif", trace, *args]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("iowhy: ") and words in err[0], err
    assert "(" in err[0]  # a hint


def test_a_missing_trace_is_one_line(tmp_path, capsys):
    assert main(["whatif", str(tmp_path / "none.iowt")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "none.iowt" in err[0]
