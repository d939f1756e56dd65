"""`iowhy import`: other tools' captures (blktrace binary, ftrace text) as iowhy traces."""
