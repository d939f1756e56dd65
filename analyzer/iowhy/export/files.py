"""Writing the exporters' outputs the way a root tool must (outfile.py's rules): never
through a symlink, mode 0600, given to the sudo user, and nothing under the real name
until it is complete: a file is written to a temporary name in its directory and
renamed; a Parquet directory's files are renamed into place together once all are
written, and a new directory is made under a temporary name and renamed whole. A write
that fails (a full disk) is one line, and leaves nothing behind."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from typing import IO, Iterator

from ..outfile import OutputError, _os_error, open_output, open_outputs, sudo_owner


@contextlib.contextmanager
def output_file(path: str) -> Iterator[IO]:
    """A binary file object writing PATH, which appears there when the block ends; a
    failing write inside the block is an OutputError and leaves nothing."""
    try:
        with open_output(path) as f:
            yield f
    except OSError as e:
        raise _os_error(path, e) from None


def check_dir(path: str) -> None:
    """Before the analysis: PATH is an existing real directory, or can be made."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise OutputError(f"cannot create directory {path}: {parent} does not exist",
                              "choose another output directory with -o") from None
        if not os.access(parent, os.W_OK):
            raise OutputError(f"cannot create directory {path}: {parent} is not writable",
                              "choose another output directory with -o") from None
        return
    if not stat.S_ISDIR(st.st_mode):
        what = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a directory"
        raise OutputError(f"cannot write into {path}: it is {what}",
                          "give a new or existing real directory with -o")


@contextlib.contextmanager
def output_dir(path: str, names: list[str]) -> Iterator[list[IO]]:
    """Binary file objects for NAMES in the directory PATH (made mode 0700 if missing),
    which appear there together when the block ends."""
    check_dir(path)
    made = None
    where = path
    if not os.path.lexists(path):
        parent, base = os.path.split(os.path.abspath(path))
        made = os.path.join(parent, f".{base[:200]}.{secrets.token_hex(4)}.tmp")
        try:
            os.mkdir(made, 0o700)
            owner = sudo_owner()
            if owner is not None:
                os.chown(made, *owner, follow_symlinks=False)
        except OSError as e:
            raise _os_error(path, e) from None
        where = made
    try:
        with open_outputs([os.path.join(where, n) for n in names], path) as files:
            yield files
        if made is not None:
            try:
                os.rename(made, path)
            except OSError as e:
                raise _os_error(path, e) from None
            made = None
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
