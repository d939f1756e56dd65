"""iowhy.syscall_table on its own: the table's shape, how a machine name chooses a table
(spellings, case, what is not a name), and numbers no table names. (The table against
this machine's headers, the generator and `info` naming calls by the trace's machine are
in test_syscalls.py.)"""

from __future__ import annotations

import os
import re

import pytest

from iowhy import syscall_table as st

ARCHES = ("x86_64", "aarch64")


def test_one_table_and_one_source_per_architecture():
    assert sorted(st.TABLES) == sorted(st.SOURCES) == sorted(ARCHES)
    assert set(st.ALIASES.values()) == set(ARCHES)
    for arch in ARCHES:
        assert st.ALIASES[arch] == arch  # the uname -m spelling maps to itself
        assert st.SOURCES[arch].startswith("Linux ")


@pytest.mark.parametrize("arch", ARCHES)
def test_a_table_maps_numbers_to_distinct_c_names(arch):
    table = st.TABLES[arch]
    assert len(table) > 250
    assert all(isinstance(nr, int) and 0 <= nr < 1024 for nr in table)
    assert all(re.fullmatch(r"[a-z_][a-z0-9_]*", name) for name in table.values())
    assert len(set(table.values())) == len(table)  # a name is one number on one machine


@pytest.mark.parametrize("spelling, arch", [
    ("x86_64", "x86_64"), ("amd64", "x86_64"), ("x86-64", "x86_64"), ("X86_64", "x86_64"),
    ("AMD64", "x86_64"), ("aarch64", "aarch64"), ("arm64", "aarch64"), ("ARM64", "aarch64"),
])
def test_every_spelling_chooses_its_table(spelling, arch):
    assert st.table_of(spelling) is st.TABLES[arch]


@pytest.mark.parametrize("machine", ["riscv64", "i686", "x86", "arm", " x86_64", "x86_64 "])
def test_a_machine_without_a_table_has_none_and_its_calls_are_numbers(machine):
    assert st.table_of(machine) is None
    assert st.name_of(74, machine) == "syscall_74"
    assert st.name_of(0, machine) == "syscall_0"


@pytest.mark.parametrize("arch", [None, "", 0, 12345, ["x86_64"]])
def test_anything_but_a_name_means_this_machine(arch, monkeypatch):
    monkeypatch.setattr(os, "uname", lambda: os.uname_result(
        ("Linux", "h", "6.1", "#1", "aarch64")))
    assert st.table_of(arch) is st.TABLES["aarch64"]
    assert st.name_of(82, arch) == "fsync"
    monkeypatch.setattr(os, "uname", lambda: os.uname_result(
        ("Linux", "h", "6.1", "#1", "s390x")))
    assert st.table_of(arch) is None
    assert st.name_of(82, arch) == "syscall_82"


@pytest.mark.parametrize("arch", ARCHES)
def test_numbers_the_headers_do_not_name(arch):
    table = st.TABLES[arch]
    gaps = [nr for nr in range(max(table)) if nr not in table]
    assert gaps, "both generic tables have holes (arm64 244-259, x86-64 335-423)"
    for nr in (gaps[0], gaps[-1], max(table) + 1, 10**6, -3):
        assert st.name_of(nr, arch) == f"syscall_{nr}"
    assert st.name_of(max(table), arch) == table[max(table)]
    assert st.name_of(min(table), arch) == table[min(table)]


def test_the_same_number_names_different_calls_on_each_machine():
    assert st.name_of(0, "x86_64") == "read" and st.name_of(0, "arm64") == "io_setup"
    assert st.name_of(63, "amd64") == "uname" and st.name_of(63, "aarch64") == "read"
    common = set(st.TABLES["x86_64"].values()) & set(st.TABLES["aarch64"].values())
    assert {"fsync", "fdatasync", "io_uring_enter", "openat"} <= common
