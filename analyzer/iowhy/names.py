"""Names the command line offers as choices, kept free of numpy: `iowhy record` builds
the whole parser and then stays the recorder's parent for the run, so whatever its
imports allocate is held while the workload runs."""

from __future__ import annotations

# Request classes (model/classify.py), in code order.
CLASS_NAMES: tuple[str, ...] = ("flush", "log", "metadata", "data", "read", "readahead",
                                "discard")

# What `iowhy hist --metric` can plot (analysis.metric_values).
METRICS: tuple[str, ...] = ("device", "queue", "total", "fsync", "commit", "seek")

# The attribution's categories, level one of the causal attribution (model/wakeups.py),
# in code order; a trace without wakeup links has the first seven and "wait-other" only
# (views/workload.py).
ATTRIBUTION_CATEGORIES: tuple[str, ...] = (
    "cpu", "runqueue", "barrier", "log", "metadata", "data", "read", "throttle", "helper-cpu",
    "helper-runqueue", "sleep", "external", "wait-other")


def utf8_text(value: object) -> str:
    """A name as text every writer can encode: the bytes that are not UTF-8 (carried as
    the lone surrogates U+DC80..U+DCFF, Python's surrogateescape) as `\\xNN`, as the
    terminal shows them, and any other lone surrogate as `\\uNNNN`; everything else,
    control characters included, unchanged (they are valid UTF-8: each format quotes
    them its own way). What every exporter (Parquet, Perfetto, Trace Event JSON, the
    SQL views, CSV and JSON listings) writes for a name (docs/export.md)."""
    s = value if isinstance(value, str) else str(value)
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        pass
    return "".join(c if not 0xD800 <= ord(c) <= 0xDFFF else
                   f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else
                   f"\\u{ord(c):04x}" for c in s)


def comm_text(raw: bytes) -> str:
    """A task name field (NUL-padded bytes) as utf8_text shows it."""
    return utf8_text(bytes(raw).split(b"\0", 1)[0].decode("utf-8", "surrogateescape"))
