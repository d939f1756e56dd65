"""The issue's feedback items: slow steps say what they wrote and what it took, an
empty histogram fails, `--findings 0` prints no findings, `lab list` has a header and
fits 100 columns. No root needed."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest

from test_outfile import busy_trace, one_line_error, small_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> str:
    return busy_trace(tmp_path_factory.mktemp("trace"))


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> str:
    return small_trace(tmp_path_factory.mktemp("small"))


@pytest.mark.parametrize("args", [
    ["report", "{t}", "--html", "{o}.html"],
    ["compare", "{t}", "{t}", "--html", "{o}.html"],
    ["hist", "{t}", "--png", "{o}.png"],
])
def test_slow_steps_say_what_they_wrote(small, tmp_path, capsys, args):
    from iowhy.cli import main
    o = tmp_path / "out"
    rc = main([a.format(t=small, o=o) for a in args])
    err = capsys.readouterr().err
    assert rc == 0, err
    out = Path(args[-1].format(o=o))
    assert re.fullmatch(rf"wrote {re.escape(str(out))} \(\d+\.\d s\)\n", err), err
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert out.stat().st_size > 1000


def test_hist_without_values_fails(trace, capsys):
    from iowhy.cli import main
    assert main(["hist", trace, "--metric", "commit", "--class", "xfs"]) == 1
    one_line_error(capsys.readouterr().err, "iowhy: no values for commit of xfs in ")
    assert main(["hist", trace, "--metric", "fsync"]) == 0
    assert "fsync: " in capsys.readouterr().out


def test_findings_0_prints_no_findings(trace, capsys, tmp_path):
    from iowhy.cli import main
    assert main(["report", trace]) == 0
    assert "FINDINGS" in capsys.readouterr().out
    assert main(["report", trace, "--findings", "0"]) == 0
    text = capsys.readouterr().out
    assert "FINDINGS" not in text and "nothing stands out" not in text
    assert not text.endswith("\n\n")
    assert main(["report", trace, "--findings", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []
    page = tmp_path / "r.html"
    assert main(["report", trace, "--findings", "0", "--html", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert "Nothing stands out" not in html and "--findings 0" in html


def test_lab_list_fits_100_columns_with_a_header(capsys):
    from iowhy.cli import main
    from iowhy.lab.scenarios import SCENARIOS
    assert main(["lab", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["SCENARIO", "FILESYSTEMS", "CACHE", "WHAT"]
    assert max(len(x) for x in lines) <= 100
    names = [x.split()[0] for x in lines[1:] if not x.startswith(" ")]
    assert names == list(SCENARIOS)        # name first, each once
