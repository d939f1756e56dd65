"""Writing output files the way a root tool must: never through a symlink, mode 0600."""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO


class OutputError(Exception):
    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def open_dir(path: str) -> int:
    """Create directory `path` (mode 0700) or open the existing one; refuse a symlink or
    anything but a directory. Returns an O_DIRECTORY descriptor."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise OutputError(f"cannot create directory {path}: {e.strerror}",
                          "choose another output directory with -o") from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        st = os.lstat(path)
        what = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a directory"
        raise OutputError(f"cannot write into {path}: it is {what}",
                          "give a new or existing real directory with -o") from None
    return fd


def create_file(path: str, dir_fd: int | None = None) -> BinaryIO:
    """Create or truncate a regular file, mode 0600, never following a symlink."""
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        fd = os.open(path, flags, 0o600, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OutputError(f"cannot write {path}: it is a symlink",
                              "remove it or choose another output path") from None
        raise OutputError(f"cannot write {path}: {e.strerror}",
                          "choose another output path with -o") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OutputError(f"cannot write {path}: it is not a regular file",
                          "choose another output path with -o")
    os.ftruncate(fd, 0)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "wb")
