"""A fresh machine has neither tracefs nor debugfs mounted: the recorder mounts tracefs
itself (as perf does), says so once, and when it cannot, says so in one line.

Each test runs in its own private mount namespace (`unshare -m`) where every tracefs and
debugfs mount has been unmounted first; the host's mounts are never touched.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import need, recorder_path

pytestmark = pytest.mark.bpf

MOUNTED = "iowhy: mounted tracefs at /sys/kernel/tracing"
FIX = "mount -t tracefs nodev /sys/kernel/tracing"

# Unmount every tracefs and debugfs mount in this namespace, deepest first, check that
# none is left, run the setup line $1 (may be empty), then the command.
FRESH = r"""
set -e
findmnt -rn -t tracefs,debugfs -o TARGET | awk '{ print length($0), $0 }' | sort -rn \
    | cut -d' ' -f2- | while read -r m; do umount "$(printf '%b' "$m")"; done
if findmnt -rn -t tracefs,debugfs >/dev/null; then echo "still mounted" >&2; exit 99; fi
eval "$1"
shift
exec "$@"
"""


def fresh(cmd: list[str], setup: str = "") -> subprocess.CompletedProcess:
    need(shutil.which("unshare") is not None, "unshare missing")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c",
                           FRESH, "fresh", setup, *cmd],
                          capture_output=True, text=True, timeout=120)


def fresh_after(cmd: list[str], check: str) -> subprocess.CompletedProcess:
    """Run cmd in a fresh namespace, then `check` (a shell line) in the same namespace."""
    need(shutil.which("unshare") is not None, "unshare missing")
    script = FRESH.replace('exec "$@"', '"$@"; rc=$?; ' + check + '; exit $rc')
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c",
                           script, "fresh", "", *cmd],
                          capture_output=True, text=True, timeout=120)


def test_dry_run_mounts_tracefs(bpf, iowhy_bin):
    p = fresh_after([*iowhy_bin, "record", "--dry-run"],
                    "findmnt -rn -t tracefs -o TARGET >&2")
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert lines[0] == MOUNTED, p.stderr
    assert p.stderr.count(MOUNTED) == 1, p.stderr
    # Nothing else on stderr but findmnt's answer: no libbpf noise, no failed attach.
    assert lines[1:] == ["/sys/kernel/tracing"], p.stderr
    assert "attached" in p.stdout and "skipped" not in p.stdout, p.stdout


def test_record_mounts_tracefs_and_records_an_fsync(bpf, iowhy_bin, tmp_path):
    out = tmp_path / "fresh.iowt"
    p = fresh([*iowhy_bin, "record", "-q", "-o", str(out), "--", "dd", "if=/dev/zero",
               f"of={tmp_path / 'f'}", "bs=64k", "count=4", "conv=fsync", "status=none"])
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines()[0] == MOUNTED, p.stderr
    assert p.stderr.count(MOUNTED) == 1, p.stderr
    info = json.loads(subprocess.run([*iowhy_bin, "info", "--json", str(out)],
                                     capture_output=True, text=True, check=True).stdout)
    assert info["records"]["fsync"] >= 1, info["records"]
    assert info["probes"]["sys_enter_fsync"] == "tracepoint", info["probes"]
    assert info["stop_reason"] == "workload-exit"


def test_tracefs_under_debugfs_is_used_as_it_is(bpf, iowhy_bin):
    """Only debugfs mounted (tracefs appears under it on first access): nothing to mount."""
    p = fresh(
        ["bash", "-c", f"{' '.join(iowhy_bin)} record --dry-run && "
                       "(findmnt -rn -o FSTYPE /sys/kernel/tracing || echo none) >&2"],
        setup="mount -t debugfs nodev /sys/kernel/debug")
    assert p.returncode == 0, p.stderr
    assert MOUNTED not in p.stderr, p.stderr
    assert p.stderr.strip() == "none", p.stderr
    assert "skipped" not in p.stdout, p.stdout


@pytest.mark.parametrize("how", ["record", "dry-run", "recorder"])
def test_cannot_mount_tracefs_one_line(bpf, iowhy_bin, tmp_path, how):
    """Without CAP_SYS_ADMIN (still root, with CAP_BPF and CAP_PERFMON) the mount is
    refused: one line naming the cause and the fix, before anything else is tried."""
    need(shutil.which("setpriv") is not None, "setpriv missing")
    out = tmp_path / "never.iowt"
    cmd = {"record": [*iowhy_bin, "record", "-o", str(out), "--", "true"],
           "dry-run": [*iowhy_bin, "record", "--dry-run"],
           "recorder": [str(recorder_path()), "-o", str(out), "--", "true"]}[how]
    p = fresh(["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", *cmd])
    assert p.returncode == 1, (p.returncode, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("iowhy: failed to mount tracefs"), lines[0]
    assert "Operation not permitted" in lines[0] and FIX in lines[0], lines[0]
    assert p.stdout == ""
    assert list(tmp_path.iterdir()) == [], "no file written"
