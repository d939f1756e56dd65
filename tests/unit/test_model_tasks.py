"""model/tasks.py task_lifetimes: each thread's birth (ROOT/FORK/JOIN, else its first
off-CPU interval) and death (DEAD, else EXIT, else the window end), in the window."""

from __future__ import annotations


import tracebuilder as tb
from iowhy import abi
from iowhy.model.requests import Window
from iowhy.model.tasks import task_lifetimes

WIN = Window(1000, 2000)


def _life(tasks: list[dict], off: list[dict] = ()) -> dict[int, tuple[int, int]]:
    tids, birth, death = task_lifetimes(tb.columns("task", tasks),
                                        tb.columns("offcpu", list(off)), WIN)
    assert (birth <= death).all() and (birth >= WIN.start_ns).all()
    assert (death <= WIN.end_ns).all()
    return {int(t): (int(b), int(d)) for t, b, d in zip(tids, birth, death)}


def test_nothing_seen_no_thread():
    assert _life([]) == {}


def test_birth_and_death_from_task_events():
    T = tb.task
    life = _life([T(1, 1100, abi.TASK_ROOT), T(1, 1500, abi.TASK_EXIT), T(1, 1510, abi.TASK_DEAD),
                  T(2, 1200, abi.TASK_FORK), T(2, 1300, abi.TASK_EXIT),
                  T(3, 1250, abi.TASK_JOIN)])
    assert life == {1: (1100, 1510),  # DEAD, its last switch-out
                    2: (1200, 1300),  # no DEAD: its EXIT
                    3: (1250, 2000)}  # alive at the end


def test_a_dead_before_its_exit_is_read_as_the_exit():
    life = _life([tb.task(1, 1100), tb.task(1, 1400, abi.TASK_EXIT),
                  tb.task(1, 1300, abi.TASK_DEAD)])
    assert life[1] == (1100, 1400)


def test_without_a_birth_event_the_first_off_cpu_interval_starts_it():
    life = _life([tb.task(5, 1600, abi.TASK_EXIT)],
                 [tb.off(5, 1300, 1350), tb.off(5, 1200, 1250), tb.off(6, 1700, 1800)])
    assert life == {5: (1200, 1600), 6: (1700, 2000)}


def test_times_outside_the_window_are_clipped():
    life = _life([tb.task(1, 500), tb.task(1, 2500, abi.TASK_DEAD),
                  tb.task(2, 1500), tb.task(2, 1400, abi.TASK_EXIT)])
    assert life[1] == (1000, 2000)
    assert life[2] == (1500, 1500)  # an exit before its birth: no lifetime, not negative
