"""Export of iowhy traces to other tools' formats (Parquet, Perfetto, Trace Event JSON)
and SQL over many runs (`iowhy query`). docs/export.md describes the commands,
docs/parquet-schema.md the tables.

pyarrow, duckdb and perfetto are an optional extra (`pip install 'iowhy[export]'`;
`make install` puts them into its private tree unless given `EXTRAS=`): `need()` imports
one or says in one line how to install it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Any

PIP_NAMES = {"pyarrow": "pyarrow", "pyarrow.parquet": "pyarrow", "duckdb": "duckdb",
             "perfetto.trace_builder.proto_builder": "perfetto",
             "perfetto.protos.perfetto.trace.perfetto_trace_pb2": "perfetto"}


def installed_by_make() -> bool:
    """Whether this iowhy runs from the private tree of `make install`
    (PREFIX/lib/iowhy/python), which pip cannot reach."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../iowhy
    return here.replace(os.sep, "/").endswith("/lib/iowhy/python/iowhy")


def need(module: str) -> Any:
    """Import an optional dependency, or raise the CLI's one-line error with a hint that
    reaches the tree iowhy runs from."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise _missing(module) from None


def _missing(module: str) -> Exception:
    from ..errors import UserError
    pkg = PIP_NAMES.get(module, module.split(".")[0])
    hint = ("this iowhy was installed by `make install EXTRAS=`: run `make install` "
            "(EXTRAS=export, the default) from the iowhy source"
            if installed_by_make() else
            f"pip install 'iowhy[export]' (or pip install {pkg})")
    return UserError(f"this needs the Python package {pkg}, which is not installed", hint)


def available(module: str) -> None:
    """need()'s check without the import (a top-level package: finding a submodule
    imports its package): a command refuses at once, and imports the package only
    when it needs it, after the analysis (source.load_run gives the memory it freed
    back first): the libraries (pyarrow, DuckDB: 30-70 MiB) then add to what the
    analysis kept, not to its peak."""
    if importlib.util.find_spec(module) is None:
        raise _missing(module)


def arrow_on_heap() -> bool:
    """Arrow's buffers from malloc (pyarrow's system pool), not from its own allocator:
    after memory.tune_allocator() glibc keeps the memory the analysis freed, and the
    tables are then carved from it instead of from new pages beside it. For the CLI
    (a process that exits after the export), before any Arrow buffer is made; False
    when pyarrow is not installed or glibc does not keep freed memory."""
    from ..memory import heap_kept
    if not heap_kept():
        return False
    # Arrow's C++ code (the Parquet writer's buffers) takes its own default pool, which
    # it chooses from this variable when first asked, after pyarrow is imported.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    try:
        pa = importlib.import_module("pyarrow")
    except ImportError:
        return False
    pa.set_memory_pool(pa.system_memory_pool())
    return True
