"""What if: predict a recording's elapsed time on changed storage (`iowhy whatif`).

The recorded workload is replayed (whatif/replay.py) with what the trace proves kept:
each thread's order of syscalls and CPU bursts, which request or thread ended each of
its waits (the causal links of model/wakeups.py), when each request was submitted and
by whom; the devices' service is what changes, served by the emulated disk's model
(whatif/disk.py, a port of lab/emudisk.c checked against it) with barriers off, the
write cache off, another preset or a profile fitted from a trace (whatif/fit.py).
docs/whatif.md describes the model, its assumptions and what a trace cannot tell.

Kept free of numpy at import (like names.py): cli.py imports whatif.cli for every
command.
"""
