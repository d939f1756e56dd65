"""Export of iowhy traces to other tools' formats (Parquet, Perfetto, Trace Event JSON)
and SQL over many runs (`iowhy query`). docs/export.md describes the commands,
docs/parquet-schema.md the tables.

pyarrow, duckdb and perfetto are an optional extra (`pip install 'iowhy[export]'`):
`need()` imports one or says in one line how to install it.
"""

from __future__ import annotations

import importlib
from typing import Any

PIP_NAMES = {"pyarrow": "pyarrow", "pyarrow.parquet": "pyarrow", "duckdb": "duckdb",
             "perfetto.trace_builder.proto_builder": "perfetto",
             "perfetto.protos.perfetto.trace.perfetto_trace_pb2": "perfetto"}


def need(module: str) -> Any:
    """Import an optional dependency, or raise the CLI's one-line error with a pip hint."""
    try:
        return importlib.import_module(module)
    except ImportError:
        from ..errors import UserError
        pkg = PIP_NAMES.get(module, module.split(".")[0])
        raise UserError(f"this needs the Python package {pkg}, which is not installed",
                        f"pip install 'iowhy[export]' (or pip install {pkg})") from None
