"""`iowhy query` over three synthetic runs: two trace files and one export directory."""

from __future__ import annotations

import contextlib
import csv
import io
import json

import pytest

from iowhy.analysis import analyze
from iowhy.cli import main
from iowhy.traceformat import read_trace
from synth_runs import synth_run

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")


@pytest.fixture
def three_runs(tmp_path):
    a = synth_run(tmp_path / "a.iowt", seed=1, host="hostA", kernel="6.1.0")
    b = synth_run(tmp_path / "b.iowt", seed=2, host="hostB", kernel="6.18.0", n_fsync=25)
    c = synth_run(tmp_path / "c.iowt", seed=3, host="hostB", kernel="6.18.0", flush_scale=30,
                  fstype="xfs")
    cdir = tmp_path / "c.export"
    assert main(["export", c.path, "--format", "parquet", "-o", str(cdir)]) == 0
    return (a, b, c), [a.path, b.path, str(cdir)]


def query(capsys, sql, runs, *flags):
    capsys.readouterr()
    rc = main(["query", sql, *runs, *flags])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out


def query_json(capsys, sql, runs):
    return json.loads(query(capsys, sql, runs, "--json"))


def test_counts_over_three_runs(capsys, three_runs):
    synth, runs = three_runs
    rows = query_json(capsys, "SELECT r.command, count(*) AS n, "
                      "count(*) FILTER (WHERE class = 'flush') AS flushes "
                      "FROM requests JOIN runs r USING (run_uuid) GROUP BY 1 ORDER BY 1", runs)
    want = sorted((f"dbbench --seed={i + 1}", len(s.requests),
                   sum(1 for q in s.requests if q["op"] == 2)) for i, s in enumerate(synth))
    assert [(r["command"], r["n"], r["flushes"]) for r in rows] == want
    for view, attr in (("calls", "fsyncs"), ("offcpu", "offcpu"), ("journal", "journal"),
                       ("tasks", "tasks")):
        n = query_json(capsys, f"SELECT count(*) AS n FROM {view}", runs)[0]["n"]
        assert n == sum(len(getattr(s, attr)) for s in synth), view
    assert query_json(capsys, "SELECT count(*) AS n FROM runs", runs)[0]["n"] == 3


def test_flush_latency_per_host_and_kernel(capsys, three_runs):
    synth, runs = three_runs
    rows = query_json(capsys, "SELECT host, kernel, count(*) AS n, max(device_ns) AS max_ns, "
                      "sum(device_ns) AS sum_ns FROM requests JOIN runs USING (run_uuid) "
                      "WHERE class = 'flush' GROUP BY ALL ORDER BY ALL", runs)
    want: dict = {}
    for s in synth:
        lat = [q["done_ns"] - q["issue_ns"] for q in s.requests if q["op"] == 2]
        n, m, t = want.get((s.host, s.kernel), (0, 0, 0))
        want[(s.host, s.kernel)] = (n + len(lat), max([m] + lat), t + sum(lat))
    assert {(r["host"], r["kernel"]): (r["n"], r["max_ns"], r["sum_ns"]) for r in rows} == want
    # The documented p99 query runs and gives one row per host and kernel.
    out = query(capsys, "SELECT host, kernel, quantile_disc(device_ns, 0.99) AS p99_flush_ns "
                "FROM requests JOIN runs USING (run_uuid) WHERE class = 'flush' "
                "GROUP BY ALL ORDER BY ALL", runs)
    lines = out.splitlines()
    assert lines[0].split() == ["host", "kernel", "p99_flush_ns"]
    assert lines[-1] == "(2 rows)" and len(lines) == 5


def test_runs_over_three_quarters_in_log(capsys, three_runs):
    synth, runs = three_runs
    shares = {}
    for s in synth:
        r = analyze(read_trace(s.path))
        shares[s.command] = r["attribution_ns"]["log"] / r["elapsed_ns"]
    out = query(capsys, "SELECT command, log_ns / elapsed_ns AS share FROM runs "
                "WHERE log_ns > 0.75 * elapsed_ns ORDER BY command", runs, "--csv")
    got = list(csv.DictReader(io.StringIO(out)))
    want = sorted(k for k, v in shares.items() if v > 0.75)
    assert want and [g["command"] for g in got] == want
    assert len(want) < 3  # the query selects: not every run is over 3/4 in log


def test_fsyncs_per_commit_by_filesystem(capsys, three_runs):
    synth, runs = three_runs
    rows = query_json(capsys, "SELECT fs, count(*) AS calls, count(DISTINCT (run_uuid, "
                      "commit_seq)) AS commits FROM calls GROUP BY fs ORDER BY fs", runs)
    by_fs: dict = {}
    for s, fs in zip(synth, ("ext4", "ext4", "xfs")):
        n, c = by_fs.get(fs, (0, set()))
        by_fs[fs] = (n + len(s.fsyncs), c | {(s.path, f["commit_seq"]) for f in s.fsyncs})
    assert [(r["fs"], r["calls"], r["commits"]) for r in rows] == \
        [(k, n, len(c)) for k, (n, c) in sorted(by_fs.items())]


def test_same_run_twice_counts_once(capsys, caplog, three_runs):
    synth, runs = three_runs
    rows = query_json(capsys, "SELECT count(*) AS n FROM requests",
                      [synth[2].path, runs[2]])
    assert rows[0]["n"] == len(synth[2].requests)
    assert any("same run" in r.getMessage() for r in caplog.records)


def test_query_cannot_reach_other_files(capsys, three_runs, tmp_path):
    _, runs = three_runs
    capsys.readouterr()
    for sql in ("SELECT * FROM read_csv('/etc/passwd')",
                f"COPY (SELECT 1) TO '{tmp_path / 'x.csv'}'",
                "SET enable_external_access = true"):
        assert main(["query", sql, *runs]) == 1
        err = capsys.readouterr().err
        assert err.startswith("iowhy: query failed:") and err.count("\n") == 1
    assert not (tmp_path / "x.csv").exists()


def test_bad_runs_and_sql_are_one_line(capsys, three_runs, tmp_path):
    _, runs = three_runs
    capsys.readouterr()
    (tmp_path / "empty").mkdir()
    for argv in (["SELECT 1", str(tmp_path / "empty")],
                 ["SELECT nope FROM requests", *runs],
                 ["SELECT 1", str(tmp_path / "missing.iowt")]):
        assert main(["query", *argv]) != 0
        err = capsys.readouterr().err
        assert err.startswith("iowhy: ") and err.count("\n") == 1, err


def test_documented_nearest_rank_is_the_reports_p99(capsys, three_runs):
    synth, runs = three_runs
    for s in synth:
        r = analyze(read_trace(s.path))
        rows = query_json(capsys, "SELECT class, list_sort(list(device_ns))[greatest(1, "
                          "ceil(0.99 * count(device_ns))::INT)] AS p99 FROM requests "
                          "GROUP BY class", [s.path])
        got = {x["class"]: x["p99"] for x in rows}
        for cls, figs in r["requests"].items():
            if figs["count"]:
                assert got[cls] == figs["device_ns"]["p99"], cls


def test_export_tree_reads_with_a_glob(tmp_path, three_runs):
    """The docs' read of many export directories at once, outside iowhy."""
    import duckdb
    synth, _ = three_runs
    (tmp_path / "runs").mkdir()
    for i, s in enumerate(synth):
        out = tmp_path / "runs" / str(i)
        assert main(["export", s.path, "--format", "parquet", "-o", str(out)]) == 0
    glob = str(tmp_path / "runs" / "*")
    con = duckdb.connect()
    (n,) = con.execute(f"SELECT count(*) FROM read_parquet('{glob}/requests.parquet') "
                       f"JOIN read_parquet('{glob}/runs.parquet') USING (run_uuid)").fetchall()
    assert n[0] == sum(len(s.requests) for s in synth)


def test_level_two_reproduces_the_report(capsys, three_runs):
    """SQL over the attribution table gives each run's level one (the runs' columns) and
    what served it, as the report does."""
    synth, runs = three_runs
    rows = query_json(capsys, "SELECT r.command, a.category, sum(a.ns) AS ns "
                      "FROM attribution a JOIN runs r USING (run_uuid) "
                      "WHERE a.basis = 'elapsed' GROUP BY 1, 2 ORDER BY 1, 2", runs)
    for s in synth:
        r = analyze(read_trace(s.path))
        got = {x["category"]: x["ns"] for x in rows if x["command"] == s.command}
        assert got == {k: v for k, v in r["attribution_ns"].items() if v}, s.command
    flush = query_json(capsys, "SELECT sum(ns) AS ns FROM attribution WHERE basis = "
                       "'elapsed' AND category = 'log' AND served_by = 'flush'", runs)
    want = sum(analyze(read_trace(s.path))["attribution_detail_ns"]["log"].get("flush", 0)
               for s in synth)
    assert flush[0]["ns"] == want > 0


def test_empty_and_comment_only_queries_are_one_line(capsys, three_runs):
    _, runs = three_runs
    capsys.readouterr()
    for sql in ("", "   ", "-- only a comment", "/* nothing */"):
        assert main(["query", sql, runs[0]]) == 1, sql
        err = capsys.readouterr().err
        assert err.startswith("iowhy: the query ") and err.count("\n") == 1, (sql, err)


def test_directories_named_like_patterns_are_read_as_named(capsys, three_runs, tmp_path):
    """A directory's name is a name: `run*`, `r?n` and `[a]` are not patterns (DuckDB's
    read_parquet would expand them, and then be refused the files it found)."""
    synth, runs = three_runs
    import shutil
    # what each name would match as a pattern: another export
    (tmp_path / "q").mkdir()
    for other in ("run1", "ran", "a"):
        assert main(["export", synth[0].path, "--format", "parquet", "-o",
                     str(tmp_path / "q" / other)]) == 0
    for name in ("run*", "r?n", "[a]", "it's"):
        d = tmp_path / "q" / name
        shutil.copytree(runs[2], d)
        rows = query_json(capsys, "SELECT count(*) AS n FROM requests", [str(d)])
        assert rows == [{"n": len(synth[2].requests)}], name


def test_results_stream_and_a_terminal_gets_a_limit(capsys, three_runs, monkeypatch,
                                                    tmp_path):
    import iowhy.export.query as q
    _, runs = three_runs
    monkeypatch.setattr(q, "BATCH", 100)
    sql = "SELECT i, 'x' || i AS s FROM range(2500) t(i)"
    writes = []

    class Out(io.StringIO):
        tty = False

        def write(self, s):
            writes.append(len(s))
            return super().write(s)

        def isatty(self):
            return self.tty
    for flag in ("--csv", "--json", None):
        out = Out()
        writes.clear()
        with contextlib.redirect_stdout(out):
            assert main(["query", sql, runs[0], *([flag] if flag else [])]) == 0
        text = out.getvalue()
        assert max(writes) < len(text) / 10, flag  # written as the rows come
        if flag == "--json":
            assert [r["i"] for r in json.loads(text)] == list(range(2500))
        elif flag == "--csv":
            assert len(list(csv.reader(io.StringIO(text)))) == 2501
        else:
            assert text.splitlines()[-1] == "(2500 rows)"
    capsys.readouterr()
    out = Out()
    out.tty = True
    with contextlib.redirect_stdout(out):
        assert main(["query", sql, runs[0]]) == 0
    assert out.getvalue().splitlines()[-1] == "(1000 rows)"
    assert "first 1,000 rows; more were left" in capsys.readouterr().err
    with contextlib.redirect_stdout(out):
        assert main(["query", sql, runs[0], "--limit", "0"]) == 0
    assert out.getvalue().splitlines()[-1] == "(2500 rows)"
    # to a file: complete or not at all
    f = tmp_path / "r.csv"
    assert main(["query", sql, runs[0], "--csv", "-o", str(f)]) == 0
    assert len(f.read_text().splitlines()) == 2501 and (f.stat().st_mode & 0o777) == 0o600
    assert main(["query", "SELECT 1/0::INT AS x, error('boom')", runs[0], "--csv", "-o",
                 str(tmp_path / "bad.csv")]) == 1
    assert not (tmp_path / "bad.csv").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


VALUES = ("SELECT 1234567.891::DOUBLE AS x, 0.1::DOUBLE + 0.2::DOUBLE AS y, "
          "'two' || chr(10) || 'lines' || chr(27) AS s, ['p', 'q,r'] AS l, NULL AS n "
          "FROM runs")


def test_csv_floats_round_trip_and_control_characters_are_escaped(tmp_path, capsys):
    s = synth_run(tmp_path / "r.iowt", n_fsync=2, n_reads=0)
    out = query(capsys, VALUES, [s.path], "--csv")
    assert out.count("\n") == 2  # a header and one row: no newline inside a field
    (row,) = list(csv.DictReader(io.StringIO(out)))
    assert float(row["x"]) == 1234567.891 and float(row["y"]) == 0.1 + 0.2
    assert row["y"] == repr(0.1 + 0.2)
    assert row["s"] == "two\\x0alines\\x1b"
    assert json.loads(row["l"]) == ["p", "q,r"] and row["n"] == ""


def test_table_keeps_a_row_on_one_line(tmp_path, capsys):
    s = synth_run(tmp_path / "r.iowt", n_fsync=2, n_reads=0)
    lines = query(capsys, VALUES, [s.path]).splitlines()
    assert len(lines) == 4 and lines[-1] == "(1 row)"
    assert "1234567.891" in lines[2] and "two^Jlines^[" in lines[2]
    assert '["p", "q,r"]' in lines[2]


def test_export_and_query_say_the_kernels_losses_first(capsys, tmp_path):
    # Nothing lost silently: the outputs that are a file or a table print what the
    # kernel lost on their first stderr line, as report does on its first lines.
    from tracebuilder import busy_trace
    p = busy_trace(tmp_path, n=200, counters={"lost_ringbuf_request": 12, "lost_rqmap_full": 1})
    capsys.readouterr()
    assert main(["export", p, "--format", "parquet", "-o", str(tmp_path / "x")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("! 13 events lost in the kernel (12 ringbuf request")
    assert err[-1].startswith(f"wrote {tmp_path / 'x'}")
    assert main(["query", "SELECT count(*) AS n FROM requests", p, "--json"]) == 0
    out = capsys.readouterr()
    first = " ".join(x[2:] for x in out.err.splitlines())  # wrapped at the width: "! ", "  "
    assert out.err.startswith("! ") and first.startswith(f"{p}: 13 events lost in the kernel")
    assert json.loads(out.out)[0]["n"] > 0


def test_a_trace_reads_as_its_export(capsys, three_runs, tmp_path):
    """A trace's tables held for a query keep their strings dictionary-encoded (a byte
    or two a row, not the string's: the run id alone is 36 bytes): every view reads
    the same, rows and column types, as the export of that trace."""
    from iowhy.export.tables import run_tables
    synth, _ = three_runs
    a = synth[0].path
    adir = tmp_path / "a.export"
    assert main(["export", a, "--format", "parquet", "-o", str(adir)]) == 0
    held = run_tables(read_trace(a), in_memory=True)
    assert "dictionary" in str(held["requests"].schema.field("run_uuid").type)
    assert "dictionary" in str(held["requests"].schema.field("class").type)
    for view in ("runs", "requests", "calls", "offcpu", "journal", "tasks", "attribution"):
        sql = f"SELECT * FROM {view} ORDER BY ALL"
        assert query(capsys, sql, [a], "--csv") == query(capsys, sql, [str(adir)], "--csv"), view
        types = f"SELECT column_name, column_type FROM (DESCRIBE {view})"
        assert query(capsys, types, [a]) == query(capsys, types, [str(adir)]), view
