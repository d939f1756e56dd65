"""`iowhy export --format parquet`: one Parquet file per table (tables.py) in a directory,
or a run added to a dataset of many runs and hosts (`--dataset`)."""

from __future__ import annotations

import contextlib
import datetime
import os
import stat
from typing import Any

from . import need
from .files import output_dir
from .source import no_requests
from .tables import TABLES, iter_tables

# Hive's name for a partition whose value is NULL (pyarrow, Spark and Trino read it so).
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
# The characters a partition value keeps as they are; any other is %XX of its UTF-8 bytes,
# as Hive and Spark escape a partition value (pyarrow and Spark decode it).
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def one_row_group(table: Any) -> dict[str, int]:
    """pq.write_table's argument that keeps a run's rows in one row group (pyarrow
    splits at 1Mi rows by default): a file is one run, one row group."""
    return {"row_group_size": max(1, table.num_rows)}


def write_parquet(trace: Any, out_dir: str) -> dict[str, int]:
    """Write runs.parquet, requests.parquet, ... into out_dir (made mode 0700 if missing;
    files mode 0600, never through a symlink, all appearing together once written).
    Returns rows per table."""
    from .source import load_run
    model = load_run(trace)  # before the directory is made: the analysis may fail
    with output_dir(out_dir, [f"{name}.parquet" for name in TABLES]) as files:
        return write_tables(trace, model, files)


def write_tables(trace: Any, model: Any, files: list[Any]) -> dict[str, int]:
    """Each table of the run into its file (TABLES' order), one table built at a time
    and dropped once written (the model's requests with the requests table); rows per
    table."""
    pq = need("pyarrow.parquet")
    rows: dict[str, int] = {}
    out = iter(files)  # (zip would keep the last table until the next is built)
    for name, table in iter_tables(trace, model):
        pq.write_table(table, next(out), compression="zstd", **one_row_group(table))
        rows[name] = table.num_rows
        del table  # before the next is built
        if name == "requests":  # read by no other table
            model.requests = no_requests()
    return rows


def partition_value(value: str | None) -> str:
    """A Hive partition directory's value: NULL as HIVE_NULL, other characters than
    letters, digits, `.`, `_` and `-` as %XX (a host name needs none)."""
    if value is None or value == "":
        return HIVE_NULL
    return "".join(c if c in _PLAIN else
                   "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
                   for c in value)


def run_date(info: dict[str, Any]) -> str | None:
    """The UTC date (yyyy-mm-dd) the run started (source.run_info): its start in
    wall-clock time, else the trace file's creation time; None when neither is known."""
    ns = None
    if info.get("realtime_minus_monotonic_ns") is not None:
        ns = int(info["start_ns"]) + int(info["realtime_minus_monotonic_ns"])
    elif info.get("created_realtime_ns"):
        ns = int(info["created_realtime_ns"])
    if ns is None or ns <= 0:
        return None
    day = datetime.datetime.fromtimestamp(ns // 1_000_000_000, datetime.timezone.utc)
    return day.strftime("%Y-%m-%d")


def dataset_files(root: str, uuid: str, host: str | None, date: str | None
                  ) -> list[str]:
    """Where a run's tables go in the dataset at root:
    `TABLE/host=HOST/date=YYYY-MM-DD/RUN_UUID.parquet`, one directory tree per table (a
    Hive-partitioned table each, as Spark, Trino and ClickHouse read a directory)."""
    part = f"host={partition_value(host)}/date={partition_value(date)}"
    return [os.path.join(root, t, part, f"{uuid}.parquet") for t in TABLES]


def _make_dirs(root: str, rel: str, made: list[str]) -> None:
    """The directories `rel` under the existing directory root, made mode 0700 (given to
    the sudo user) where missing, each added to `made`; a symlink or non-directory on
    the way is refused."""
    from ..outfile import OutputError, _os_error, sudo_owner
    where = root
    for part in rel.split("/"):
        where = os.path.join(where, part)
        try:
            st = os.lstat(where)
        except FileNotFoundError:
            try:
                os.mkdir(where, 0o700)
                made.append(where)
                owner = sudo_owner()
                if owner is not None:
                    os.chown(where, *owner, follow_symlinks=False)
            except FileExistsError:
                pass
            except OSError as e:
                raise _os_error(where, e) from None
            st = os.lstat(where)
        if not stat.S_ISDIR(st.st_mode):
            what = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a directory"
            raise OutputError(f"cannot write into {where}: it is {what}",
                              "iowhy never writes through a symlink: give a dataset "
                              "of real directories")


def write_dataset(trace: Any, root: str) -> tuple[dict[str, int], str]:
    """Add the run to the dataset at root (made mode 0700 if missing): a new file per
    table (dataset_files), all appearing together once written, mode 0600, never
    through a symlink. Other runs' files are never opened for writing; a run already
    in the dataset is refused. (rows per table, the run's partition)."""
    from ..outfile import OutputError, make_output_dir, open_outputs
    from .files import check_dir
    from .source import load_run, run_info, run_uuid
    info = run_info(trace)
    uuid = run_uuid(trace)
    paths: list[str | os.PathLike[str]] = list(
        dataset_files(root, uuid, info["host"], run_date(info)))
    for p in paths:  # before the analysis: a run is added once
        if os.path.lexists(p):
            raise OutputError(f"run {uuid} is already in {root} ({os.path.relpath(p, root)})",
                              "each run is added once; remove its files first to add it "
                              "again")
    model = load_run(trace)
    check_dir(root)
    made: list[str] = []  # the directories made here, removed again if the run fails
    try:
        if not os.path.lexists(root):
            make_output_dir(root)
            made.append(root)
            os.chmod(root, 0o700)
        for p in paths:
            _make_dirs(root, os.path.relpath(os.path.dirname(p), root), made)
        with open_outputs(paths, root) as files:
            rows = write_tables(trace, model, files)
    except BaseException:
        for d in reversed(made):  # empty unless another run wrote there meanwhile
            with contextlib.suppress(OSError):
                os.rmdir(d)
        raise
    part = os.path.relpath(os.path.dirname(paths[0]), os.path.join(root, TABLES[0]))
    return rows, part
