"""The lab's tools without a disk: `iowhy lab list` and `lab run`'s argument check, and
lab/workloads.py's command list (lab/validate.py: test_lab_validate.py)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any


from conftest import REPO
from iowhy.lab import scenarios


# -- the command (in-process: other tests run the CLI as a process) ------------------------

def _main(argv: list[str], capsys: Any) -> tuple[int, str, str]:
    """`iowhy ARGV` in-process: (exit status, stdout, stderr); argparse's exit too."""
    from iowhy.cli import main
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    return rc, out, err


def test_lab_list_names_every_scenario(capsys):
    rc, out, _ = _main(["lab", "list"], capsys)
    assert rc == 0
    names = [ln.split()[0] for ln in out.splitlines()[1:] if ln.strip()]  # header
    assert names == list(scenarios.SCENARIOS)
    for required in ("tar", "fsync-tar", "rmtree", "fsync-tasks-1", "fsync-tasks-8",
                     "fsync-tasks-32", "sqlite-full", "sqlite-off", "fio-seq", "fio-rand",
                     "wc-barrier", "wc-nobarrier", "wc-off"):
        assert required in names
    desc = scenarios.SCENARIOS["wc-nobarrier"].description
    assert "write through" in desc and "nobarrier" in desc


def test_lab_run_refuses_unknown_scenario(capsys):
    rc, _, err = _main(["lab", "run", "no-such-scenario"], capsys)
    assert rc == 2
    assert "unknown scenario" in err


def test_lab_run_without_the_emulated_disk_is_one_line(tmp_path, monkeypatch, capsys):
    """A checkout where the emulated disk was never built: one line naming the make
    target (it was an EmulatedDiskError traceback), before root is asked for."""
    monkeypatch.setenv("IOWHY_EMUDISK", str(tmp_path / "no-emudisk"))
    rc, _, err = _main(["lab", "run", "tar", "--out", str(tmp_path / "out")], capsys)
    assert rc == 1, err
    assert err == ("iowhy: the emulated disk (lab/emudisk) is not built (run `make "
                   "emudisk` in the iowhy checkout, which installs libfuse3-dev, or "
                   "`make install`; IOWHY_EMUDISK may name the binary)\n")
    assert not (tmp_path / "out").exists()


def test_workloads_lists_the_lab_workloads():
    p = subprocess.run([sys.executable, str(REPO / "lab" / "workloads.py"), "--help"],
                       capture_output=True, text=True, check=True)
    for name in ("untar", "untar-fsync", "untar-eatmydata", "rmtree", "fsync-tasks", "sqlite",
                 "fio-seq", "fio-rand"):
        assert name in p.stdout
