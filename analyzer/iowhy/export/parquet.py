"""`iowhy export --format parquet`: one Parquet file per table (tables.py) in a directory."""

from __future__ import annotations

from typing import Any

from . import need
from .files import output_dir
from .tables import TABLES, run_tables


def write_parquet(trace: Any, out_dir: str) -> dict[str, int]:
    """Write runs.parquet, requests.parquet, ... into out_dir (made mode 0700 if missing;
    files mode 0600, never through a symlink, all appearing together once written).
    Returns rows per table."""
    pq = need("pyarrow.parquet")
    from ..progress import phase
    tables = run_tables(trace)
    phase("writing parquet")
    with output_dir(out_dir, [f"{name}.parquet" for name in TABLES]) as files:
        for name, f in zip(TABLES, files):
            pq.write_table(tables[name], f, compression="zstd")
    return {name: tables[name].num_rows for name in TABLES}
