"""Syscall names: the generated table (analyzer/iowhy/syscall_table.py) against the
kernel's UAPI headers of this machine, and the trace's recorded machine choosing it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iowhy import syscall_table
from iowhy.syscalls import syscall_name
from iowhy.cli import main
from tracebuilder import Trace, trailer

REPO = Path(__file__).resolve().parents[2]
GEN = REPO / "tools" / "gen_syscall_table.py"
MACHINE = os.uname().machine
NOT_CALLS = ("__NR_syscalls", "__NR_arch_specific_syscall")


def native_syscalls() -> dict[str, int]:
    """__NR_<name> -> number, from this machine's own <asm/unistd.h> through the C
    preprocessor (independent of the generator's header choice and arm64 switches)."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None or not Path("/usr/include/asm-generic/unistd.h").exists():
        pytest.skip("needs a C compiler and linux-libc-dev (the kernel's UAPI headers)")
    p = subprocess.run([cc, "-E", "-dM", "-x", "c", "-"], input="#include <asm/unistd.h>\n",
                       capture_output=True, text=True, check=True)
    defs = dict(re.findall(r"^#define (__NR3264_\w+|__NR_\w+) (.+)$", p.stdout, re.M))
    out = {}
    for name, val in defs.items():
        if not name.startswith("__NR_") or name in NOT_CALLS:
            continue
        while val in defs:  # __NR_fcntl -> __NR3264_fcntl -> 25
            val = defs[val]
        out[name[len("__NR_"):]] = int(val.strip("()"), 0)
    return out


def test_every_syscall_of_this_machine_has_its_name():
    if syscall_table.table_of(MACHINE) is None:
        pytest.skip(f"no table for {MACHINE} (only x86_64 and aarch64)")
    calls = native_syscalls()
    assert len(calls) > 250, "the headers define too few syscalls to be the real table"
    wrong = {nr: (name, syscall_name(nr)) for name, nr in calls.items()
             if syscall_name(nr) != name}
    assert not wrong, f"numbers named differently from the headers: {wrong}"
    # nothing beyond the headers: the table is exactly this machine's syscalls
    assert set(syscall_table.table_of(MACHINE)) == set(calls.values())


def test_known_numbers_on_both_architectures():
    for arch in ("x86_64", "amd64"):
        assert [syscall_table.name_of(n, arch) for n in (74, 75, 162, 0, 1, 257, 230)] == \
            ["fsync", "fdatasync", "sync", "read", "write", "openat", "clock_nanosleep"]
    for arch in ("aarch64", "arm64"):
        assert [syscall_table.name_of(n, arch) for n in (82, 83, 81, 63, 64, 56, 79, 25)] == \
            ["fsync", "fdatasync", "sync", "read", "write", "openat", "newfstatat", "fcntl"]
    # the 64-bit generic table has no old-style calls
    assert "open" not in syscall_table.TABLES["aarch64"].values()
    assert syscall_table.name_of(100_000, "x86_64") == "syscall_100000"
    assert syscall_table.name_of(74, "riscv64") == "syscall_74"  # no table: number only


def test_negative_numbers_keep_their_meaning():
    assert syscall_name(-2) == "untraced-syscall"
    assert syscall_name(-1) == "none"
    assert syscall_name(74, "x86_64") == "fsync"
    assert syscall_name(82, "aarch64") == "fsync"
    # a machine field that is not a name: this machine's table
    assert syscall_name(0, 12345) == syscall_table.name_of(0)  # type: ignore[arg-type]


def test_committed_table_is_what_the_headers_give():
    """`make syscall-table` regenerates the module; this fails when it would change it
    (new headers: regenerate and commit)."""
    native_syscalls()  # skips without compiler/headers
    p = subprocess.run([sys.executable, str(GEN), "--check"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_generator_reads_a_header_tree(tmp_path):
    """The generator on a tiny header tree: x86-64 defines as written, arm64 through the
    preprocessor with its switches (renameat only under __ARCH_WANT_RENAMEAT, the
    __NR3264_ names under their 64-bit names)."""
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("needs a C compiler")
    inc = tmp_path / "include"
    (inc / "asm").mkdir(parents=True)
    (inc / "asm-generic").mkdir()
    (inc / "linux").mkdir()
    (inc / "asm" / "unistd_64.h").write_text(
        "#define __NR_read 0\n#define __NR_fsync 74\n")
    (inc / "asm-generic" / "unistd.h").write_text(
        "#include <asm/bitsperlong.h>\n"
        "#define __NR3264_fcntl 25\n#define __NR_fsync 82\n"
        "#ifdef __ARCH_WANT_RENAMEAT\n#define __NR_renameat 38\n#endif\n"
        "#ifdef __ARCH_WANT_SYNC_FILE_RANGE2\n#define __NR_sync_file_range2 84\n#endif\n"
        "#if __BITS_PER_LONG == 64\n#define __NR_fcntl __NR3264_fcntl\n"
        "#else\n#define __NR_fcntl64 __NR3264_fcntl\n#endif\n"
        "#define __NR_syscalls 451\n")
    (inc / "linux" / "version.h").write_text(
        "#define LINUX_VERSION_MAJOR 9\n#define LINUX_VERSION_PATCHLEVEL 8\n"
        "#define LINUX_VERSION_SUBLEVEL 7\n")
    out = tmp_path / "table.py"
    subprocess.run([sys.executable, str(GEN), "--include", str(inc), "-o", str(out)],
                   check=True)
    ns: dict = {}
    exec(compile(out.read_text(), str(out), "exec"), ns)
    assert ns["TABLES"] == {"x86_64": {0: "read", 74: "fsync"},
                            "aarch64": {25: "fcntl", 38: "renameat", 82: "fsync"}}
    assert ns["SOURCES"]["x86_64"].startswith("Linux 9.8.7 ")
    assert ns["name_of"](82, "arm64") == "fsync"
    # without the x86-64 header the table already in the output is kept
    (inc / "asm" / "unistd_64.h").unlink()
    p = subprocess.run([sys.executable, str(GEN), "--include", str(inc), "-o", str(out),
                        "--check"], capture_output=True, text=True)
    assert p.returncode == 0 and "table kept" in p.stderr


def _trace(path: Path, machine: str | None) -> str:
    m: dict = {"devices": [], "filesystems": []}
    if machine is not None:
        m["machine"] = machine
    t = Trace(path, m, {"start_ns": 1000, "command": ["x"], "pid": 1})
    t.add("syscall", [{"syscall_nr": 82, "count": 3, "total_ns": 300},
                      {"syscall_nr": 74, "count": 1, "total_ns": 100}])
    return t.close(trailer(2000))


@pytest.mark.parametrize("machine, names", [
    ("aarch64", ["fsync", "signalfd4"]),  # arm64: 82 fsync, 74 signalfd4
    ("x86_64", ["rename", "fsync"]),
    (None, None),  # no machine recorded: this machine's table
])
def test_info_names_syscalls_by_the_traces_machine(tmp_path, capsys, machine, names):
    path = _trace(tmp_path / "t.iowt", machine)
    assert main(["info", "--json", path]) == 0
    got = [e["name"] for e in json.loads(capsys.readouterr().out)["syscalls"]]
    if names is None:
        names = [syscall_table.name_of(82), syscall_table.name_of(74)]
    assert got == names
