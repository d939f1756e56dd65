"""iowhy.export.cli: `iowhy export`, `query` and `import` as commands. Bad input is one
line with a hint and the exit code, never a traceback, and an output that cannot be
written is refused before any trace is read. What each format holds is the format's own
test (test_export_parquet.py, test_export_perfetto.py, test_export_query.py, the
importers')."""

from __future__ import annotations

import json
import os

import pytest

import tracebuilder as tb
from iowhy import abi
from clirun import one_line, run
from iowhy.errors import EXIT_FAIL, EXIT_USAGE


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> str:
    return tb.write_trace(tmp_path_factory.mktemp("cli") / "t.iowt",
                          requests=[tb.req(1010, 1050, seq=1, comm=b"star",
                                           flags=abi.RQ_TRACKED | abi.RQ_ORIGIN)])


def test_dataset_is_for_parquet_only(capsys, tmp_path, trace):
    rc, _, err = run(capsys, "export", trace, "--format", "perfetto", "--dataset",
                     str(tmp_path))
    assert rc == EXIT_USAGE
    assert "--dataset is for --format parquet" in one_line(err) and "-o FILE" in err


@pytest.mark.parametrize("fmt,out", [("parquet", "no/such/dir/pq"),
                                     ("chrome-json", "no/such/dir/t.json")])
def test_an_unwritable_output_is_refused_before_the_trace_is_read(capsys, tmp_path, fmt, out):
    # the trace does not even exist: the output is what is refused
    rc, _, err = run(capsys, "export", str(tmp_path / "missing.iowt"), "--format", fmt,
                     "-o", str(tmp_path / out))
    assert rc == EXIT_FAIL
    line = one_line(err)
    assert "missing.iowt" not in line and "no/such/dir" in line


def test_parquet_output_must_be_a_directory(capsys, tmp_path):
    f = tmp_path / "afile"
    f.write_bytes(b"")
    rc, _, err = run(capsys, "export", str(tmp_path / "missing.iowt"), "--format", "parquet",
                     "-o", str(f))
    assert rc == EXIT_FAIL and "it is not a directory" in one_line(err)


def test_a_missing_trace_is_one_line(capsys, tmp_path):
    rc, _, err = run(capsys, "export", str(tmp_path / "missing.iowt"), "--format",
                     "chrome-json", "-o", str(tmp_path / "t.json"))
    assert rc == EXIT_FAIL and "missing.iowt" in one_line(err)
    assert not (tmp_path / "t.json").exists()


def test_export_chrome_json_says_what_it_wrote(capsys, tmp_path, trace):
    out = tmp_path / "t.json"
    rc, stdout, err = run(capsys, "export", trace, "--format", "chrome-json", "-o", str(out))
    assert rc == 0 and stdout == ""
    assert err.strip().splitlines()[-1].startswith(f"wrote {out}: ")
    assert json.loads(out.read_text())["traceEvents"]


def test_export_warns_of_what_was_lost_first(capsys, tmp_path):
    cut = tb.write_trace(tmp_path / "cut.iowt", trailer=False)  # a recorder killed
    out = tmp_path / "t.json"
    rc, _, err = run(capsys, "export", cut, "--format", "chrome-json", "-o", str(out))
    lines = err.strip().splitlines()
    assert rc == 0 and len(lines) >= 2 and lines[-1].startswith(f"wrote {out}")
    assert any("truncated" in x for x in lines[:-1]), err


def test_query_limit_must_be_a_number_of_rows(capsys, trace):
    rc, _, err = run(capsys, "query", "SELECT 1", trace, "--limit", "-1")
    assert rc == EXIT_USAGE and "--limit -1" in one_line(err) and "N >= 0" in err


def test_query_output_refused_before_reading(capsys, tmp_path):
    d = tmp_path / "adir"
    d.mkdir()
    rc, _, err = run(capsys, "query", "SELECT 1", str(tmp_path / "missing.iowt"), "-o", str(d))
    assert rc == EXIT_FAIL and "missing.iowt" not in one_line(err)


def test_query_bad_sql_is_one_line(capsys, trace):
    pytest.importorskip("duckdb")
    rc, _, err = run(capsys, "query", "SELEC nonsense", trace)
    assert rc == EXIT_FAIL and one_line(err)


def test_query_csv_and_limit(capsys, tmp_path, trace):
    pytest.importorskip("duckdb")
    rc, out, err = run(capsys, "query", "SELECT seq, submitter_comm FROM requests", trace,
                       "--csv")
    assert rc == 0 and out.splitlines() == ["seq,submitter_comm", "1,star"]
    rc, out, err = run(capsys, "query", "SELECT * FROM range(5) t(x)", trace, "--csv",
                       "--limit", "2")
    assert out.splitlines() == ["x", "0", "1"]
    assert "showing the first 2 rows" in err
    f = tmp_path / "q.json"
    rc, out, err = run(capsys, "query", "SELECT 7 AS n", trace, "--json", "-o", str(f))
    assert rc == 0 and out == "" and json.loads(f.read_text()) == [{"n": 7}]
    assert err.strip().endswith(f"wrote {f}: 1 rows")


def test_import_errors_are_one_line(capsys, tmp_path):
    rc, _, err = run(capsys, "import", "ftrace", str(tmp_path / "missing.txt"), "-o",
                     str(tmp_path / "t.iowt"))
    assert rc == EXIT_FAIL and "cannot read" in one_line(err)
    assert not os.path.exists(tmp_path / "t.iowt")
    rc, _, err = run(capsys, "import", "blktrace", str(tmp_path / "missing"), "-o",
                     str(tmp_path))  # a directory
    assert rc == EXIT_FAIL and one_line(err)


def test_import_replaces_a_symlink_at_the_output(capsys, tmp_path):
    cap = tmp_path / "cap.txt"
    cap.write_text("  dd-100 [000] .... 1.000000: block_rq_issue: 8,0 W 4096 () 1000 + 8 [dd]\n"
                   "  dd-100 [000] .... 1.000100: block_rq_complete: 8,0 W () 1000 + 8 [0]\n")
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    out = tmp_path / "t.iowt"
    os.symlink(victim, out)
    rc, _, err = run(capsys, "import", "ftrace", str(cap), "-o", str(out))
    assert rc == 0 and err.strip().splitlines()[-1].startswith(f"wrote {out}: 1 requests")
    assert victim.read_bytes() == b"keep" and not os.path.islink(out)


@pytest.mark.parametrize("argv,pkg", [(["export", "T", "--format", "parquet", "-o", "pq"],
                                       "pyarrow"),
                                      (["query", "SELECT 1", "T"], "duckdb")])
def test_a_missing_package_is_said_before_the_trace_is_read(capsys, tmp_path, monkeypatch,
                                                            argv, pkg):
    """pyarrow and DuckDB are imported after the analysis (their libraries would add to
    its peak), but a machine without them learns it at once: the trace (T) does not
    exist, and the package is what is said."""
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == pkg else real(name, *a))
    monkeypatch.chdir(tmp_path)
    rc, _, err = run(capsys, *[str(tmp_path / "missing.iowt") if x == "T" else x
                               for x in argv])
    assert rc != 0
    assert f"this needs the Python package {pkg}" in one_line(err), err
    assert f"pip install {pkg}" in err
