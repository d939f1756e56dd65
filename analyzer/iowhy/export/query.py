"""`iowhy query 'SQL' RUN...`: SQL over many runs with DuckDB embedded.

A run is a trace file (.iowt, turned into tables in memory) or a directory written by
`iowhy export --format parquet` (read in place). The views `runs`, `requests`, `calls`,
`offcpu`, `journal` and `tasks` hold the rows of every given run (docs/parquet-schema.md);
`run_uuid` tells the runs apart. Once the views exist the connection is locked to them:
the query cannot read or write other files, change settings or load extensions.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
from typing import Any, Sequence

from ..progress import phase
from . import need
from .tables import TABLES

# Tables an export of an older iowhy lacks: queried as empty, with their columns.
OPTIONAL_TABLES = {"attribution": "SELECT NULL::VARCHAR AS run_uuid, NULL::VARCHAR AS basis, "
                                  "NULL::VARCHAR AS category, NULL::VARCHAR AS served_by, "
                                  "NULL::BIGINT AS ns WHERE false"}

log = logging.getLogger("iowhy")


class QueryError(Exception):
    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


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


def connect(runs: Sequence[str]) -> Any:
    """A DuckDB connection with the six views over `runs`, locked to them."""
    duckdb = need("duckdb")
    pa = need("pyarrow")
    from ..errors import load
    from .tables import run_tables
    con = duckdb.connect(":memory:")
    seen: dict[str, str] = {}
    parts: dict[str, list[str]] = {t: [] for t in TABLES}
    allowed: list[str] = []
    for i, path in enumerate(runs):
        if os.path.isdir(path):
            u = _export_dir_uuid(path)
            files = {t: os.path.join(os.path.abspath(path), f"{t}.parquet") for t in TABLES}
            missing = [t for t, f in files.items() if not os.path.isfile(f)
                       and t not in OPTIONAL_TABLES]
            if missing:
                raise QueryError(f"{path} lacks {', '.join(m + '.parquet' for m in missing)}",
                                 "export the trace again")
        else:
            phase(f"reading {os.path.basename(path)}")
            tr = load(path)
            tables = run_tables(tr)
            u = tables["runs"].column("run_uuid")[0].as_py()
        if u in seen:
            log.warning("%s is the same run as %s (run %s): its rows are counted once",
                        path, seen[u], u)
            continue
        seen[u] = path
        for t in TABLES:
            if os.path.isdir(path):
                if not os.path.isfile(files[t]):  # an optional table an older export lacks
                    continue
                allowed.append(files[t])
                parts[t].append(f"SELECT * FROM read_parquet({_sql_str(files[t])})")
            else:
                name = f"_run{i}_{t}"
                con.register(name, tables[t])
                parts[t].append(f"SELECT * FROM {name}")
    for t in TABLES:
        body = " UNION ALL BY NAME ".join(parts[t]) or OPTIONAL_TABLES[t]
        con.execute(f"CREATE VIEW {t} AS {body}")
    con.execute("SET allowed_paths = ?", [allowed or [""]])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    del pa
    return con


def run_query(sql: str, runs: Sequence[str]) -> tuple[list[str], list[tuple]]:
    duckdb = need("duckdb")
    con = connect(runs)
    try:
        phase("query")
        cur = con.execute(sql)
        if cur.description is None:
            return [], []
        cols = [d[0] for d in cur.description]
        return cols, cur.fetchall()
    except duckdb.Error as e:
        raise QueryError(f"query failed: {str(e).splitlines()[0]}",
                         "the views are runs, requests, calls, offcpu, journal and tasks; "
                         "their columns are in docs/parquet-schema.md") from None
    finally:
        con.close()


def _cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)):
        return ",".join(_cell(x) for x in v)
    return str(v)


def render_table(cols: list[str], rows: list[tuple]) -> str:
    cells = [[_cell(v) for v in r] for r in rows]
    numeric = [all(isinstance(r[i], (int, float)) or r[i] is None for r in rows) and
               any(r[i] is not None for r in rows) for i in range(len(cols))]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]

    def line(vals: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(vals, widths, numeric)).rstrip()
    out = [line(cols), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def render_csv(cols: list[str], rows: list[tuple]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow(["" if v is None else _cell(v) for v in r])
    return buf.getvalue().rstrip("\n")


def _jsonable(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (int, float, str, bool)):
        return v
    return str(v)


def render_json(cols: list[str], rows: list[tuple]) -> str:
    return json.dumps([{c: _jsonable(v) for c, v in zip(cols, r)} for r in rows], indent=1)
