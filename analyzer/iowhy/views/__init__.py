"""The views of the analysis, one module each: workload, device, queue depth, fsync,


commits, per-class figures, latency, placement, locality."""
