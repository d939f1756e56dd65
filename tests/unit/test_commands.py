"""iowhy.commands: `report`, `hist`, `compare`, `requests` and `lab` as commands: their
options checked before any trace is read (one line, a hint, the usage exit code), the
outputs they choose between, and the exit codes they promise. What the figures are is
the analysis' tests and the goldens'."""

from __future__ import annotations

import json

import pytest

import tracebuilder as tb
from iowhy import abi, commands
from clirun import one_line, run
from iowhy.errors import EXIT_FAIL, EXIT_USAGE, UserError


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("cmd")
    return tb.write_trace(d / "t.iowt", requests=[
        tb.req(1010, 1030, seq=1, flags=abi.RQ_TRACKED | abi.RQ_ORIGIN, comm=b"star"),
        tb.req(1040, 1090, seq=2, op=abi.OP_READ, sector=9000,
               flags=abi.RQ_TRACKED | abi.RQ_ORIGIN, comm=b"star")],
        offcpu=[tb.off(100, 1012, 1031, rq_seq=1)])


MISSING = "/nonexistent/t.iowt"  # a refusal names the option: nothing was read


@pytest.mark.parametrize("argv,words", [
    (["report", MISSING, "--merge-gap-ms", "nan"], "--merge-gap-ms nan is not a number"),
    (["report", MISSING, "--merge-gap-ms", "-1"], "from 0 to"),
    (["report", MISSING, "--depth-buckets", "0"], "--depth-buckets must be between"),
    (["report", MISSING, "--findings", "-1"], "--findings must be >= 0"),
    (["report", MISSING, "--interval", "0"], "--interval 0.0 is not a number of seconds"),
    (["report", MISSING, "--interval", "inf"], "--interval inf"),
    (["report", MISSING, "--html", "out.txt"], "unsupported file type"),
    (["hist", MISSING, "--json", "--png", "h.png"], "--json and --png are two outputs"),
    (["hist", MISSING, "--png", "h.jpg"], "unsupported file type"),
    (["compare", MISSING, MISSING, "--html", "c.pdf"], "unsupported file type"),
    (["requests", MISSING, "--slower", "-5"], "--slower -5.0 is not a number"),
    (["lab", "run", "no-such-scenario"], "unknown scenario 'no-such-scenario'"),
])
def test_options_are_checked_before_the_trace_is_read(capsys, argv, words):
    rc, out, err = run(capsys, *argv)
    assert rc == EXIT_USAGE and out == ""
    assert words in one_line(err) and "nonexistent" not in err


def test_an_html_output_that_cannot_be_written_is_refused_first(capsys, tmp_path):
    rc, _, err = run(capsys, "report", MISSING, "--html", str(tmp_path / "no" / "r.html"))
    assert rc == EXIT_FAIL and "nonexistent" not in one_line(err)


def test_check_number_bounds_are_inclusive():
    commands._check_number("--x", 0.0, 0, 10, "ms")
    commands._check_number("--x", 10.0, 0, 10, "ms")
    with pytest.raises(UserError) as ei:
        commands._check_number("--x", 10.5, 0, 10, "ms")
    assert ei.value.code == EXIT_USAGE and ei.value.hint == "e.g. --x 10"


def test_report_json_is_public_and_sums(capsys, trace):
    rc, out, _ = run(capsys, "report", trace, "--json")
    r = json.loads(out)
    assert rc == 0 and not [k for k in r if k.startswith("_")]
    tb.assert_sums(r)
    assert r["elapsed_ns"] == 100


def test_public_keeps_no_private_key():
    # what the HTML page draws (`_figures`, `_whatif`) never reaches the JSON
    assert commands._public({"elapsed_ns": 1, "_figures": {}, "_whatif": []}) == \
        {"elapsed_ns": 1}


def test_findings_zero_drops_the_section_but_json_keeps_a_list(capsys, trace):
    rc, out, _ = run(capsys, "report", trace, "--findings", "0", "--json")
    assert rc == 0 and json.loads(out)["findings"] == []
    rc, with_, _ = run(capsys, "report", trace)
    rc2, without, _ = run(capsys, "report", trace, "--findings", "0")
    assert rc == rc2 == 0
    assert "\nFINDINGS\n" in with_ and "FINDINGS" not in without


def test_hist_json_counts_every_value(capsys, trace):
    rc, out, _ = run(capsys, "hist", trace, "--metric", "device", "--json", "--unit", "ns")
    d = json.loads(out)
    assert rc == 0 and d["schema"] == "iowhy-hist/1" and d["unit"] == "ns"
    [g] = d["groups"]
    assert g["count"] == 2 == sum(s["count"] for s in g["slots"])
    assert g["max"] == 50
    # device times 20 and 50 ns: slots [16, 31] and [32, 63]
    assert [(s["low"], s["high"]) for s in g["slots"] if s["count"]] == [(16, 31), (32, 63)]


def test_hist_text_takes_the_short_unit_names(capsys, trace):
    rc, ns, _ = run(capsys, "hist", trace, "--metric", "device", "--unit", "ns")
    rc2, nsecs, _ = run(capsys, "hist", trace, "--metric", "device", "--unit", "nsecs")
    assert rc == rc2 == 0 and ns == nsecs and ns.startswith("device: 2 values")


def test_hist_bad_class_and_no_values(capsys, trace):
    rc, _, err = run(capsys, "hist", trace, "--class", "bogus")
    assert rc == EXIT_USAGE and "unknown class 'bogus'" in one_line(err)
    rc, _, err = run(capsys, "hist", trace, "--metric", "fsync")
    assert rc == EXIT_FAIL and "no values for fsync" in one_line(err)


def test_requests_exit_code_says_whether_any_matched(capsys, trace):
    rc, out, _ = run(capsys, "requests", trace, "--csv")
    assert rc == 0 and len(out.strip().splitlines()) == 3  # a header and two requests
    rc, out, _ = run(capsys, "requests", trace, "--class", "read", "--json")
    assert rc == 0 and len(json.loads(out)["requests"]) == 1
    rc, out, _ = run(capsys, "requests", trace, "--slower", "1000")
    assert rc == EXIT_FAIL
    rc, _, err = run(capsys, "requests", trace, "--class", "bogus")
    assert rc == EXIT_USAGE and "unknown class" in one_line(err)


def test_compare_a_trace_with_itself(capsys, trace):
    rc, out, _ = run(capsys, "compare", trace, trace, "--json")
    d = json.loads(out)
    assert rc == 0 and "damage" not in d


def test_compare_refuses_a_trace_that_covers_no_time(capsys, tmp_path, trace):
    empty = tb.write_trace(tmp_path / "e.iowt", start=1000, end=1000)
    rc, _, err = run(capsys, "compare", trace, empty)
    assert rc == EXIT_FAIL and "covers no time" in one_line(err)


def test_lab_without_an_action_prints_its_help(capsys):
    rc, out, err = run(capsys, "lab")
    assert rc == EXIT_USAGE and "usage:" in err and out == ""


def test_lab_list(capsys):
    from iowhy.lab.scenarios import SCENARIOS
    rc, out, _ = run(capsys, "lab", "list")
    names = {line.split()[0] for line in out.splitlines() if line and not line[0].isspace()}
    assert rc == 0 and set(SCENARIOS) <= names
