"""The short "where the time went" that `iowhy record` and `iowhy attach` print when
they stop: problems first, one line per category, the largest finding."""

from __future__ import annotations

from .analysis import AnalysisConfig, analyze
from .traceformat import read_trace

# Placement and locality are skipped: the short summary must be quick after a recording.
SHORT_CONFIG = AnalysisConfig(placement=False, locality=False, queue_depth_buckets=1,
                              max_findings=1)


def short_summary(path: str) -> str:
    """Text for the terminal; raises traceformat.TraceError for an unreadable trace."""
    tr = read_trace(path)
    try:
        result = analyze(tr, SHORT_CONFIG)
    except Exception as e:  # never lose the recording's exit to a summary bug
        return (f"iowhy: could not summarize {path} ({type(e).__name__}: {e}); "
                f"try `iowhy report {path}`")
    from .reports.terminal import render_where
    return render_where(result) + f"\n(full report: iowhy report {path})"
