"""Device numbers: one encoding of (major, minor) as one integer key, the kernel's dev_t
(MKDEV: major << 20 | minor), for Python ints and numpy arrays alike; and the devices'
names as the trace's metadata gives them."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

MINOR_BITS = 20  # the kernel's MINORBITS
MINOR_MASK = (1 << MINOR_BITS) - 1


def dev_key(major: Any, minor: Any) -> Any:
    """major << 20 | minor: an int for ints, an int64 array for arrays."""
    if isinstance(major, (int, np.integer)) and isinstance(minor, (int, np.integer)):
        return (int(major) << MINOR_BITS) | int(minor)
    k = np.asarray(major).astype(np.int64)
    k <<= MINOR_BITS
    k |= np.asarray(minor)
    return k


def dev_pair(key: int) -> tuple[int, int]:
    """(major, minor) of a dev_key."""
    return int(key) >> MINOR_BITS, int(key) & MINOR_MASK


def fs_disks(fs: Mapping[str, Any]) -> list[tuple[int, int]]:
    """The whole disks a filesystem of META writes: its own, and its external log's
    (`log.device`: an XFS `logdev=`); those whose numbers META gives."""
    lg = fs.get("log")
    dv = lg.get("device") if isinstance(lg, Mapping) else None
    out = []
    for d in (fs, dv if isinstance(dv, Mapping) else {}):
        if d.get("disk_major") is not None and d.get("disk_minor") is not None:
            out.append((int(d["disk_major"]), int(d["disk_minor"])))
    return out


def described_devices(meta: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every device the metadata describes: the recorded ones (META `devices`), then
    those below them in the device stack (`lower_devices`)."""
    return [d for d in [*(meta.get("devices") or []), *(meta.get("lower_devices") or [])]
            if isinstance(d, Mapping)]


def described_names(meta: Mapping[str, Any]) -> list[str]:
    """The kernel names of the devices the metadata describes, their partitions and the
    devices of its filesystems (the names a jbd2 thread's comm carries)."""
    out: set[str] = set()
    for d in described_devices(meta):
        out.add(str(d.get("name") or ""))
        for p in d.get("partitions") or []:
            out.add(str((p.get("name") if isinstance(p, Mapping) else p) or ""))
    for f in meta.get("filesystems") or []:
        if isinstance(f, Mapping):
            out.add(str(f.get("disk") or ""))
            out.add(str(f.get("source") or "").rsplit("/", 1)[-1])
    out.discard("")
    return sorted(out)


def device_meta(meta: Mapping[str, Any], devices: Sequence[tuple[int, int]]
                ) -> list[Mapping[str, Any]]:
    """META's entry of each device ({} where META does not describe it)."""
    by_mm: dict[tuple[Any, Any], Mapping[str, Any]] = {}
    for d in described_devices(meta):
        try:
            by_mm[(int(d.get("major", -1)), int(d.get("minor", -1)))] = d
        except (TypeError, ValueError):
            continue
    return [by_mm.get((int(a), int(b)), {}) for a, b in devices]


def device_names(meta: Mapping[str, Any], devices: Sequence[tuple[int, int]]) -> list[str]:
    """The name of each device (the metadata's, else "major:minor")."""
    return [str(m.get("name") or f"{d[0]}:{d[1]}")
            for m, d in zip(device_meta(meta, devices), devices)]
