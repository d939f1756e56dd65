"""`kill -9` of `iowhy lab run` of a causal scenario leaves nothing behind: what those
scenarios add to a run (a second emulated disk, a loop device on a file of the first
one and its mount, the attached workload, the background writer) is in the run's ledger
and undone by its guardian (lab/labstate.py), last made first.

The harness is tests/lab/test_lab_kill.py's (a private mount namespace per run, the
loop devices and daemons found by their backing file and PID under tmp_path).
"""

from __future__ import annotations

import time

import pytest

from test_lab_kill import WAIT_S, KilledRun, _gone, killed_run  # noqa: F401,F811

pytestmark = pytest.mark.lab

# scenario: (what the ledger holds while it records, disks, loop devices, mounts under
# the work directory: FUSE and filesystem per disk, plus the upper filesystem)
EXPECTED = {
    "loop-stack": (["dir", "daemon", "loop", "mount", "loop", "mount", "proc"], 1, 2, 3),
    "tar-a-to-b": (["dir", "daemon", "loop", "dir", "daemon", "loop", "mount", "mount",
                    "proc"], 2, 2, 4),
    "idle-thread": (["dir", "daemon", "loop", "mount", "proc", "proc"], 1, 1, 2),
    "sleep-bg": (["dir", "daemon", "loop", "mount", "proc", "proc"], 1, 1, 2),
}


def _wait_recording(run: KilledRun, n_proc: int) -> None:
    def ready() -> bool:
        if "recording" not in run.log() and "attaching" not in run.log():
            return False
        led = run.ledger()
        return sum(i["kind"] == "proc" for i in led["items"]) >= n_proc
    run.wait_for(ready, "the recording")


@pytest.mark.parametrize("scenario", list(EXPECTED))
def test_kill_9_of_a_causal_scenario_is_cleaned_up_by_the_guardian(
        killed_run, scenario):  # noqa: F811 (the fixture imported above)
    from iowhy.lab import labstate
    run: KilledRun = killed_run
    kinds, disks, loops, mounts = EXPECTED[scenario]
    run.start(scenario)
    _wait_recording(run, kinds.count("proc"))
    led = run.ledger()
    assert [i["kind"] for i in led["items"]] == kinds, led
    daemons = [i for i in led["items"] if i["kind"] == "daemon"]
    assert len(daemons) == disks
    assert all(labstate.is_alive(d["pid"], d["start"]) for d in daemons)
    assert len(run.loops()) == loops and len(run.mounts()) == mounts, (
        run.loops(), run.mounts())
    run.kill()

    deadline = time.monotonic() + WAIT_S
    while (not all(_gone(run, d["pid"], d["start"]) for d in daemons)
           or list(run.state.glob("run-*"))):
        assert time.monotonic() < deadline, (
            f"left after {WAIT_S} s: mounts {run.mounts()}, loops {run.loops()}, "
            f"ledger {list(run.state.glob('run-*'))}; log: {run.log()}")
        time.sleep(0.2)
    procs = [i for i in led["items"] if i["kind"] == "proc"]
    assert not any(labstate.is_alive(p["pid"], p["start"]) for p in procs), procs
    assert not any(run.work.glob("emudisk-*")), "a disk's directory is left"
    assert "the lab run ended without cleaning up" in run.log()
