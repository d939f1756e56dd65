"""The opening of a shell script that captures with a tracefs instance of its own (system
tests): tracefs mounted if it is not (a fresh machine does not mount it), an instance
named by the shell's PID, torn down on exit whatever happens, the monotonic clock (the
recorder's), a buffer of BUFFER_KB per CPU, tracing still off. The script goes on by
enabling its events (`$I/events/...`) and `echo 1 > $I/tracing_on`."""

from __future__ import annotations


def preamble(buffer_kb: int) -> str:
    return rf"""
set -e
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T
I=$T/instances/iowhy-test-$$
mkdir $I
trap 'echo 0 > $I/tracing_on; echo 0 > $I/events/enable; rmdir $I' EXIT
echo 0 > $I/tracing_on
echo mono > $I/trace_clock
echo {buffer_kb} > $I/buffer_size_kb
"""
