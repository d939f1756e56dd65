"""Every file iowhy writes from Python goes through here: `report --html`, `compare
--html`, `hist --png`, and the lab's reports, ground truth copies, run files and
gallery pages. (The trace itself is written by the recorder, probes/recorder.c.)

The rules, for a tool that runs as root:

* Never follow a symlink at the output path, and never write into an existing file that
  is not a regular file (a FIFO, a device such as /dev/null, a directory, a socket):
  such a path is refused with one line, before any analysis starts.
* The content goes to a new temporary file in the output's directory, created with
  O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC and mode 0600; it is written, fsynced, then
  renamed over the output path. An existing regular file is thus replaced atomically
  (readers see the old file or the new one, never a half-written one; no `.old` copy
  is kept), and a failed write leaves the old file as it was.
* Every output is mode 0600, whatever the umask: reports hold command lines, paths and
  mount points. `chmod` it afterwards to share it.
* Run as root through sudo (SUDO_UID, and SUDO_GID when set), the file is given to the
  user who ran sudo, so that user can read, move and delete it.

Errors (a missing, unwritable, read-only or full directory) end in one line through
OutputError, a UserError of iowhy.cli: `iowhy: cannot write X: <why> (<hint>)`.
Standard output gets the same treatment (`stdout_error`, `flush_stdout`); a closed pipe
is left to the caller, which exits quietly.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import sys
from typing import IO, Iterator, Optional, Union

from .errors import EXIT_FAIL, UserError

MODE = 0o600

_KIND = (
    (stat.S_ISLNK, "a symlink"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)

_HINTS = {
    errno.ENOSPC: "free some space or choose another directory",
    errno.EDQUOT: "the disk quota is exhausted: free some space or choose another directory",
    errno.EROFS: "that filesystem is read-only: choose another directory",
    errno.EACCES: "choose a directory you can write to",
    errno.EPERM: "choose a directory you can write to",
    errno.ENOENT: "choose an output path in an existing directory",
    errno.ENOTDIR: "choose an output path in an existing directory",
}


class OutputError(UserError):
    """An output file or standard output cannot be written (one line, exit 1)."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message, hint, EXIT_FAIL)


def _kind(mode: int) -> str:
    for test, name in _KIND:
        if test(mode):
            return name
    return "not a regular file"


def _os_error(path: str, e: OSError) -> OutputError:
    why = e.strerror or str(e)
    return OutputError(f"cannot write {path}: {why}",
                       _HINTS.get(e.errno or 0, "choose another output path"))


def _split(path: Union[str, os.PathLike]) -> tuple[str, str, str]:
    """(the path as given, its directory, its last component)."""
    p = os.fspath(path)
    if not isinstance(p, str):
        p = os.fsdecode(p)
    d, name = os.path.split(p)
    if name in ("", ".", ".."):
        raise OutputError(f"cannot write {p}: not a file name", "give a file name")
    return p, d or ".", name


def _open_dir(p: str, d: str) -> int:
    try:
        return os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise OutputError(f"cannot write {p}: directory {d} does not exist",
                          "choose an output path in an existing directory") from None
    except NotADirectoryError:
        raise OutputError(f"cannot write {p}: {d} is not a directory",
                          "choose an output path in an existing directory") from None
    except OSError as e:
        raise _os_error(p, e) from None


def _refuse_existing(p: str, name: str, dfd: int) -> None:
    """Refuse a path that exists and is not a regular file (a symlink is never followed)."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as e:
        raise _os_error(p, e) from None
    if not stat.S_ISREG(st.st_mode):
        kind = _kind(st.st_mode)
        hint = ("iowhy never writes through a symlink: give the real path"
                if kind == "a symlink" else "give the path of a regular file")
        raise OutputError(f"refusing to write {p}: it is {kind}", hint)


def _is_symlink(name: str, dfd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def sudo_owner() -> Optional[tuple[int, int]]:
    """(uid, gid) of the user who ran sudo, when running as root through sudo; else None.
    A malformed SUDO_UID is ignored; without SUDO_GID the group stays root's."""
    if os.geteuid() != 0:
        return None
    try:
        uid = int(os.environ.get("SUDO_UID", ""))
    except ValueError:
        return None
    if not 0 < uid < 2**32 - 1:
        return None
    try:
        gid = int(os.environ.get("SUDO_GID", ""))
    except ValueError:
        gid = -1
    if not 0 <= gid < 2**32 - 1:
        gid = -1
    return uid, gid


def _new_temp(p: str, name: str, dfd: int) -> tuple[int, str]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = f".{name[:200]}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, flags, MODE, dir_fd=dfd)
        except FileExistsError:
            continue
        except OSError as e:
            raise _os_error(p, e) from None
        return fd, tmp
    raise OutputError(f"cannot write {p}: no free temporary name in its directory",
                      "clean up .*.tmp files there")


def check_target(path: Union[str, os.PathLike]) -> None:
    """Before a long analysis: is PATH a file iowhy may write? Its directory must exist
    and take a new file (one is created and removed: this catches a read-only
    filesystem, missing permission, no inodes), the path must not be a symlink or a
    non-regular file, and the filesystem must have some free space."""
    p, d, name = _split(path)
    dfd = _open_dir(p, d)
    try:
        _refuse_existing(p, name, dfd)
        fd, tmp = _new_temp(p, name, dfd)
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        try:
            st = os.statvfs(dfd)
        except OSError:
            return
        free = st.f_bfree if os.geteuid() == 0 else st.f_bavail
        if st.f_blocks and free == 0:
            raise _os_error(p, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    finally:
        os.close(dfd)


class _Target:
    """The open temporary file of one output, committed by rename. replace_symlink: a
    symlink at the path is replaced by the file (never followed) instead of refused."""

    def __init__(self, path: Union[str, os.PathLike], replace_symlink: bool = False) -> None:
        self.path, d, self.name = _split(path)
        self.dfd = _open_dir(self.path, d)
        self.tmp: Optional[str] = None
        try:
            if not (replace_symlink and _is_symlink(self.name, self.dfd)):
                _refuse_existing(self.path, self.name, self.dfd)
            self.fd, self.tmp = _new_temp(self.path, self.name, self.dfd)
            os.fchmod(self.fd, MODE)        # whatever the umask
            owner = sudo_owner()
            if owner is not None:
                os.fchown(self.fd, *owner)
        except OSError as e:
            self.discard()
            raise _os_error(self.path, e) from None
        except BaseException:
            self.discard()
            raise

    def commit(self, f: Optional[IO] = None) -> None:
        """Flush F (the file object over our fd, if any), fsync, rename into place."""
        try:
            if f is not None:
                f.flush()
            os.fsync(self.fd)
            if f is not None:
                f.close()           # closes self.fd too
            else:
                os.close(self.fd)
            self.fd = -1
            # rename() replaces whatever is at the name without following it; a directory
            # that appeared there meanwhile makes it fail
            assert self.tmp is not None
            os.rename(self.tmp, self.name, src_dir_fd=self.dfd, dst_dir_fd=self.dfd)
            self.tmp = None
            with contextlib.suppress(OSError):
                os.fsync(self.dfd)
        except OSError as e:
            self.discard(f)
            raise _os_error(self.path, e) from None
        os.close(self.dfd)
        self.dfd = -1

    def discard(self, f: Optional[IO] = None) -> None:
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()
            self.fd = -1
        if getattr(self, "fd", -1) >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        if self.tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.tmp, dir_fd=self.dfd)
            self.tmp = None
        if self.dfd >= 0:
            os.close(self.dfd)
            self.dfd = -1


@contextlib.contextmanager
def open_output(path: Union[str, os.PathLike], binary: bool = True,
                keep_on_error: bool = False, replace_symlink: bool = False) -> Iterator[IO]:
    """A file object writing PATH by the rules above: the file appears at PATH when the
    block ends. After an exception inside the block it does not (an old file at PATH
    stays), unless KEEP_ON_ERROR (a log worth keeping either way). Errors of the block
    itself pass through unchanged; failing to create or commit the file raises
    OutputError. replace_symlink: a symlink at PATH is replaced (never followed)."""
    t = _Target(path, replace_symlink)
    try:
        f: IO = (os.fdopen(t.fd, "wb") if binary
                 else os.fdopen(t.fd, "w", encoding="utf-8"))
    except BaseException:
        t.discard()
        raise
    try:
        yield f
    except BaseException:
        if keep_on_error:
            with contextlib.suppress(OutputError):
                t.commit(f)
        else:
            t.discard(f)
        raise
    t.commit(f)


@contextlib.contextmanager
def open_outputs(paths: list[Union[str, os.PathLike]], what: str) -> Iterator[list[IO]]:
    """Binary file objects writing PATHS by the rules above, which appear at their paths
    together once the block ends: each is renamed into place only after every one is
    written and fsynced. After an exception inside the block none does (old files stay);
    a write that fails (a full disk) is an OutputError naming WHAT (the output as the
    user gave it)."""
    targets: list[_Target] = []
    files: list[IO] = []
    try:
        for p in paths:
            t = _Target(p)
            targets.append(t)
            files.append(os.fdopen(t.fd, "wb"))
        try:
            yield files
            for t, f in zip(targets, files):
                f.flush()
                os.fsync(t.fd)
        except OSError as e:
            raise _os_error(what, e) from None
        for t, f in zip(targets, files):
            t.commit(f)
    except BaseException:
        for i, t in enumerate(targets):
            if t.tmp is not None:
                t.discard(files[i] if i < len(files) else None)
        raise


@contextlib.contextmanager
def open_new(path: Union[str, os.PathLike], binary: bool = True) -> Iterator[IO]:
    """A new file at PATH itself, written in place as it goes (a log read while it
    grows, or after a crash): O_CREAT|O_EXCL|O_NOFOLLOW, so anything already at PATH,
    a symlink included, is refused; mode 0600, given to the sudo user like the rest."""
    p, d, name = _split(path)
    dfd = _open_dir(p, d)
    try:
        _refuse_existing(p, name, dfd)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, MODE, dir_fd=dfd)
        except FileExistsError:
            raise OutputError(f"refusing to write {p}: it exists",
                              "remove it first") from None
        except OSError as e:
            raise _os_error(p, e) from None
    finally:
        os.close(dfd)
    try:
        os.fchmod(fd, MODE)
        owner = sudo_owner()
        if owner is not None:
            os.fchown(fd, *owner)
        f: IO = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
    except OSError as e:
        os.close(fd)
        raise _os_error(p, e) from None
    with f:
        yield f


def make_output_dir(path: Union[str, os.PathLike]) -> None:
    """mkdir -p PATH; the directories it creates are given to the sudo user (so that
    user can remove what iowhy wrote there)."""
    p = os.path.abspath(os.fspath(path))
    missing = []
    while not os.path.lexists(p):
        missing.append(p)
        p = os.path.dirname(p)
    owner = sudo_owner()
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o755)
            if owner is not None:
                os.chown(d, *owner, follow_symlinks=False)
        except FileExistsError:
            pass
        except OSError as e:
            raise _os_error(str(path), e) from None
    if not os.path.isdir(path):
        raise OutputError(f"cannot write into {path}: not a directory",
                          "choose another output directory")


def write_output(path: Union[str, os.PathLike], data: Union[str, bytes]) -> None:
    """Write DATA (text is UTF-8) to PATH by the rules above."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with open_output(path, binary=True) as f:
        try:
            f.write(raw)
        except OSError as e:
            raise _os_error(_split(path)[0], e) from None


def copy_output(src: Union[str, os.PathLike], path: Union[str, os.PathLike]) -> None:
    """Copy the regular file SRC to PATH by the rules above."""
    with open(src, "rb") as s, open_output(path, binary=True) as f:
        while True:
            buf = s.read(1 << 20)
            if not buf:
                break
            try:
                f.write(buf)
            except OSError as e:
                raise _os_error(_split(path)[0], e) from None


# -- standard output ------------------------------------------------------------------------

def silence_stdout() -> None:
    """After stdout failed (a full disk, a closed pipe): point fd 1 at /dev/null, so the
    interpreter's own flush at exit neither fails nor prints a second error."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass


_STDOUT_HINTS = {
    errno.ENOSPC: "redirect it to a filesystem with free space",
    errno.EDQUOT: "redirect it to a filesystem with free space",
    errno.EROFS: "redirect it to a writable filesystem",
}


def stdout_error(e: OSError) -> OutputError:
    """The one-line error for a failed write to standard output."""
    silence_stdout()
    return OutputError(f"cannot write to standard output: {e.strerror or e}",
                       _STDOUT_HINTS.get(e.errno or 0, "redirect it somewhere writable"))


class _GuardedStream:
    """sys.stdout whose write and flush errors (a full disk, an I/O error) become one
    OutputError line, wherever the print is; BrokenPipeError passes as it is."""

    def __init__(self, stream: IO) -> None:
        self._stream = stream

    def write(self, s: str) -> int:
        try:
            return self._stream.write(s)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise stdout_error(e) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise stdout_error(e) from None

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """Within the block, a failing stdout raises OutputError (see _GuardedStream)."""
    real = sys.stdout
    if real is None:        # started with fd 1 closed: print() writes nothing
        yield
        return
    sys.stdout = _GuardedStream(real)
    try:
        yield
    finally:
        if isinstance(sys.stdout, _GuardedStream):
            sys.stdout = real


def flush_stdout() -> None:
    """Flush stdout; OutputError when it cannot take the data (BrokenPipeError passes)."""
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise stdout_error(e) from None


def write_stdout(text: str) -> None:
    """print(TEXT) and flush, with a failure turned into OutputError (BrokenPipeError
    passes: the caller exits quietly)."""
    if sys.stdout is None:
        raise stdout_error(OSError(errno.EBADF, os.strerror(errno.EBADF)))
    try:
        sys.stdout.write(text)
        sys.stdout.write("\n")
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise stdout_error(e) from None
