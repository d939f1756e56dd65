"""iowhy.export.tables: a run as Arrow tables, each to its explicit schema, with the
trace's 0 = unknown as NULL and the durations derived from the records. One tiny
hand-written trace; its every figure is worked out here from the records."""

from __future__ import annotations

import numpy as np
import pytest

import tracebuilder as tb
from iowhy import abi
from iowhy.export import schema, tables
from iowhy.export.source import Names
from iowhy.traceformat import read_trace

pa = pytest.importorskip("pyarrow")

ZRAM = (252, 1)  # ends a bio in its submitter's context
DM = (253, 0)  # ends it in another's: the context task is no submitter


def tiny(tmp_path) -> str:
    m = tb.meta()
    m["devices"].append(tb.disk("zram1", ZRAM, kind="zram", bio_based=True, rotational=0))
    m["devices"].append(tb.disk("dm-0", DM, kind="dm", bio_based=True, rotational=0))
    m["bio_based_devices"] = ["zram1", "dm-0"]
    return tb.write_trace(
        tmp_path / "t.iowt", meta_obj=m,
        requests=[tb.req(1010, 1030, seq=1, insert=1005, submit=1004, comm=b"star",
                         flags=abi.RQ_TRACKED | abi.RQ_ORIGIN, iflags=abi.F_SYNC),
                  tb.req(1040, 0, seq=2, insert=0, flags=abi.RQ_INCOMPLETE, tid=0)],
        # (the recorder writes a request's task only with RQ_ORIGIN: 0 is unknown)
        bios=[tb.bio(1050, dev=ZRAM, sector=64, comm=b"star"),
              tb.bio(1055, dev=DM, sector=64, comm=b"kworker/0:1", tid=9)],
        fsyncs=[tb.fsync(100, 1020, 1060, seq=7),
                tb.fsync(100, 1070, 0, flags_u16=abi.FS_F_FSEVENT | abi.FS_F_INCOMPLETE),
                tb.fsync(100, 1085, 0)],  # no exit seen, though not flagged
        offcpu=[tb.off(100, 1020, 1060, waking=1050),
                tb.off(100, 1070, 1080, preempt=True)],
        journal=[tb.jev(abi.J_JBD2_START, 1025, 7)],
        tasks=[tb.task(100, 1000), tb.task(100, 1090, abi.TASK_EXIT, exit_code=3)])


@pytest.fixture(scope="module")
def tabs(tmp_path_factory):
    return tables.run_tables(read_trace(tiny(tmp_path_factory.mktemp("tables"))))


def col(t, name):
    return t.column(name).to_pylist()


def test_every_table_in_order_with_its_schema(tmp_path):
    names = []
    for name, t in tables.iter_tables(read_trace(tiny(tmp_path))):
        names.append(name)
        assert t.schema.remove_metadata() == schema.arrow_schema(pa, name)
        md = t.schema.metadata
        assert md[b"iowhy.schema"] == str(schema.SCHEMA_VERSION).encode()
        assert len(set(col(t, "run_uuid"))) <= 1
        assert set(col(t, "run_uuid")) <= {md[b"iowhy.run_uuid"].decode()}
    assert tuple(names) == schema.TABLE_NAMES


def test_requests_rows_and_nulls(tabs):
    t = tabs["requests"]
    assert col(t, "seq") == [1, 2, None, None]  # a bio has no request seq
    assert col(t, "bio") == [False, False, True, True]
    assert col(t, "device") == ["sdz", "sdz", "zram1", "dm-0"]
    assert col(t, "submit_ns")[:2] == [1004, 1040] and col(t, "insert_ns")[:2] == [1005, None]
    assert col(t, "done_ns") == [1030, None, 1050, 1055]  # a bio's end: its ts_ns
    assert col(t, "incomplete") == [False, True, False, False]
    assert col(t, "sync") == [True, False, False, False]
    assert col(t, "workload")[:3] == [True, False, True]
    assert col(t, "device_ns")[0] == 1030 - 1010 and col(t, "device_ns")[1] is None
    # a dm bio's context task is not its submitter: NULL, not the kworker
    assert col(t, "submitter_comm") == ["star", None, "star", None]
    assert col(t, "submitter_tid") == [100, None, 100, None]
    assert col(t, "op") == ["write"] * 4


def test_calls_latency_and_seq(tabs):
    t = tabs["calls"]
    assert col(t, "call_id") == [0, 1, 2]
    assert col(t, "latency_ns") == [40, None, None]  # no exit: no latency
    assert col(t, "exit_ns") == [1060, None, None]
    assert col(t, "commit_seq") == [7, None, None]  # only with FS_F_SEQ
    assert col(t, "incomplete") == [False, True, False]
    assert col(t, "call") == ["fsync"] * 3 and col(t, "fs") == ["ext4"] * 3


def test_offcpu_blocked_and_runnable(tabs):
    t = tabs["offcpu"]
    assert col(t, "blocked_ns") == [1050 - 1020, 1080 - 1070]  # preempted: never woken
    assert col(t, "runnable_ns") == [1060 - 1050, 0]
    assert col(t, "waking_ns") == [1050, None]
    assert col(t, "preempted") == [False, True] and col(t, "uninterruptible") == [True, False]
    assert col(t, "waker_tid") == [None, None]


def test_tasks_and_journal(tabs):
    t = tabs["tasks"]
    assert col(t, "event") == ["root", "exit"]
    assert col(t, "exit_code") == [None, 3]  # an exit code only on an exit
    assert col(t, "parent_tgid") == [None, None]
    j = tabs["journal"]
    assert col(j, "event") == ["jbd2_start"]
    assert col(j, "seq") == [7] and col(j, "ts_ns") == [1025] and col(j, "fs") == ["ext4"]


def test_runs_is_one_row(tabs):
    t = tabs["runs"]
    assert t.num_rows == 1
    assert col(t, "argv") == [["star", "-x"]] and col(t, "command") == ["star -x"]
    assert col(t, "start_ns") == [1000] and col(t, "end_ns") == [1100]
    assert col(t, "elapsed_ns") == [100]


def test_string_columns_name_each_value_once():
    calls = []

    def name(v):
        calls.append(v)
        return None if v == 0 else f"n{v}"
    got = tables._strings(pa, np.array([3, 0, 3, 5, 3]), name)
    assert got.to_pylist() == ["n3", None, "n3", "n5", "n3"]
    assert sorted(calls) == [0, 3, 5]
    assert tables._strings(pa, np.array([], np.int64), name).to_pylist() == []
    coded = Names(np.array([1, -1, 1, 0], np.int32), ["a", "b"])
    assert tables._coded(pa, coded).to_pylist() == ["b", None, "b", "a"]
    assert [coded[i] for i in range(len(coded))] == ["b", None, "b", "a"]


def test_zero_time_is_null():
    assert tables._time(pa, np.array([0, 5], np.uint64)).to_pylist() == [None, 5]


def test_a_table_must_have_exactly_its_columns():
    cols = {n: [] for n in schema.column_names("attribution")}
    assert tables._table(pa, "attribution", cols).num_rows == 0
    del cols["ns"]
    with pytest.raises(RuntimeError, match="do not match its schema"):
        tables._table(pa, "attribution", cols)


class Counted:
    """A trace whose chunks hold other than it counts."""

    def __init__(self, count, chunks):
        self.n, self.chunks = count, chunks

    def count(self, name):
        return self.n

    def iter_chunks(self, name):
        return iter(self.chunks)


def test_fields_refuse_records_other_than_counted():
    a = tb.records(tb.DTYPES["offcpu"], [tb.off(1, 2, 3), tb.off(4, 5, 6)])
    got = tables._fields(Counted(2, [a[:1], a[1:]]), "offcpu", ("tid", "end_ns"))
    assert got["tid"].tolist() == [1, 4] and got["end_ns"].dtype == np.int64
    with pytest.raises(RuntimeError, match="more than the 1 counted"):
        tables._fields(Counted(1, [a]), "offcpu", ("tid",))
    with pytest.raises(RuntimeError, match="1, not the 2 counted"):
        tables._fields(Counted(2, [a[:1]]), "offcpu", ("tid",))


def test_a_request_without_its_origin_has_no_submitter(tmp_path):
    # An import whose queued bio was not seen names the task met at the request's
    # insert (a kworker flushing a plug): not its submitter, as the report counts it
    # ("requests whose submitting task is unknown").
    p = tb.write_trace(tmp_path / "o.iowt", requests=[
        tb.req(1010, 1030, seq=1, comm=b"star", flags=abi.RQ_TRACKED | abi.RQ_ORIGIN),
        tb.req(1040, 1050, seq=2, comm=b"kworker/u4:2", tid=77, flags=0)])
    t = tables.run_tables(read_trace(p))["requests"]
    assert col(t, "submitter_comm") == ["star", None]
    assert col(t, "submitter_tid") == [100, None] and col(t, "submitter_tgid") == [100, None]
    # and the timeline export's request slices (Chrome JSON) say "?"
    import json
    from iowhy.cli import main
    out = tmp_path / "o.json"
    assert main(["export", p, "--format", "chrome-json", "-o", str(out)]) == 0
    args = [e["args"] for e in json.loads(out.read_text())["traceEvents"]
            if "sector" in (e.get("args") or {})]
    assert sorted(a["submitter"] for a in args) == ["?", "star/100"]
