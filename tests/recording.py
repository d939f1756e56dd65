"""Recording helpers shared by the system and lab tiers: `iowhy record` as the user runs
it, and the check that nothing was dropped."""

from __future__ import annotations

import time

from conftest import run
from iowhy import abi
from iowhy.traceformat import read_trace


def record(iowhy_bin, out, cmd, *extra, check=True, **kw):
    p = run([*iowhy_bin, "record", "-q", "-o", str(out), *extra, "--", *cmd], check=False, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"iowhy record exited {p.returncode}: {p.stderr}")
    return p


def wait_attached(rec, out, timeout: float = 60) -> None:
    """Until the recorder `rec` (a Popen of `iowhy record` or `attach`, output `out`) has
    every probe attached: it writes its RECORDER chunk then, to the partial file that is
    renamed to `out` when recording stops."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        partial = next(out.parent.glob(out.name + ".partial-*"), None)
        if partial and partial.stat().st_size > 64:
            try:
                if read_trace(str(partial)).recorder:
                    return
            except Exception:
                pass
        assert rec.poll() is None, rec.communicate()
        time.sleep(0.05)
    raise AssertionError(f"{out}: the recorder did not attach in {timeout} s")


# Events the kernel did not deliver to the probes (docs/trace-format.md, "Events the
# kernel does not deliver"): not drops, each is still a record flagged as such.
UNSEEN = {"lost_completion": ("request", abi.RQ_LOST_DONE),
          "lost_issue": ("request", abi.RQ_LOST_ISSUE),
          "lost_switch_in": ("offcpu", abi.OFF_LATE_END),
          "lost_syscall_exit": ("fsync", abi.FS_F_EXIT_UNSEEN)}


def assert_nothing_dropped(tr) -> None:
    """No record dropped by the probes or the recorder (ring buffer, maps, recursion),
    and every event the kernel did not deliver is a flagged record, counted."""
    c = tr.counters
    drops = {k: v for k, v in c.items() if k.startswith("lost_") and k not in UNSEEN and v}
    assert not drops, drops
    for name, (rec, flag) in UNSEEN.items():
        flagged = int(((tr.records(rec)["flags_u16"] & flag) != 0).sum())
        assert flagged == c.get(name, 0), (name, flagged, c)
