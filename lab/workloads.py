#!/usr/bin/env python3
"""Workloads with known syscall counts, runnable by name.

    python3 lab/workloads.py NAME [ARGS...]

Each prints nothing on success and exits 0, so tests and benchmarks can compare what
iowhy recorded with what the workload did. Standard library only (runs with the
system python3, outside the venv).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

CACHE = Path(os.environ.get("IOWHY_CACHE", "/var/cache/iowhy"))
KERNEL_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")


def _write_sync(path: str, nbytes: int, call: str) -> None:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"x" * nbytes)
        if call == "fsync":
            os.fsync(fd)
        elif call == "fdatasync":
            os.fdatasync(fd)
    finally:
        os.close(fd)


def fsyncmix(a: argparse.Namespace) -> int:
    """N fsync and M fdatasync calls, the last fdatasync made by a forked child."""
    calls = ["fsync"] * a.fsync + ["fdatasync"] * a.fdatasync
    in_child = calls.pop() if calls else None
    for i, call in enumerate(calls):
        _write_sync(f"{a.dir}/f{i}", a.bytes, call)
    if in_child:
        pid = os.fork()
        if pid == 0:
            try:
                _write_sync(f"{a.dir}/child", a.bytes, in_child)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)
    return 0


def callmix(a: argparse.Namespace) -> int:
    """One call of each fsync-family member, and K O_DSYNC plus K O_SYNC writes."""
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    path = f"{a.dir}/mix"
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    os.write(fd, b"m" * 8192)
    os.sync()
    if libc.syncfs(fd) != 0:
        raise OSError(ctypes.get_errno(), "syncfs")
    # sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE|WRITE|WAIT_AFTER)
    if libc.sync_file_range(fd, ctypes.c_longlong(0), ctypes.c_longlong(0), 7) != 0:
        raise OSError(ctypes.get_errno(), "sync_file_range")
    with mmap.mmap(fd, 8192) as m:
        m[0:4] = b"mmap"
        m.flush()  # msync(MS_SYNC)
    os.close(fd)
    for flag in (os.O_DSYNC, os.O_SYNC):
        fd = os.open(f"{a.dir}/sync{flag}", os.O_CREAT | os.O_WRONLY | flag, 0o644)
        for _ in range(a.k):
            os.write(fd, b"s" * 4096)
        os.close(fd)
    return 0


def wait_then_fsync(a: argparse.Namespace) -> int:
    """Wait for GO_FILE to appear (so a tracer can attach), then fsync K files in this
    process and K in a new child: the attach test's target."""
    Path(a.pidfile).write_text(str(os.getpid()))
    deadline = time.monotonic() + a.timeout
    while not os.path.exists(a.go_file):
        if time.monotonic() > deadline:
            return 3
        time.sleep(0.02)
    for i in range(a.k):
        _write_sync(f"{a.dir}/p{i}", 4096, "fsync")
    pid = os.fork()
    if pid == 0:
        try:
            for i in range(a.k):
                _write_sync(f"{a.dir}/c{i}", 4096, "fsync")
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def fsync_loop(a: argparse.Namespace) -> int:
    """Append and fsync until SECONDS have passed (records a steady stream)."""
    if a.pidfile:
        Path(a.pidfile).write_text(str(os.getpid()))
    end = time.monotonic() + a.seconds
    fd = os.open(f"{a.dir}/loop", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    n = 0
    while time.monotonic() < end:
        os.write(fd, b"y" * 1024)
        os.fsync(fd)
        n += 1
    os.close(fd)
    return 0


def fsync_tasks(a: argparse.Namespace) -> int:
    """N processes, each appending 1 KiB and fsyncing its own file K times."""
    pids = []
    for t in range(a.tasks):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                fd = os.open(f"{a.dir}/task{t}", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
                for _ in range(a.k):
                    os.write(fd, b"z" * 1024)
                    os.fsync(fd)
                os.close(fd)
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    rc = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        rc = rc or os.waitstatus_to_exitcode(status)
    return rc


def _new_temp(out: Path):
    """A new temporary file next to OUT (renamed over it once complete): O_EXCL and
    O_NOFOLLOW, so a planted symlink is never followed, and a name of this process's
    own, so two preparations at once never write the same file."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    return tmp, os.fdopen(fd, "wb")


def kernel_tar(nfiles: int) -> Path:
    """An uncompressed tar of the first NFILES members of Debian's kernel tarball (or a
    generated tree of the same shape when linux-source is not installed), cached."""
    CACHE.mkdir(parents=True, exist_ok=True)
    tag = "all" if nfiles <= 0 else str(nfiles)
    if KERNEL_TARBALL.exists():
        out = CACHE / f"linux-6.1-{tag}.tar"
        if not out.exists():
            tmp, f = _new_temp(out)
            files = 0
            with tarfile.open(KERNEL_TARBALL, "r|xz") as src, f, \
                    tarfile.open(fileobj=f, mode="w") as dst:
                for m in src:
                    if m.isreg():
                        dst.addfile(m, src.extractfile(m))
                        files += 1
                    elif m.isdir() or m.issym():
                        dst.addfile(m)
                    if 0 < nfiles <= files:
                        break
            tmp.rename(out)
        return out
    out = CACHE / f"generated-{tag}.tar"
    if not out.exists():
        import io
        import random
        rnd = random.Random(42)
        tmp, f = _new_temp(out)
        with f, tarfile.open(fileobj=f, mode="w") as dst:
            n = nfiles if nfiles > 0 else 70000
            for i in range(n):
                # Kernel-like sizes: most files a few KiB, a long tail.
                size = int(min(rnd.lognormvariate(8.5, 1.3), 2 << 20))
                ti = tarfile.TarInfo(f"linux/dir{i // 40:04d}/file{i:06d}.c")
                ti.size = size
                dst.addfile(ti, io.BytesIO(b"/* generated */\n".ljust(size, b"x")))
        tmp.rename(out)
    return out


def untar(a: argparse.Namespace) -> int:
    """GNU tar extracting the first N files (plain: the kernel decides when to write)."""
    src = kernel_tar(a.files)
    os.execvp("tar", ["tar", "-xf", str(src), "-C", a.dir])
    return 127


def untar_fsync(a: argparse.Namespace) -> int:
    """The same files, each fsynced before close (what star does by default)."""
    src = kernel_tar(a.files)
    made: set[str] = set()  # directories already there: one mkdir each, not one per file
    with tarfile.open(src, "r") as t:
        for m in t:
            dest = os.path.join(a.dir, m.name)
            if m.isdir():
                if dest not in made:
                    os.makedirs(dest, exist_ok=True)
                    made.add(dest)
            elif m.isreg():
                parent = os.path.dirname(dest)
                if parent not in made:
                    os.makedirs(parent, exist_ok=True)
                    made.add(parent)
                f = t.extractfile(m)
                data = f.read() if f else b""
                fd = os.open(dest, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
                os.write(fd, data)
                os.fsync(fd)
                os.close(fd)
    return 0


def untar_eatmydata(a: argparse.Namespace) -> int:
    """untar-fsync under eatmydata: its fsync calls become no-ops (GNU tar's behaviour)."""
    os.execvp("eatmydata", ["eatmydata", sys.executable, os.path.abspath(__file__),
                            "untar-fsync", a.dir, "--files", str(a.files)])
    return 127


def _syncfs(path: str) -> None:
    """syncfs(2) on the filesystem holding PATH (only that one, unlike sync(2))."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
    finally:
        os.close(fd)


def rmtree(a: argparse.Namespace) -> int:
    """rm -rf of a tree (extracted beforehand), then syncfs of its filesystem."""
    parent = os.path.dirname(os.path.abspath(a.tree))
    rc = subprocess.run(["rm", "-rf", a.tree]).returncode
    _syncfs(parent)
    return rc


def sqlite(a: argparse.Namespace) -> int:
    """K autocommit INSERTs (one transaction each) by the sqlite3 CLI into DIR/lab.db,
    with PRAGMA synchronous=FULL or OFF (rollback journal). K=0 only creates the table."""
    lines = [f"PRAGMA synchronous={a.synchronous};",
             "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v TEXT);"]
    lines += [f"INSERT INTO t(v) VALUES('row {i:06d} {'s' * 100}');" for i in range(a.k)]
    p = subprocess.run(["sqlite3", "-bail", os.path.join(a.dir, "lab.db")],
                       input="\n".join(lines) + "\n", text=True)
    return p.returncode


def _fio(a: argparse.Namespace, rw: str, create_only: bool) -> int:
    cmd = ["fio", "--name=lab", f"--directory={a.dir}", "--filename=fio.dat",
           f"--rw={rw}", f"--bs={a.bs}", f"--size={a.size}", "--ioengine=psync",
           "--direct=1", "--overwrite=1", "--randrepeat=1", "--random_generator=lfsr",
           "--output-format=terse", "--output=/dev/null"]
    if create_only:
        cmd.append("--create_only=1")
    else:
        cmd.append(f"--number_ios={a.ios}")
    return subprocess.run(cmd).returncode


def fio_seq(a: argparse.Namespace) -> int:
    """fio: IOS O_DIRECT writes of BS, sequential through DIR/fio.dat (every seek 0).
    --layout only lays the file out (setup, before measuring)."""
    return _fio(a, "write", a.layout)


def fio_rand(a: argparse.Namespace) -> int:
    """fio: IOS O_DIRECT writes of BS at uniformly random BS-aligned offsets of the
    SIZE-byte DIR/fio.dat, each block at most once (mean |seek| = SIZE/3)."""
    return _fio(a, "randwrite", a.layout)


def prepare(a: argparse.Namespace) -> int:
    """Build the cached tarball outside any measurement."""
    print(kernel_tar(a.files))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="name", required=True)
    s = sub.add_parser("fsyncmix", help=fsyncmix.__doc__)
    s.add_argument("dir")
    s.add_argument("fsync", type=int)
    s.add_argument("fdatasync", type=int)
    s.add_argument("--bytes", type=int, default=8192)
    s.set_defaults(func=fsyncmix)
    s = sub.add_parser("callmix", help=callmix.__doc__)
    s.add_argument("dir")
    s.add_argument("--k", type=int, default=3)
    s.set_defaults(func=callmix)
    s = sub.add_parser("wait-then-fsync", help=wait_then_fsync.__doc__)
    s.add_argument("dir")
    s.add_argument("go_file")
    s.add_argument("pidfile")
    s.add_argument("--k", type=int, default=3)
    s.add_argument("--timeout", type=float, default=60)
    s.set_defaults(func=wait_then_fsync)
    s = sub.add_parser("fsync-loop", help=fsync_loop.__doc__)
    s.add_argument("dir")
    s.add_argument("seconds", type=float)
    s.add_argument("--pidfile")
    s.set_defaults(func=fsync_loop)
    s = sub.add_parser("fsync-tasks", help=fsync_tasks.__doc__)
    s.add_argument("dir")
    s.add_argument("tasks", type=int)
    s.add_argument("k", type=int)
    s.set_defaults(func=fsync_tasks)
    s = sub.add_parser("rmtree", help=rmtree.__doc__)
    s.add_argument("tree")
    s.set_defaults(func=rmtree)
    s = sub.add_parser("sqlite", help=sqlite.__doc__)
    s.add_argument("dir")
    s.add_argument("k", type=int)
    s.add_argument("--synchronous", choices=("FULL", "OFF", "NORMAL", "EXTRA"), default="FULL")
    s.set_defaults(func=sqlite)
    for name, fn in (("fio-seq", fio_seq), ("fio-rand", fio_rand)):
        s = sub.add_parser(name, help=fn.__doc__)
        s.add_argument("dir")
        s.add_argument("--ios", type=int, default=256)
        s.add_argument("--bs", default="4k")
        s.add_argument("--size", default="32m")
        s.add_argument("--layout", action="store_true")
        s.set_defaults(func=fn)
    for name, fn in (("untar", untar), ("untar-fsync", untar_fsync),
                     ("untar-eatmydata", untar_eatmydata), ("prepare", prepare)):
        s = sub.add_parser(name, help=fn.__doc__)
        if name != "prepare":
            s.add_argument("dir")
        s.add_argument("--files", type=int, default=5000, help="first N files; 0 = all")
        s.set_defaults(func=fn)
    a = p.parse_args(argv)
    return int(a.func(a))


if __name__ == "__main__":
    sys.exit(main())
