"""`make` installs and builds only what building and running iowhy needs; the packages
and the emulated disk that only the tests, the demo, the lab or the gallery need come
with those targets (read from `make -n -B`, which prints every command and runs none).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import REPO

BUILD = ["clang", "llvm", "libbpf-dev", "bpftool", "libelf-dev", "zlib1g-dev", "libzstd-dev",
         "pkg-config", "gcc", "python3-venv", "python3-dev"]
ONLY_TESTS_OR_LAB = ["chromium", "linux-source-6.1", "fio", "sqlite3", "eatmydata", "fuse3",
                     "libfuse3-dev", "bpftrace", "strace", "xfsprogs", "btrfs-progs"]


def dry(target: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("make missing")
    p = subprocess.run(["make", "-n", "-B", target], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def packages(out: str) -> set[str]:
    """Every package name a dpkg-query loop of the recipe would check."""
    found: set[str] = set()
    for m in re.finditer(r"for p in ([^;]*); do dpkg-query", out):
        found.update(m.group(1).split())
    return found


def test_make_all_installs_and_builds_only_what_iowhy_needs():
    out = dry("all")
    pk = packages(out)
    assert set(BUILD) <= pk, pk
    assert not pk & set(ONLY_TESTS_OR_LAB), pk & set(ONLY_TESTS_OR_LAB)
    assert "emudisk" not in out


@pytest.mark.parametrize("target,wanted", [
    ("test", ["chromium", "fio", "sqlite3", "eatmydata", "fuse3", "libfuse3-dev", "bpftrace",
              "strace", "xfsprogs", "btrfs-progs"]),
    ("demo", ["linux-source-6.1", "xfsprogs", "fuse3", "libfuse3-dev"]),
    ("lab", ["linux-source-6.1", "fio", "sqlite3", "eatmydata", "fuse3", "libfuse3-dev"]),
    ("gallery", ["linux-source-6.1", "chromium", "fuse3", "libfuse3-dev"]),
])
def test_targets_that_need_more_install_it_and_build_the_emulated_disk(target, wanted):
    out = dry(target)
    pk = packages(out)
    assert set(BUILD) <= pk
    assert set(wanted) <= pk, set(wanted) - pk
    assert "lab/emudisk.c" in out
