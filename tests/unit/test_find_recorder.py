"""Where `iowhy record` finds the recorder, and the one line it prints when there is
none (an analyzer installed with `pip install .` alone)."""

from __future__ import annotations

import sys

import pytest

from iowhy import cli


@pytest.fixture
def nowhere(tmp_path, monkeypatch):
    """No recorder in $IOWHY_RECORDER, the prefix's libexec or next to the package."""
    monkeypatch.delenv("IOWHY_RECORDER", raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    monkeypatch.setattr(cli, "__file__", str(tmp_path / "site" / "iowhy" / "cli.py"))
    return tmp_path


def test_no_recorder_is_one_line_with_the_way_to_get_it(nowhere, capsys, monkeypatch):
    with pytest.raises(cli.UserError) as e:
        cli.find_recorder()
    assert str(e.value) == "the recorder iowhy-record is not installed"
    assert "make install" in e.value.hint
    monkeypatch.setattr(cli, "check_privileges", lambda: None)
    assert cli.main(["record", "-o", str(nowhere / "t.iowt"), "--", "true"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "iowhy: the recorder iowhy-record is not installed (run `make install` from the "
        "iowhy source")


def test_recorder_from_env_then_prefix(nowhere, monkeypatch):
    lib = nowhere / "prefix" / "libexec" / "iowhy"
    lib.mkdir(parents=True)
    (lib / "iowhy-record").write_text("#!/bin/sh\n")
    with pytest.raises(cli.UserError):  # not executable: not a recorder
        cli.find_recorder()
    (lib / "iowhy-record").chmod(0o755)
    assert cli.find_recorder() == str(lib / "iowhy-record")
    mine = nowhere / "mine"
    mine.write_text("#!/bin/sh\n")
    mine.chmod(0o755)
    monkeypatch.setenv("IOWHY_RECORDER", str(mine))  # what the installed launcher sets
    assert cli.find_recorder() == str(mine)
