"""`iowhy report --by cgroup` on synthetic traces: each workload thread in the cgroup its
first task record names (format 9), the threads' own time, what explains it and their
fsync-family calls summed per cgroup; the threads of no named cgroup, the cgroups
removed before they were named and the threads that moved, each counted; a trace of an
older format says the cgroups were not recorded. The Parquet `tasks` table and `iowhy
query` name each task record's cgroup as the report does."""

from __future__ import annotations

import json

import numpy as np
import pytest

from iowhy import abi, cli
from iowhy.traceformat import read_trace
from iowhy.tracewriter import TraceWriter
from tracebuilder import fsync, meta, off, records, run, task, write_trace

START, END = 1_000_000, 11_000_000
NANOSLEEP = 35  # x86-64
PATHS = {501: "/shop/db", 502: "/shop/web", 503: "/other", 504: None}


def _task(tid: int, tgid: int, ts: int, cg: int, event: int = abi.TASK_ROOT) -> dict:
    return {**task(tid, ts, event), "tgid": tgid, "cgroup_id": cg}


def _trace(tmp_path, version: int | None = abi.FORMAT_VERSION, pid: int = 100,
           **trailer) -> str:
    """db (tid 100, /shop/db): 4 ms blocked in fsync, two fsyncs; web (tgid 200,
    /shop/web): 3 ms blocked in fsync, and a thread it forks (201) that sleeps 3 ms and
    has moved to /other by its exit; 300: no cgroup recorded; 400: a cgroup removed
    before it was named; 600: an fsync, no task record (as a thread older than a flight
    dump's window)."""
    cg = (lambda c: c) if version is not None and version >= abi.CGROUP_VERSION else (lambda c: 0)
    tasks = [_task(100, 100, START, cg(501)), _task(200, 200, START, cg(502)),
             _task(201, 200, 4_000_000, cg(502), abi.TASK_FORK),
             _task(201, 200, 9_000_000, cg(503), abi.TASK_EXIT),
             _task(201, 200, 9_100_000, cg(503), abi.TASK_DEAD),
             _task(300, 300, START, 0), _task(400, 400, START, cg(504))]
    offcpu = [off(100, 2_000_000, 6_000_000), off(200, 3_000_000, 6_000_000),
              {**off(201, 5_000_000, 8_000_000, syscall=NANOSLEEP), "tgid": 200}]
    fsyncs = [fsync(100, 1_900_000, 6_100_000), fsync(100, 7_000_000, 7_500_000),
              fsync(200, 2_900_000, 6_050_000), fsync(300, 8_000_000, 8_200_000),
              fsync(600, 9_000_000, 9_100_000)]  # 600: no task record
    extra = {"cgroups": [{"id": k, "path": v} for k, v in PATHS.items()], **trailer} \
        if version is not None and version >= abi.CGROUP_VERSION else {}
    return write_trace(tmp_path / "cg.iowt", start=START, end=END, tasks=tasks,
                       offcpu=offcpu, fsyncs=fsyncs, version=version, pid=pid,
                       recorder={"attach_mode": "tp_btf", "mode": "attach"},
                       meta_obj={**meta(), "machine": "x86_64"}, trailer_extra=extra)


def _by_id(section: dict) -> dict[int, dict]:
    return {g["id"]: g for g in section["groups"]}


def test_threads_are_grouped_by_their_first_cgroup(tmp_path):
    r = run(_trace(tmp_path), by_cgroup=True)
    cg = r["cgroups"]
    assert cg["recorded"] and cg["moved_threads"] == 1 and cg["unknown_threads"] == 1
    assert cg["unnamed_cgroups"] == 1
    g = _by_id(cg)
    assert set(g) == {501, 502, 504, 0}  # 201 stays in its first cgroup, not /other
    assert [g[i]["cgroup"] for i in (501, 502, 504, 0)] == ["/shop/db", "/shop/web", None, None]
    assert (g[501]["pids"], g[502]["pids"], g[0]["pids"]) == ([100], [200], [300, 600])
    assert (g[501]["threads"], g[502]["threads"], g[0]["threads"]) == (1, 2, 1)
    # the calls, as written
    assert g[501]["calls"]["fsync"] == {"count": 2, "total_ns": 4_700_000,
                                        "p99_ns": 4_200_000, "max_ns": 4_200_000}
    assert g[502]["calls"]["fsync"]["count"] == 1
    assert g[502]["calls"]["fsync"]["total_ns"] == 3_150_000
    assert g[0]["calls"]["fsync"]["count"] == 2 and not g[504]["calls"]
    # the threads' own blocked time, by the syscall they were in
    assert g[501]["blocked_in_ns"] == {"fsync": 4_000_000}
    assert g[502]["blocked_in_ns"] == {"fsync": 3_000_000, "nanosleep": 3_000_000}
    assert g[501]["blocked_ns"] == 4_000_000 and g[502]["blocked_ns"] == 6_000_000
    # each group's time tiles its threads' lives, and the groups tile the thread time
    tt = r["thread_time"]
    for x in g.values():
        assert x["on_cpu_ns"] + x["runqueue_ns"] + x["blocked_ns"] == x["thread_ns"]
        assert sum(x.get("attribution_ns", {}).values()) == x["thread_ns"]
    assert sum(x["thread_ns"] for x in g.values()) == tt["total_ns"]
    for k, v in tt["attribution_ns"].items():
        assert sum(x.get("attribution_ns", {}).get(k, 0) for x in g.values()) == v, k
    # the most blocked first
    assert [x["id"] for x in cg["groups"]][:2] == [502, 501]


def test_report_by_cgroup_text_and_json(tmp_path, capsys):
    path = _trace(tmp_path)
    assert cli.main(["report", "--by", "cgroup", path]) == 0
    out = capsys.readouterr().out
    assert "BY CGROUP (4 cgroups, 5 threads" in out
    lines = out.splitlines()
    db = next(line for line in lines if line.lstrip().startswith("/shop/db"))
    assert db.split()[1:3] == ["1", "1"] and db.split()[-2] == "2", db
    assert any("(removed, id 504)" in line for line in lines)
    assert any("1 threads moved to another cgroup" in line for line in lines)
    assert "blocked in fsync 40%" in out  # db: 4 ms of its 10 ms
    assert cli.main(["report", "--by", "cgroup", "--json", path]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cgroups"] == run(path, by_cgroup=True)["cgroups"]
    assert cli.main(["report", "--json", path]) == 0  # not asked: no section
    assert "cgroups" not in json.loads(capsys.readouterr().out)


def test_an_older_trace_says_the_cgroups_were_not_recorded(tmp_path, capsys):
    path = _trace(tmp_path, version=None)  # TraceWriter's default: version 5
    tr = read_trace(path)
    assert tr.version == abi.BASE_VERSION and not tr.records("task")["cgroup_id"].any()
    assert run(path, by_cgroup=True)["cgroups"] == {
        "recorded": False, "why": "trace format version 5 records no task's cgroup "
                                  "(format 9 does)"}
    assert cli.main(["report", "--by", "cgroup", path]) == 0
    out = capsys.readouterr().out
    assert "BY CGROUP\n  cgroup: not recorded (trace format version 5" in out


def test_task_records_of_both_layouts(tmp_path):
    rows = records(abi.TASK_DTYPE, [_task(7, 7, START, 501)])
    with pytest.raises(ValueError, match="need format version 9"):
        TraceWriter(str(tmp_path / "old.iowt")).write_records(rows)
    sizes = {}
    for version, want in ((abi.FORMAT_VERSION, 501), (8, 0)):
        p = tmp_path / f"v{version}.iowt"
        w = TraceWriter(str(p), version=version)
        w.write_records(rows if version >= abi.CGROUP_VERSION
                        else records(abi.TASK_DTYPE, [_task(7, 7, START, 0)]))
        w.close({"end_ns": END})
        tr = read_trace(str(p))
        assert tr.version == version and not tr.damage.damaged, tr.damage.summary()
        t = tr.records("task")
        assert t.dtype == abi.TASK_DTYPE and int(t["cgroup_id"][0]) == want
        assert int(t["tid"][0]) == 7 and int(t["ts_ns"][0]) == START
        sizes[version] = p.stat().st_size
    # the same file but for the record: 64 bytes against 56
    assert sizes[abi.FORMAT_VERSION] - sizes[8] == abi.TASK_DTYPE.itemsize - 56 == 8


def test_cgroup_names_of_a_truncated_trace_come_from_its_progress_chunks(tmp_path):
    p = tmp_path / "cut.iowt"
    w = TraceWriter(str(p), version=abi.FORMAT_VERSION)
    w.write_json(abi.CHUNK_RECORDER, {"start_ns": START})
    w.write_records(records(abi.TASK_DTYPE, [_task(7, 7, START, 501), _task(8, 8, START, 502)]))
    w.write_json(abi.CHUNK_PROGRESS, {"end_ns": START + 1,
                                      "cgroups": [{"id": 501, "path": "/a"}]})
    w.write_json(abi.CHUNK_PROGRESS, {"end_ns": START + 2, "cgroups": [
        {"id": 502, "path": None}, {"id": "x", "path": "/bad"}]})
    w.close(None)
    tr = read_trace(str(p))
    assert tr.cgroup_paths == {501: "/a", 502: None}
    assert "progress.cgroups[1]" in tr.damage.invalid_fields


def test_thread_cgroups_takes_the_earliest_named():
    from iowhy.views.cgroups import thread_cgroups
    tasks = {"tid": np.array([5, 5, 5, 9, 3]), "ts_ns": np.array([30, 10, 20, 5, 1]),
             "cgroup_id": np.array([7, 0, 6, 0, 4], np.uint64)}
    tids, ids, moved = thread_cgroups(tasks)
    assert tids.tolist() == [3, 5, 9]
    assert ids.tolist() == [4, 6, 0]  # 5: its record at 10 names none, at 20 names 6
    assert moved.tolist() == [False, True, False]
    # a flight dump's kept cgroups come before every record
    tids, ids, moved = thread_cgroups(tasks, [[9, 8], [5, 6], [11, 2]])
    assert (tids.tolist(), ids.tolist()) == ([3, 5, 9, 11], [4, 6, 8, 2])
    assert moved.tolist() == [False, True, False, False]


def test_a_flight_dump_places_threads_by_the_cgroups_it_kept(tmp_path):
    """TRAILER thread_cgroups: 300, whose only task record names no cgroup (as a thread
    whose first records are older than the window), is in the cgroup the recorder kept;
    a malformed pair is dropped and counted."""
    path = _trace(tmp_path, thread_cgroups={"threads": [[300, 503], [7, "x"]],
                                            "not_kept": 0})
    tr = read_trace(path)
    assert "trailer.thread_cgroups.threads[1]" in tr.damage.invalid_fields
    cg = run(path, by_cgroup=True)["cgroups"]
    g = _by_id(cg)
    assert cg["unknown_threads"] == 0 and g[503]["cgroup"] == "/other"
    assert g[503]["pids"] == [300] and g[503]["threads"] == 1
    assert g[0]["pids"] == [600] and g[0]["threads"] == 0  # a call, no thread


def test_the_html_report_has_the_cgroups(tmp_path):
    from htmlcheck import assert_complete, assert_self_contained, render
    text = render(_trace(tmp_path), tmp_path / "r.html", "--by", "cgroup")
    assert_self_contained(text)
    assert_complete(text)
    assert 'id="table-by-cgroup"' in text
    table = text[text.index('id="table-by-cgroup"'):]
    table = table[:table.index("</table>")]
    assert table.index("/shop/web") < table.index("/shop/db") < table.index("(unknown)")
    assert "(removed, id 504)" in table and "fsync 40%" in table
    assert "1 threads moved to another cgroup" in text
    assert "table-by-cgroup" not in render(_trace(tmp_path), tmp_path / "s.html")


def _export_tasks(path: str, out) -> list[dict]:
    """The rows of the tasks table `iowhy export --format parquet` writes for path."""
    pq = pytest.importorskip("pyarrow.parquet")
    assert cli.main(["export", path, "--format", "parquet", "-o", str(out)]) == 0
    t = pq.read_table(out / "tasks.parquet")
    assert str(t.schema.field("cgroup_id").type) == "uint64"
    assert str(t.schema.field("cgroup").type) == "string"
    return t.to_pylist()


def test_the_tasks_table_names_each_records_cgroup(tmp_path):
    """Each row has its task record's cgroup id (NULL for 0: unknown) and the path the
    report names it by (NULL for a cgroup removed before it was named)."""
    path = _trace(tmp_path)
    rows = _export_tasks(path, tmp_path / "pq")
    recs = read_trace(path).records("task")
    assert [r["tid"] for r in rows] == recs["tid"].tolist()
    assert [r["cgroup_id"] for r in rows] == [int(c) or None for c in recs["cgroup_id"]]
    assert [r["cgroup_id"] for r in rows] == [501, 502, 502, 503, 503, None, 504]
    assert [r["cgroup"] for r in rows] == ["/shop/db", "/shop/web", "/shop/web", "/other",
                                           "/other", None, None]
    # the report's name of each thread's group is the cgroup of the thread's first row
    groups = _by_id(run(path, by_cgroup=True)["cgroups"])
    first: dict[int, dict] = {}
    for r in sorted(rows, key=lambda r: r["ts_ns"]):
        first.setdefault(r["tid"], r)
    assert set(first) == {100, 200, 201, 300, 400}
    for r in first.values():
        assert groups[r["cgroup_id"] or 0]["cgroup"] == r["cgroup"], r


@pytest.mark.parametrize("version", [None, 8])  # TraceWriter's default (5), and 8
def test_the_tasks_table_of_an_older_format_has_no_cgroup(tmp_path, version):
    path = _trace(tmp_path, version=version)
    rows = _export_tasks(path, tmp_path / "pq")
    assert read_trace(path).version < abi.CGROUP_VERSION
    assert len(rows) == 7
    assert {(r["cgroup_id"], r["cgroup"]) for r in rows} == {(None, None)}


def test_query_has_the_cgroup_columns_also_over_an_older_export(tmp_path, capsys):
    """`iowhy query` over a trace, and over an export of an older iowhy whose tasks
    table lacks the columns: they are there, NULL for the older export's rows."""
    pytest.importorskip("duckdb")
    pq = pytest.importorskip("pyarrow.parquet")
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    path = _trace(tmp_path / "new")
    old = tmp_path / "old.export"
    _export_tasks(_trace(tmp_path / "old", pid=200), old)  # another run: another pid
    t = pq.read_table(old / "tasks.parquet")
    t = t.drop_columns(["cgroup_id", "cgroup"]).replace_schema_metadata(
        {**t.schema.metadata, b"iowhy.schema": b"2"})
    pq.write_table(t, old / "tasks.parquet")

    def query(sql: str, *runs: str) -> list[dict]:
        capsys.readouterr()
        assert cli.main(["query", sql, *runs, "--json"]) == 0
        return json.loads(capsys.readouterr().out)
    got = query("SELECT tid, cgroup_id, cgroup FROM tasks ORDER BY ts_ns, tid, cgroup_id",
                path)
    assert [(r["tid"], r["cgroup_id"], r["cgroup"]) for r in got] == [
        (100, 501, "/shop/db"), (200, 502, "/shop/web"), (300, None, None),
        (400, 504, None), (201, 502, "/shop/web"), (201, 503, "/other"),
        (201, 503, "/other")]
    assert query("SELECT count(*) AS n, count(cgroup_id) AS ids, count(cgroup) AS names, "
                 "typeof(any_value(cgroup_id)) AS t FROM tasks", str(old)) == [
        {"n": 7, "ids": 0, "names": 0, "t": "UBIGINT"}]
    both = query("SELECT count(DISTINCT run_uuid) AS runs, count(*) AS n, "
                 "count(cgroup_id) AS ids FROM tasks", path, str(old))
    assert both == [{"runs": 2, "n": 14, "ids": 6}]
