"""iowhy's lab: workloads, the emulated disk with ground truth, and the seed scenarios."""
