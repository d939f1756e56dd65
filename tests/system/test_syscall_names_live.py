"""Syscall names of a real `--syscalls all` recording against strace's, for the same
command: the generated table names every call strace names, and none is `syscall_N`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

from conftest import need

WORKLOAD = "ls / >/dev/null; sync; cat /etc/hostname >/dev/null; date >/dev/null"


def test_names_match_strace(bpf, iowhy_bin, tmp_path):
    need(shutil.which("strace") is not None, "needs strace")
    trace = tmp_path / "sc.iowt"
    # a private mount namespace with tracefs, for a host that has none mounted
    rec = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         "mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing;"
         ' exec "$@"', "sh", *iowhy_bin, "record", "-q", "--syscalls", "all", "-o", str(trace),
         "--", "sh", "-c", WORKLOAD], capture_output=True, text=True, timeout=120)
    assert rec.returncode == 0, rec.stderr
    info = subprocess.run([*iowhy_bin, "info", "--json", str(trace)], capture_output=True,
                          text=True, check=True)
    ours = {e["name"] for e in json.loads(info.stdout)["syscalls"]}
    out = tmp_path / "strace.txt"
    subprocess.run(["strace", "-f", "-c", "-U", "name", "-o", str(out), "--", "sh", "-c",
                    WORKLOAD], check=True, capture_output=True)
    theirs = {ln.strip() for ln in out.read_text().splitlines()[2:]
              if re.fullmatch(r"\s*[a-z_0-9]+\s*", ln) and ln.strip() != "total"}
    assert len(theirs) > 20, out.read_text()
    assert theirs <= ours, f"strace names iowhy lacks: {sorted(theirs - ours)}; " \
                           f"iowhy: {sorted(ours)}"
    assert not [n for n in ours if re.fullmatch(r"syscall_\d+", n)], sorted(ours)
