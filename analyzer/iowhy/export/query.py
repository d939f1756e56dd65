"""`iowhy query 'SQL' RUN...`: SQL over many runs with DuckDB embedded.

A run is a trace file (.iowt, turned into tables in memory) or a directory written by
`iowhy export --format parquet` (its files opened by iowhy as they are named, never as
a pattern, and scanned in place); a dataset written by `--dataset DIR` holds many runs,
each table's files scanned together. The views `runs`, `requests`, `calls`, `offcpu`,
`journal` and `tasks` hold the rows of every given run (docs/parquet-schema.md);
`run_uuid` tells the runs apart. Once the views exist the connection is locked to them:
the query cannot read or write other files, change settings or load extensions.

The result is streamed: rows are fetched a batch at a time and written as they come, so
memory does not grow with the result (a text table takes its column widths from the
first batch).
"""

from __future__ import annotations

import contextlib
import csv
import json
import logging
import os
from typing import IO, Any, Callable, Iterator, Sequence

from ..cells import aligned, csv_cell, json_value, text_cell
from ..escape import printable
from ..names import utf8_text
from ..progress import phase
from . import arrow_on_heap, available, need
from .schema import BOOL, INT64, STRING, STRINGS, UINT64, column_types
from .tables import TABLES

# Tables an export of an older iowhy lacks: queried as empty, with their columns.
OPTIONAL_TABLES = {"attribution": "SELECT NULL::VARCHAR AS run_uuid, NULL::VARCHAR AS basis, "
                                  "NULL::VARCHAR AS category, NULL::VARCHAR AS served_by, "
                                  "NULL::BIGINT AS ns WHERE false"}

# DuckDB's name of each column type (schema.py), for the NULL columns of an older export.
SQL_TYPES = {STRING: "VARCHAR", INT64: "BIGINT", UINT64: "UBIGINT", BOOL: "BOOLEAN",
             STRINGS: "VARCHAR[]"}

log = logging.getLogger("iowhy")


def _select_all(name: str, table: Any, t: str) -> str:
    """The SELECT of a registered table `name` (table t of one run), with the columns an
    export of an older iowhy lacks (schema.py CHANGES) as NULL of their type."""
    have = set(table.schema.names)
    extra = "".join(f", NULL::{SQL_TYPES[ty]} AS {col}" for col, ty in column_types(t)
                    if col not in have)
    return f"SELECT *{extra} FROM {name}"


class QueryError(Exception):
    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def _export_dir_uuid(path: str) -> str:
    pq = need("pyarrow.parquet")
    f = os.path.join(path, "runs.parquet")
    if not os.path.isfile(f):
        raise QueryError(f"{path} is not an iowhy export directory (no runs.parquet)",
                         "give .iowt traces or directories written by "
                         "`iowhy export --format parquet`")
    try:
        md = pq.read_schema(f).metadata or {}
        t = pq.read_table(f, columns=["run_uuid"])
    except Exception as e:  # pyarrow raises several types for a damaged file
        raise QueryError(f"cannot read {f}: {str(e).splitlines()[0]}",
                         "export the trace again") from None
    if md.get(b"iowhy.schema") is None:
        raise QueryError(f"{f} was not written by iowhy export", "export the trace again")
    ids = t.column("run_uuid").to_pylist()
    return str(ids[0]) if ids else ""


def dataset_runs(path: str) -> dict[str, dict[str, str]]:
    """The runs of a dataset written by `iowhy export --format parquet --dataset`:
    run uuid -> table -> its file (TABLE/host=.../date=.../RUN_UUID.parquet). Files are
    found by walking the directories (symlinks not followed), never by a pattern; a
    run lacking a table's file is an error."""
    found: dict[str, dict[str, str]] = {}
    for t in TABLES:
        top = os.path.join(path, t)
        for d, dirs, files in os.walk(top):
            dirs.sort()
            for f in sorted(files):
                if f.endswith(".parquet") and not f.startswith("."):
                    found.setdefault(f[:-len(".parquet")], {})[t] = os.path.join(d, f)
    out: dict[str, dict[str, str]] = {}
    for u, tables in found.items():
        missing = [t for t in TABLES if t not in tables and t not in OPTIONAL_TABLES]
        if missing:
            raise QueryError(f"run {u} of the dataset {path} lacks "
                             f"{', '.join(missing)} (has {', '.join(sorted(tables))})",
                             "copy every table's file of a run, or remove them all")
        out[u] = tables
    return out


def is_dataset(path: str) -> bool:
    return os.path.isdir(os.path.join(path, "runs")) \
        and not os.path.exists(os.path.join(path, "runs.parquet"))


BATCH = 1000  # rows fetched from DuckDB at a time, and the rows a table's widths come from


def _datasets() -> Any:
    """pyarrow.dataset, Arrow's buffers from malloc (arrow_on_heap)."""
    arrow_on_heap()
    return need("pyarrow.dataset")


def connect(runs: Sequence[str], on_trace: Callable[[str, Any], None] | None = None) -> Any:
    """A DuckDB connection with the views over `runs`, locked to them; `on_trace` is
    called with each trace file's path and its Trace as it is read (the command says
    what each lost). DuckDB and pyarrow are imported once they are needed: after a
    trace's analysis (export.available), not beside it."""
    available("duckdb")
    available("pyarrow")
    from ..errors import load
    from .schema import arrow_schema
    from .tables import run_tables
    registered: list[tuple[str, Any]] = []  # (name, table), registered once all are read
    seen: dict[str, str] = {}
    parts: dict[str, list[str]] = {t: [] for t in TABLES}
    in_datasets: dict[str, list[str]] = {t: [] for t in TABLES}  # their files, by table
    for i, path in enumerate(runs):
        if os.path.isdir(path) and is_dataset(path):
            for u, files in dataset_runs(path).items():
                if u in seen:
                    log.warning("run %s of %s is also in %s: its rows are counted once",
                                u, path, seen[u])
                    continue
                seen[u] = path
                for t, f in files.items():
                    in_datasets[t].append(f)
            continue
        if os.path.isdir(path):
            u = _export_dir_uuid(path)
            files = {t: os.path.join(path, f"{t}.parquet") for t in TABLES}
            missing = [t for t, f in files.items() if not os.path.isfile(f)
                       and t not in OPTIONAL_TABLES]
            if missing:
                raise QueryError(f"{path} lacks {', '.join(m + '.parquet' for m in missing)}",
                                 "export the trace again")
            tables: dict[str, Any] = {}
            for t, f in files.items():
                if not os.path.isfile(f):  # an optional table an older export lacks
                    continue
                try:
                    # opened by its name as it is: DuckDB's own reader would take `*`,
                    # `?` and `[` in a directory's name as a pattern
                    tables[t] = _datasets().dataset(f, format="parquet")
                except Exception as e:  # pyarrow raises several types for a damaged file
                    raise QueryError(f"cannot read {f}: {str(e).splitlines()[0]}",
                                     "export the trace again") from None
        else:
            phase(f"reading {os.path.basename(path)}")
            tr = load(path)
            if on_trace is not None:
                on_trace(path, tr)
            tables = run_tables(tr, in_memory=True)
            u = tables["runs"].column("run_uuid")[0].as_py()
        if u in seen:
            log.warning("%s is the same run as %s (run %s): its rows are counted once",
                        path, seen[u], u)
            continue
        seen[u] = path
        for t, table in tables.items():
            name = f"_run{i}_{t}"
            registered.append((name, table))
            parts[t].append(_select_all(name, table, t))
        del tables
    pa = need("pyarrow")
    for t, paths in in_datasets.items():
        if paths:  # every dataset's files of the table as one scan, in the schema's columns
            try:
                table = _datasets().dataset(paths, format="parquet", schema=arrow_schema(pa, t))
            except Exception as e:  # pyarrow raises several types for a damaged file
                raise QueryError(f"cannot read the {t} files of the dataset: "
                                 f"{str(e).splitlines()[0]}", "export the runs again") from None
            registered.append((f"_datasets_{t}", table))
            parts[t].append(f"SELECT * FROM _datasets_{t}")
    con = need("duckdb").connect(":memory:")
    for name, table in registered:
        con.register(name, table)
    del registered
    for t in TABLES:
        body = " UNION ALL BY NAME ".join(parts[t]) or OPTIONAL_TABLES[t]
        con.execute(f"CREATE VIEW {t} AS {body}")
    con.execute("SET allowed_paths = ?", [[""]])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


EMPTY_HINT = "give one SQL statement, e.g. SELECT count(*) FROM requests"
VIEWS_HINT = ("the views are runs, requests, calls, offcpu, journal, tasks and attribution; "
              "their columns are in docs/parquet-schema.md")


def _failed(e: Exception) -> QueryError:
    first = (str(e).splitlines() or [""])[0]
    return QueryError(f"query failed: {first}", VIEWS_HINT)


@contextlib.contextmanager
def open_query(sql: str, runs: Sequence[str],
               on_trace: Callable[[str, Any], None] | None = None
               ) -> Iterator[tuple[list[str], Iterator[list[tuple]]]]:
    """(column names, the result in batches of rows): the batches are fetched as they are
    iterated, while the block runs. A query that is empty (only blanks or comments) or
    fails is a QueryError, also while the batches are fetched."""
    if not sql.strip():
        raise QueryError("the query is empty", EMPTY_HINT)
    con = connect(runs, on_trace)
    duckdb = need("duckdb")  # imported by connect, after the runs' analysis
    try:
        phase("query")
        try:
            cur = con.execute(sql)
        except duckdb.Error as e:
            raise _failed(e) from None
        if cur is None or cur.description is None:
            # nothing to run (comments only) or a statement with no result
            raise QueryError("the query has no result (is it only comments?)", EMPTY_HINT)
        cols = [str(d[0]) for d in cur.description]

        def batches() -> Iterator[list[tuple]]:
            while True:
                try:
                    rows = cur.fetchmany(BATCH)
                except duckdb.Error as e:
                    raise _failed(e) from None
                if not rows:
                    return
                yield rows
        yield cols, batches()
    finally:
        con.close()


def _limited(batches: Iterator[list[tuple]], limit: int | None,
             cut: list[bool]) -> Iterator[list[tuple]]:
    """The batches up to `limit` rows in all (None: all); cut[0] set when rows were left."""
    left = limit
    for b in batches:
        if left is not None:
            if left <= 0:
                cut[0] = True
                return
            if len(b) > left:
                b = b[:left]
                cut[0] = True
            left -= len(b)
        yield b
        if cut[0]:
            return


def write_table(out: IO[str], cols: list[str], batches: Iterator[list[tuple]]) -> int:
    """An aligned table, names made printable (a terminal reads it), widths from the first
    batch; returns the rows written."""
    n = 0
    widths: list[int] | None = None
    numeric: list[bool] = []

    def line(vals: list[str]) -> str:
        assert widths is not None
        return aligned(vals, widths, numeric) + "\n"
    for rows in batches:
        cells = [[printable(text_cell(v)) for v in r] for r in rows]
        if widths is None:
            numeric = [all(isinstance(r[i], (int, float)) or r[i] is None for r in rows) and
                       any(r[i] is not None for r in rows) for i in range(len(cols))]
            widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
            out.write(line([printable(c) for c in cols]) + line(["-" * w for w in widths]))
        out.write("".join(line(r) for r in cells))
        n += len(rows)
    if widths is None:  # no rows: the header alone
        numeric = [False] * len(cols)
        widths = [len(c) for c in cols]
        out.write(line([printable(c) for c in cols]) + line(["-" * w for w in widths]))
    out.write(f"({n} row{'s' if n != 1 else ''})\n")
    return n


def write_csv(out: IO[str], cols: list[str], batches: Iterator[list[tuple]]) -> int:
    w = csv.writer(out, lineterminator="\n")
    w.writerow([utf8_text(c) for c in cols])
    n = 0
    for rows in batches:
        w.writerows([csv_cell(v) for v in r] for r in rows)
        n += len(rows)
    return n


def write_json(out: IO[str], cols: list[str], batches: Iterator[list[tuple]]) -> int:
    """A JSON array of objects, as json.dumps(rows, indent=1) writes it, a batch at a time."""
    keys = [utf8_text(c) for c in cols]
    n = 0
    for rows in batches:
        text = json.dumps([{c: json_value(v) for c, v in zip(keys, r)} for r in rows],
                          indent=1, allow_nan=False)
        out.write(("[\n" if n == 0 else ",\n") + text[2:-2])
        n += len(rows)
    out.write("\n]\n" if n else "[]\n")
    return n


WRITERS = {"table": write_table, "csv": write_csv, "json": write_json}


def write_result(out: IO[str], fmt: str, cols: list[str], batches: Iterator[list[tuple]],
                 limit: int | None) -> tuple[int, bool]:
    """Write the result as `fmt` (table, csv, json), at most `limit` rows (None: all);
    (rows written, whether more were left)."""
    cut = [False]
    n = WRITERS[fmt](out, cols, _limited(batches, limit, cut))
    return n, cut[0]
