"""`--cgroup PATH`: the cgroup v2 a recording follows (META `cgroup`).

A cgroup v2 directory is named by its path and its id, the kernel's cgroup id: on 64-bit
kernels the inode number of its directory (what the probes compare, and what
`bpf_get_current_cgroup_id()` and systemd's `ControlGroupId` give). The filesystem of
the path tells cgroup v2 (`cgroup2`) from a cgroup v1 hierarchy (`cgroup`), which iowhy
refuses: its tasks' membership is per controller, and the probes follow v2 only.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from .errors import EXIT_USAGE, UserError

HINT = "give a directory under the cgroup2 mount, e.g. /sys/fs/cgroup/system.slice/NAME.service"


def _fstype(st_dev: int, mountinfo: str) -> str | None:
    """The filesystem type of the mount whose device is st_dev (None: none listed)."""
    want = f"{os.major(st_dev)}:{os.minor(st_dev)}"
    try:
        with open(mountinfo, "rb") as f:
            lines = os.fsdecode(f.read()).splitlines()
    except OSError:
        return None
    for line in lines:
        head, sep, tail = line.partition(" - ")
        a, b = head.split(), tail.split()
        if sep and len(a) >= 3 and b and a[2] == want:
            return b[0]
    return None


ROOT_ID = 1  # the hierarchy's root cgroup: every process on the system


def cgroup_target(path: str, force: bool = False,
                  mountinfo: str = "/proc/self/mountinfo") -> dict[str, Any]:
    """META `cgroup` for --cgroup PATH: {"path": its real path, "id": its cgroup id}, or
    a UserError (one line) when PATH is not a cgroup v2 directory, or is the hierarchy's
    root (every process on the system) without `force`."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise UserError(f"--cgroup {path}: {e.strerror}", HINT, EXIT_USAGE) from None
    kind = _fstype(st.st_dev, mountinfo)
    if kind == "cgroup":
        raise UserError(f"--cgroup {path} is in a cgroup v1 hierarchy; iowhy follows cgroup v2 "
                        "only", "give the same group under the cgroup2 mount (see `mount -t "
                        "cgroup2`)", EXIT_USAGE)
    if kind != "cgroup2" or not stat.S_ISDIR(st.st_mode):
        raise UserError(f"--cgroup {path} is not a cgroup v2 directory", HINT, EXIT_USAGE)
    if st.st_ino == ROOT_ID and not force:
        raise UserError(f"refusing --cgroup {path}: it is the root of the cgroup hierarchy, "
                        "which holds every process on the system",
                        "give a cgroup below it, or --force with attach to record that",
                        EXIT_USAGE)
    return {"path": os.path.realpath(path), "id": st.st_ino}
