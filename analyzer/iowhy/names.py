"""Names the command line offers as choices, kept free of numpy: `iowhy record` builds
the whole parser and then stays the recorder's parent for the run, so whatever its
imports allocate is held while the workload runs."""

from __future__ import annotations

# Request classes (model/classify.py), in code order.
CLASS_NAMES: tuple[str, ...] = ("flush", "log", "metadata", "data", "read", "readahead",
                                "discard")

# What `iowhy hist --metric` can plot (analysis.metric_values).
METRICS: tuple[str, ...] = ("device", "queue", "total", "fsync", "commit", "seek")

# The attribution's categories: categories.py.


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


# A command line as a trace keeps it (docs/trace-format.md, VALIDATION: strings of at most
# CMD_LIMIT characters, lists of at most CMD_LIMIT entries; the kernel takes arguments of
# up to 128 KiB and far more of them): a longer argument is cut to CMD_ARG_KEEP and ends
# in "[cut: N bytes in all]" (characters, for text already decoded), and past CMD_LIMIT
# arguments the rest are replaced by one "[cut: N arguments in all]". The recorder does
# the same for RECORDER (probes/rec_writer.c, json_argv), and the reader for a trace
# written before.
CMD_LIMIT = 65_536
CMD_ARG_KEEP = 65_000


def clip_command(argv: list[str], unit: str = "characters", entries: int = CMD_LIMIT
                 ) -> tuple[list[str], bool]:
    """(the command line as a trace keeps it, at most `entries` long, whether anything
    was cut)."""
    out = []
    cut = len(argv) > entries
    for a in argv[:entries - 1] if cut else argv:
        if len(a) > CMD_LIMIT:
            a = f"{a[:CMD_ARG_KEEP]}[cut: {len(a)} {unit} in all]"
            cut = True
        out.append(a)
    if len(argv) > entries:
        out.append(f"[cut: {len(argv)} arguments in all]")
    return out, cut
