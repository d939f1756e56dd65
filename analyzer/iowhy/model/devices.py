"""Device numbers: one encoding of (major, minor) as one integer key, the kernel's dev_t
(MKDEV: major << 20 | minor), for Python ints and numpy arrays alike."""

from __future__ import annotations

from typing import Any, Mapping

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
