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
