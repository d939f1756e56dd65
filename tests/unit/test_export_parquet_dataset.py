"""`iowhy export --format parquet --dataset DIR`: three runs from two hosts make one
Hive-partitioned dataset that pyarrow.dataset, DuckDB (with the SQL docs/export.md
gives, taken from the page itself) and `iowhy query` read, with the reports' figures;
adding a run never rewrites another's files."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from iowhy.analysis import AnalysisConfig, analyze
from iowhy.cli import main
from iowhy.export.schema import TABLE_NAMES
from iowhy.kernels import nearest_rank
from iowhy.traceformat import read_trace
from synth_runs import synth_run

pa = pytest.importorskip("pyarrow")
pds = pytest.importorskip("pyarrow.dataset")
pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")

REPO = Path(__file__).resolve().parents[2]
HOSTS = {1: "alpha", 2: "alpha", 3: "beta"}


def doc_blocks() -> list[str]:
    """The code blocks of docs/export.md's dataset section, in order."""
    text = (REPO / "docs" / "export.md").read_text(encoding="utf-8")
    section = text.split("\n## A dataset of many hosts\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.*?)```", section, re.S)


def stats(root: Path) -> dict[str, tuple[int, int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size)
            for p in root.rglob("*.parquet")}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("dataset")
    root = d / "ds"
    traces = {}
    before = {}
    for seed, host in HOSTS.items():
        s = synth_run(d / f"run{seed}.iowt", seed=seed, host=host)
        traces[seed] = Path(s.path)
        before[seed] = stats(root) if root.exists() else {}
        assert main(["export", s.path, "--format", "parquet", "--dataset", str(root)]) == 0
        after = stats(root)
        # every file there before is untouched (same inode, time, size); 7 new ones
        assert {k: after[k] for k in before[seed]} == before[seed]
        assert len(after) == len(before[seed]) + len(TABLE_NAMES)
    return root, traces


def test_layout_and_modes(dataset):
    root, traces = dataset
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet"))
    assert len(files) == 3 * len(TABLE_NAMES)
    for f in files:
        table, host, date, name = f.split(os.sep)
        assert table in TABLE_NAMES and host in ("host=alpha", "host=beta")
        assert re.fullmatch(r"date=\d{4}-\d{2}-\d{2}", date) and name.endswith(".parquet")
        assert stat.S_IMODE((root / f).stat().st_mode) == 0o600
        assert pq.ParquetFile(root / f).num_row_groups == 1  # one run, one row group
    for d in root.rglob("*"):
        if d.is_dir():
            assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_a_run_is_added_once(dataset, capsys):
    root, traces = dataset
    before = stats(root)
    assert main(["export", str(traces[1]), "--format", "parquet", "--dataset", str(root)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("iowhy: run ") and "already in" in err and err.count("\n") == 1
    assert stats(root) == before


def test_pyarrow_reads_each_table_with_its_partitions(dataset):
    root, traces = dataset
    want = {"alpha": 0, "beta": 0}
    for seed, t in traces.items():
        want[HOSTS[seed]] += read_trace(str(t)).count("request")
    tab = pds.dataset(str(root / "requests"), format="parquet", partitioning="hive").to_table()
    got: dict[str, int] = {}
    for h in tab.column("host").to_pylist():
        got[h] = got.get(h, 0) + 1
    assert got == want
    runs = pds.dataset(str(root / "runs"), format="parquet", partitioning="hive").to_table()
    assert sorted(runs.column("host").to_pylist()) == ["alpha", "alpha", "beta"]
    assert len(set(runs.column("run_uuid").to_pylist())) == 3


def expected(traces):
    """(per (host, class): (requests, bytes); per (run, class): p99 device ns;
    per host: (runs, barrier ns, elapsed ns)), from the analysis of each trace."""
    counts: dict[tuple[str, str], list[int]] = {}
    p99: dict[tuple[str, str], int] = {}
    hosts: dict[str, list[int]] = {}
    from iowhy.export.source import run_uuid
    for seed, t in traces.items():
        tr = read_trace(str(t))
        r = analyze(tr, AnalysisConfig())
        u = run_uuid(tr)
        for c, v in r["requests"].items():
            if v["count"]:
                x = counts.setdefault((HOSTS[seed], c), [0, 0])
                x[0] += v["count"]
                x[1] += v["bytes"]
            if v["device_ns"]["p99"] is not None:
                p99[(u, c)] = v["device_ns"]["p99"]
        h = hosts.setdefault(HOSTS[seed], [0, 0, 0])
        h[0] += 1
        h[1] += r["attribution_ns"]["barrier"]
        h[2] += r["elapsed_ns"]
    return counts, p99, hosts


def test_the_documented_queries_in_duckdb_and_iowhy_query(dataset, tmp_path, caplog):
    root, traces = dataset
    blocks = doc_blocks()
    views = next(b for b in blocks if "read_parquet" in b)
    queries = [b for b in blocks if b.startswith("SELECT")]
    assert len(queries) == 3
    con = duckdb.connect()
    con.execute(views.replace("DIR", str(root)))
    counts, p99, hosts = expected(traces)
    results = [con.execute(q).fetchall() for q in queries]
    assert {(h, c): [n, b] for h, c, n, b in results[0]} == counts
    assert {(u, c): v for u, c, v in results[1]} == p99
    assert {h: [n, b, e] for h, n, b, e in results[2]} == hosts
    # the nearest-rank rule the query spells: rank ceil(99 n / 100)
    assert nearest_rank(100, 99) == 98 and nearest_rank(101, 99) == 99
    # `iowhy query` over the dataset gives the same rows, and a trace given beside its
    # own dataset is counted once
    for q, want in zip(queries, results):
        out = tmp_path / "q.csv"
        if out.exists():
            out.unlink()
        assert main(["query", q, str(root), str(traces[3]), "--csv", "-o", str(out)]) == 0
        rows = out.read_text().splitlines()[1:]
        assert rows == [",".join(str(x) for x in r) for r in want]
    assert "counted once" in caplog.text


def test_dataset_refuses_symlinks_and_other_formats(tmp_path, capsys):
    s = synth_run(tmp_path / "r.iowt", n_fsync=3, n_reads=1)
    root = tmp_path / "ds"
    (root / "runs").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "runs" / "host=hostA").symlink_to(elsewhere)
    assert main(["export", s.path, "--format", "parquet", "--dataset", str(root)]) == 1
    err = capsys.readouterr().err
    assert "symlink" in err and err.count("\n") == 1
    assert list(elsewhere.iterdir()) == []
    assert not list(root.rglob("*.parquet"))
    assert main(["export", s.path, "--format", "perfetto", "--dataset", str(root)]) == 2
    assert "--dataset is for --format parquet" in capsys.readouterr().err


def test_a_failing_write_leaves_the_dataset_as_it_was(dataset, tmp_path, capsys):
    """A write that fails (a file-size limit: EFBIG) is one line and leaves the other
    runs' files as they were, and no file, temporary or directory of the new run."""
    from test_outfile import main_limited
    root, _ = dataset
    s = synth_run(tmp_path / "new.iowt", seed=9, host="gamma")
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    files = stats(root)
    rc, err = main_limited(["export", s.path, "--format", "parquet", "--dataset", str(root)],
                           capsys)
    assert rc == 1
    assert err == f"iowhy: cannot write {root}: File too large\n" or \
        err.startswith(f"iowhy: cannot write {root}: File too large (")
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == before
    assert stats(root) == files
    # a new dataset that failed leaves no directory at all
    fresh = tmp_path / "fresh"
    rc, _ = main_limited(["export", s.path, "--format", "parquet", "--dataset", str(fresh)],
                         capsys)
    assert rc == 1 and not fresh.exists()


def test_a_run_missing_a_table_is_one_line(dataset, tmp_path, capsys):
    import shutil
    root, _ = dataset
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    victim = next((copy / "requests").rglob("*.parquet"))
    victim.unlink()
    assert main(["query", "SELECT count(*) FROM runs", str(copy)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"iowhy: run {victim.stem} of the dataset {copy} lacks requests")
    assert err.count("\n") == 1
