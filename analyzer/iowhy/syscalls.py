"""Syscall names of the numbers the recorder stores, for the trace's architecture
(tables generated from the kernel's UAPI headers into syscall_table.py)."""

from __future__ import annotations


from .syscall_table import name_of


def syscall_name(nr: int, arch: str | None = None) -> str:
    """Name of syscall `nr` on `arch` (the trace's `machine`; None: this machine)."""
    if nr == -2:  # --syscalls sync via raw_tp: outside a traced call, registers unread
        return "untraced-syscall"
    if nr < 0:
        return "none"
    return name_of(nr, arch)
