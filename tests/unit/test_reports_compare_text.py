"""reports/compare_text.py: the text of `iowhy compare` from the comparison dict: the
answer first, every time row in one unit and every size row in the table's unit, each
line at most 100 columns."""

from __future__ import annotations

from iowhy.reports import compare_text as CT
from iowhy.reports.fmt import WIDTH


def _row(label, unit, a, b, section="time", **more) -> dict:
    d = None if a is None or b is None else b - a
    return {"section": section, "label": label, "unit": unit, "a": a, "b": b, "delta": d,
            "ratio": (b / a) if a and b is not None else None, **more}


def _c(**more) -> dict:
    c = {"a": {"label": "before", "path": "/t/a.iowt", "command": ["tar", "-x"]},
         "b": {"command_short": "tar -x", "path": "/t/b.iowt"},
         "problems": [], "explanations": [], "config_differences": [],
         "rows": [_row("elapsed", "ns", 2_000_000, 3_000_000),
                  _row("cpu", "ns", 1_000_000, 1_000_000, a_pct=50.0, b_pct=None),
                  _row("written", "bytes", 1 << 20, 3 << 19, "requests"),
                  _row("read", "bytes", 2 << 20, 2 << 20, "requests"),
                  _row("data requests", "count", 100, 250, "requests"),
                  _row("seek p50", "sectors", 1000, 523_200, "placement"),
                  _row("sequential", "share", 0.5, 0.25, "placement"),
                  _row("fsyncs per commit", "ratio", 1.0, None, "fsync")]}
    c.update(more)
    return c


def _lines(text: str) -> list[str]:
    lines = text.splitlines()
    assert all(len(x) <= WIDTH for x in lines)
    return lines


def test_cells_by_unit():
    assert CT._cells(_row("t", "ns", 1500, 2500)) == ("t (us)", "1.500", "2.500", "+1.000")
    assert CT._cells(_row("t", "ns", 1500, 500), "ns") == ("t (ns)", "1,500", "500", "-1,000")
    assert CT._cells(_row("w", "bytes", 1 << 20, 3 << 19), bunit=("MiB", 2.0**20)) == \
        ("w (MiB)", "1.000", "1.500", "+0.500")
    assert CT._cells(_row("w", "bytes", 5, 7), bunit=("bytes", 1.0)) == \
        ("w (bytes)", "5", "7", "+2")
    assert CT._cells(_row("s", "share", 0.5, 0.25)) == ("s (%)", "50.0", "25.0", "-25.0")
    assert CT._cells(_row("r", "ratio", 1.0, None)) == ("r", "1.000", "-", "-")
    assert CT._cells(_row("n", "count", 100, 250)) == ("n", "100", "250", "+150")
    assert CT._cells(_row("k", "sectors", 1000, 523_200)) == \
        ("k (sectors)", "1,000", "523.2k", "+522.2k")


def test_the_size_unit_is_the_tables_largest():
    assert CT._byte_unit(_c()) == ("MiB", 2.0**20)
    assert CT._byte_unit({"rows": [_row("w", "bytes", 10, 20)]}) == ("KiB", 2.0**10)
    assert CT._byte_unit({"rows": [_row("w", "bytes", 3 << 30, 0)]}) == ("GiB", 2.0**30)


def test_side_by_side_table():
    lines = _lines(CT.render_side_by_side(_c()))
    assert lines[0].split() == ["SIDE", "BY", "SIDE", "A", "B", "B", "-", "A", "B", "/", "A"]
    assert lines[1] == "  " + CT.SECTION_TITLES["time"]
    el = lines[2].split()
    assert el == ["elapsed", "(us)", "2,000.0", "3,000.0", "+1,000.0", "1.50x"]
    # each run's share of its elapsed ("-": not known); an unchanged figure is "0"
    assert lines[3].split() == ["cpu", "(us)", "1,000.0", "50.0%", "1,000.0", "-", "0", "1.00x"]
    assert lines[5].split() == ["written", "(MiB)", "1.000", "1.500", "+0.500", "1.50x"]
    assert lines[6].split() == ["read", "(MiB)", "2.000", "2.000", "0", "1.00x"]
    # no ratio for sectors and shares
    assert lines[9].split() == ["seek", "p50", "(sectors)", "1,000", "523.2k", "+522.2k"]
    assert any(x.split() == ["fsyncs", "per", "commit", "1.000", "-", "-"] for x in lines)
    assert CT.render_side_by_side(_c(), "ms").splitlines()[2].split()[:4] == \
        ["elapsed", "(ms)", "2.000", "3.000"]


def test_the_answer_comes_first():
    c = _c(problems=["B: lost 3 events"], basis_note={"text": "timed from 3 -> 5,000 ms " * 6},
           explanations=[{"category": "device", "text": "the disk was slower"},
                         {"category": "config", "text": "write cache off in B"}],
           config_differences=["write cache"])
    lines = _lines(CT.render_compare(c))
    assert lines[:3] == ["iowhy compare  A: before", "               B: tar -x",
                         "! B: lost 3 events"]
    w = lines.index("WHAT CHANGED")
    runs = lines.index("RUNS")
    assert w < runs < lines.index(next(x for x in lines if x.startswith("SIDE BY SIDE")))
    body = lines[w:runs]
    assert "  1. the disk was slower" in body and "  configuration differences:" in body
    assert body.index("  configuration differences:") == body.index("  2. write cache off in B") - 1
    # a number stays on the line of its unit, an arrow between its two numbers
    assert not any(x.rstrip().endswith(("->", " 5,000", " 3")) for x in body)
    assert lines[runs + 1] == "  A  /t/a.iowt" and lines[runs + 2] == "     workload tar -x"
    assert "no configuration difference found" in CT.render_explained(_c())


def test_damage_first_once():
    dmg = {"damaged": True, "summary": "trace cut short"}
    c = _c(damage={"b": dmg}, problems=["B: trace cut short", "other"])
    lines = _lines(CT.render_compare(c))
    assert lines[0] == "WARNING: B: trace cut short"
    assert sum("trace cut short" in x for x in lines) == 1 and "! other" in lines
