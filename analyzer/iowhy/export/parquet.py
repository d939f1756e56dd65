"""`iowhy export --format parquet`: one Parquet file per table (tables.py) in a directory."""

from __future__ import annotations

import os
from typing import Any

from . import need
from .files import create_file, open_dir
from .tables import TABLES, run_tables


def write_parquet(trace: Any, out_dir: str) -> dict[str, int]:
    """Write runs.parquet, requests.parquet, ... into out_dir (created mode 0700 if
    missing; files mode 0600, never through a symlink). Returns rows per table."""
    pq = need("pyarrow.parquet")
    from ..progress import phase
    tables = run_tables(trace)
    phase("writing parquet")
    dfd = open_dir(out_dir)
    try:
        rows = {}
        for name in TABLES:
            with create_file(f"{name}.parquet", dir_fd=dfd) as f:
                pq.write_table(tables[name], f, compression="zstd")
            rows[name] = tables[name].num_rows
        return rows
    finally:
        os.close(dfd)
