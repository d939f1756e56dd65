"""Names are bytes: a trace whose command line, task names, device, mount point and host
are not UTF-8 (and hold a lone surrogate, and control characters) goes through every
writer, and an independent reader reads each file back: pyarrow the Parquet tables,
DuckDB the same tables and the SQL views over the trace, the Perfetto protos the
protobuf trace, json the Trace Event file and the JSON listings, csv the CSV ones. Each
writes a byte that is not UTF-8 as `\\xNN` and another lone surrogate as `\\uNNNN`
(names.utf8_text), and keeps control characters (they are valid UTF-8)."""

from __future__ import annotations

import contextlib
import csv
import io
import json

import pytest

from damaged_traces import ARG, COMM, SOURCE, hostile_names_trace as hostile_trace
from iowhy.cli import main
from iowhy.names import comm_text, utf8_text

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")
pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")


def cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


def test_the_escape_is_documented_and_lossless_for_utf8():
    assert utf8_text("plain é \x1b") == "plain é \x1b"
    assert utf8_text(ARG) == "bad\\xff\\xfe"
    assert utf8_text(SOURCE) == "/dev/\\x80\\ud800"
    assert comm_text(COMM + b"\0\0") == "bad\\xff\\xfe\x1b"


def test_every_writer_encodes_hostile_names(tmp_path):
    t = hostile_trace(tmp_path / "t.iowt")
    comm = comm_text(COMM)
    command = f"/bin/echo {utf8_text(ARG)}"

    # Parquet, read by pyarrow and by DuckDB directly
    d = tmp_path / "pq"
    cli("export", t, "--format", "parquet", "-o", str(d))
    runs = pq.read_table(d / "runs.parquet").to_pylist()[0]
    assert runs["command"] == command and runs["host"] == "h\\xfe"
    assert runs["devices"] == ["sd\\xffz"]
    assert set(pq.read_table(d / "requests.parquet").column("submitter_comm").to_pylist()) \
        == {comm}
    assert set(pq.read_table(d / "requests.parquet").column("device").to_pylist()) \
        == {"sd\\xffz"}
    con = duckdb.connect()
    got = con.execute(f"SELECT DISTINCT waker_comm FROM read_parquet('{d}/offcpu.parquet')")
    assert got.fetchall() == [(comm,)]
    # a cgroup's path (TRAILER `cgroups`), ESC kept, the byte that is not UTF-8 escaped
    got = con.execute(f"SELECT DISTINCT cgroup FROM read_parquet('{d}/tasks.parquet')")
    assert got.fetchall() == [("/x\x1b]0;pwned\x07/\\xff",)]

    # the SQL views over the trace itself, as JSON and CSV
    rows = json.loads(cli("query", "SELECT command, host FROM runs", t, "--json"))
    assert rows == [{"command": command, "host": "h\\xfe"}]
    got = list(csv.reader(io.StringIO(cli("query", "SELECT DISTINCT comm FROM calls", t,
                                          "--csv"))))
    # CSV writes a control character (here ESC) as `\xNN`, as a byte that is not UTF-8
    assert got == [["comm"], [comm.replace("\x1b", "\\x1b")]]

    # Perfetto, parsed with the protos of the perfetto package
    pf = tmp_path / "t.pftrace"
    cli("export", t, "--format", "perfetto", "-o", str(pf))
    tr = pb.Trace()
    tr.ParseFromString(pf.read_bytes())
    names = [p.track_descriptor.name or p.track_descriptor.thread.thread_name
             or p.track_descriptor.process.process_name
             for p in tr.packet if p.HasField("track_descriptor")]
    assert "sd\\xffz" in names and comm in names
    # the scheduler data names the thread the same way
    assert {n for p in tr.packet for n in p.ftrace_events.compact_sched.intern_table} >= \
        {comm}
    assert any("\\x80\\ud800" in n for n in names)  # the journal, named by its source
    values = {a.string_value for p in tr.packet for a in p.track_event.debug_annotations}
    assert f"{comm}/100" in values

    # Trace Event JSON: strict UTF-8, no surrogate escapes
    cj = tmp_path / "t.json"
    cli("export", t, "--format", "chrome-json", "-o", str(cj))
    raw = cj.read_bytes()
    raw.decode("utf-8")
    assert b"\\ud" not in raw.replace(b"\\\\ud800", b"")
    doc = json.loads(raw)
    assert any(e.get("args", {}).get("name") == "sd\\xffz" for e in doc["traceEvents"])

    # the request listings
    listed = json.loads(cli("requests", t, "--json"))["requests"]
    assert {r["comm"] for r in listed} == {comm} and {r["disk"] for r in listed} == \
        {"sd\\xffz"}
    got = list(csv.DictReader(io.StringIO(cli("requests", t, "--csv"))))
    assert {r["comm"] for r in got} == {comm}
