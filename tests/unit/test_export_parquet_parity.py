"""The Parquet export reproduces the report through SQL, and every file has the schema
docs/parquet-schema.md gives (generated from export/schema.py).

The traces are golden ones (tests/unit/golden_traces.py): a loop device over a disk that
carries its I/O (causal_stack: requests counted once per stack), a causal mix, a busy
disk, lost completions, and a blktrace import of a synthetic run (no attribution). DuckDB
runs the SQL docs/export.md gives over the exported files; its answers must equal the
analysis' figures exactly."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest

import golden_traces as gt
import tracebuilder as tb
from iowhy import abi
from iowhy.analysis import AnalysisConfig, analyze
from iowhy.cli import main
from iowhy.export import schema
from iowhy.traceformat import read_trace
from synth_runs import synth_run
from test_device_scope import zram_trace
from test_importers_blktrace import capture_of

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")

REPO = Path(__file__).resolve().parents[2]
GOLDEN = ("causal_stack", "causal_mix", "busy", "lost_completion", "fsync_ext4")


def export(trace: Path, out: Path) -> Path:
    assert main(["export", str(trace), "--format", "parquet", "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """name -> (trace, export directory) of the golden traces and a blktrace import."""
    d = tmp_path_factory.mktemp("parity")
    out = {name: (p, export(p, d / f"pq-{name}")) for name, p in gt.build(d, GOLDEN).items()}
    s = synth_run(d / "orig.iowt", seed=14, n_fsync=10, n_reads=5)
    imported = d / "blk.iowt"
    assert main(["import", "blktrace", *capture_of(s).files(d), "-o", str(imported)]) == 0
    out["blktrace"] = (imported, export(imported, d / "pq-blktrace"))
    for name, build in (("set_apart", set_apart_trace), ("zram", zram_trace)):
        p = Path(build(d / f"{name}.iowt"))
        out[name] = (p, export(p, d / f"pq-{name}"))
    return out


def set_apart_trace(path: Path) -> str:
    """The workload waits on a write to sdz; sdy holds another process's two writes,
    which no wait names: the analysis sets sdy apart (background)."""
    m = tb.meta()
    m["devices"].append({"name": "sdy", "major": 8, "minor": 16, "size_bytes": 1 << 30})
    reqs = [tb.req(1010, 1020, sector=50_000, seq=1, flags=0),
            tb.req(1030, 1040, sector=50_000, seq=2, flags=0, dev=(8, 16), tid=999),
            tb.req(1050, 1060, sector=60_000, seq=3, flags=0, dev=(8, 16), tid=999)]
    return tb.write_trace(path, requests=reqs, meta_obj=m,
                          offcpu=[tb.off(100, 1010, 1020, waker=0, ctx=abi.WCTX_HARDIRQ,
                                         rq_seq=1, syscall=1)])


@functools.lru_cache(maxsize=None)
def _connection(directory: Path) -> Any:
    """A DuckDB connection with a view per table of one export directory (each directory
    is written once, before its first query: the views are made once)."""
    con = duckdb.connect()
    for t in schema.TABLE_NAMES:
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{directory}/{t}.parquet')")
    return con


def sql(directory: Path, query: str) -> list[tuple]:
    return _connection(Path(directory)).execute(query).fetchall()


# The report's nearest-rank percentile (docs/export.md).
NEAREST = "list_sort(list({c}))[greatest(1, ceil({q} / 100 * count({c}))::INT)]"


@pytest.mark.parametrize("name", [*GOLDEN, "blktrace", "set_apart", "zram"])
def test_sql_gives_the_reports_figures(exports, name):
    trace, d = exports[name]
    r = analyze(read_trace(str(trace)), AnalysisConfig())
    want = {c: v for c, v in r["requests"].items() if v["count"]}
    got = {c: (n, b) for c, n, b in sql(d, "SELECT class, count(*), sum(len_bytes) FROM requests "
                                           "WHERE counted GROUP BY class")}
    assert got == {c: (v["count"], v["bytes"]) for c, v in want.items()}
    for col in ("device_ns", "queue_ns", "total_ns"):
        pcts = ", ".join(NEAREST.format(c=col, q=q) for q in (50, 90, 99))
        rows = sql(d, f"SELECT class, {pcts}, max({col}) FROM requests "
                      f"WHERE counted AND {col} IS NOT NULL GROUP BY class")
        got_p = {c: list(v) for c, *v in rows}
        want_p = {c: [v[col][f"p{q}"] for q in (50, 90, 99)] + [v[col]["max"]]
                  for c, v in r["requests"].items() if v[col]["p50"] is not None}
        assert got_p == want_p, col
    cols = ", ".join(f"{k.replace('-', '_')}_ns" for k in schema.ATTRIBUTION_CATEGORIES)
    (row,) = sql(d, f"SELECT attribution, elapsed_ns, {cols} FROM runs")
    assert row[1] == r["elapsed_ns"]
    if r["attribution_ns"] is None:
        assert name == "blktrace" and row[0] is None and set(row[2:]) == {None}
    else:
        assert row[0] == r["workload"]["attribution"]
        got_a = dict(zip(schema.ATTRIBUTION_CATEGORIES, row[2:]))
        assert {k: v for k, v in got_a.items() if v is not None} == r["attribution_ns"]
        detail = sql(d, "SELECT category, served_by, ns FROM attribution "
                        "WHERE basis = 'elapsed'")
        want_d = {(c, s, v) for c, parts in (r.get("attribution_detail_ns") or {}).items()
                  for s, v in parts.items() if v}
        assert set(detail) == want_d


def test_a_stack_counts_once_and_is_named_as_in_the_report(exports):
    """causal_stack: a loop device whose disk below is recorded. The disk's requests
    that carried the loop device's I/O are not counted (carried_for names the loop
    device); the loop device's requests are served by their own class's kind (a wait
    on one is named by the loop device's service, as the report's attribution names
    it); devices are named as the report names them."""
    _, d = exports["causal_stack"]
    r = analyze(read_trace(str(exports["causal_stack"][0])), AnalysisConfig())
    (edge,) = r["stack_carried"]
    rows = sql(d, "SELECT device, carried_for, counted, count(*) FROM requests "
                  "WHERE carried_for IS NOT NULL GROUP BY ALL")
    assert rows == [(edge["lower"], edge["upper"], False,
                     edge["requests"] + edge["flushes"] + edge["empty_preflush"])]
    names = {x for (x,) in sql(d, "SELECT DISTINCT device FROM requests")}
    assert names == {dv["name"] for dv in r["devices"]}
    assert not any(":" in x for x in names)
    assert sql(d, "SELECT count(*) FROM requests WHERE served_by IS NULL") == [(0,)]
    up = sql(d, f"SELECT DISTINCT class, served_by FROM requests WHERE device = "
                f"'{edge['upper']}' ORDER BY ALL")
    kind = {"flush": "flush", "log": "log", "metadata": "metadata", "data": "data",
            "discard": "data", "read": "read", "readahead": "read"}
    assert up and all(s == kind[c] for c, s in up)
    (wl,) = sql(d, "SELECT workload_devices FROM runs")
    assert wl[0] == r["workload"]["devices"]


def test_unknown_values_are_null(exports):
    _, d = exports["blktrace"]
    # a request whose submitter the capture does not name: NULL, not ''
    assert sql(d, "SELECT count(*) FROM requests WHERE submitter_comm = ''") == [(0,)]
    assert sql(d, "SELECT count(*) FROM requests WHERE submitter_comm IS NULL")[0][0] > 0
    (row,) = sql(d, "SELECT argv, command, pid, source_limits FROM runs")
    assert row[0] is None and row[1] is None and row[2] is None and len(row[3]) >= 1
    for _, d in exports.values():
        for t, col in (("calls", "comm"), ("offcpu", "waker_comm"), ("journal", "comm"),
                       ("tasks", "comm"), ("calls", "fs"), ("journal", "fs")):
            assert sql(d, f"SELECT count(*) FROM {t} WHERE {col} = ''") == [(0,)], (t, col)


def test_argv_is_a_list(tmp_path):
    s = synth_run(tmp_path / "r.iowt", n_fsync=2, n_reads=0)
    d = export(Path(s.path), tmp_path / "pq")
    (row,) = sql(d, "SELECT argv, command FROM runs")
    assert row == (s.command.split(" "), s.command)


def test_every_file_has_the_documented_schema(exports, tmp_path):
    """Recorded and imported runs' files have the explicit schema (an empty
    source_limits is still a list of strings), so one pyarrow dataset reads them all."""
    for _, d in exports.values():
        for t in schema.TABLE_NAMES:
            got = pq.read_schema(d / f"{t}.parquet").remove_metadata()
            assert got.equals(schema.arrow_schema(pa, t)), (d, t)
    recorded, imported = exports["busy"][1], exports["blktrace"][1]
    assert pq.read_table(recorded / "runs.parquet").column("source_limits").to_pylist() == [[]]
    ds = pytest.importorskip("pyarrow.dataset")
    runs = ds.dataset([str(recorded / "runs.parquet"), str(imported / "runs.parquet")],
                      format="parquet").to_table()
    assert sorted(runs.column("source").to_pylist()) == ["blktrace", "iowhy record"]


def test_schema_doc_is_generated_from_the_schema():
    """docs/parquet-schema.md is what export/schema.py writes (regenerate it with
    `python -m iowhy.export.schema -o docs/parquet-schema.md`), and the page names every
    column of every table, with its type."""
    doc = (REPO / "docs" / "parquet-schema.md").read_text(encoding="utf-8")
    assert doc == schema.schema_doc()
    for t in schema.TABLE_NAMES:
        section = doc.split(f"\n## {t}\n", 1)[1].split("\n## ", 1)[0]
        for f in schema.arrow_schema(pa, t):
            words = {pa.string(): "string", pa.int64(): "int64", pa.uint64(): "uint64",
                     pa.bool_(): "bool", pa.list_(pa.string()): "list of string"}[f.type]
            assert any(f"`{f.name}`" in line and f"| {words} |" in line
                       for line in section.splitlines()), (t, f.name)


def test_a_device_set_apart_and_bios(exports):
    """Requests of a device the analysis set apart are background, with a class and a
    seek but no level two; the bios of a bio-based device are rows, counted as the
    report counts them."""
    _, d = exports["set_apart"]
    rows = sql(d, "SELECT device, seq, class, background, counted, served_by, seek_sectors "
                  "FROM requests ORDER BY seq")
    assert rows == [("sdz", 1, "data", False, True, "data", None),
                    ("sdy", 2, "data", True, False, None, None),
                    ("sdy", 3, "data", True, False, None, 60_000 - 50_008)]
    trace, d = exports["zram"]
    r = analyze(read_trace(str(trace)), AnalysisConfig())
    (n, counted) = sql(d, "SELECT count(*), count(*) FILTER (WHERE counted) FROM requests "
                          "WHERE bio AND device = 'zram1' AND seq IS NULL")[0]
    assert n == 10 and counted == sum(v["count"] for v in r["requests"].values())
    # a bio ended in its submitter's context names it; zram does
    assert sql(d, "SELECT DISTINCT submitter_comm FROM requests ORDER BY 1") == \
        [("dd",), ("jbd2/zram1-8",), ("star",)]


@pytest.mark.parametrize("name", ["causal_stack", "busy", "set_apart", "zram"])
def test_the_documented_class_table_query(exports, name):
    """docs/export.md's query for the report's class table, as the page gives it."""
    text = (REPO / "docs" / "export.md").read_text(encoding="utf-8")
    section = text.split("\n## Parquet\n", 1)[1].split("\n## ", 1)[0]
    (query,) = re.findall(r"```\n(SELECT .*?)```", section, re.S)
    trace, d = exports[name]
    r = analyze(read_trace(str(trace)), AnalysisConfig())
    want = [(c, v["count"], v["bytes"] if v["count"] else None, v["device_ns"]["p99"])
            for c, v in sorted(r["requests"].items()) if v["count"] or v["device_ns"]["p99"]]
    assert sql(d, query) == want
