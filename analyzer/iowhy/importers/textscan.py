"""Reading ftrace text in time linear in its length, whatever a line holds.

A capture is a file a user gives a root tool: any line may be hostile. Regular
expressions with a lazy `.*?` or `.+?` in front of more pattern take time quadratic in a
line that almost matches (40 KB of blanks after a word took 29.5 s); this module reads a
line with str.find, str.split and patterns that cannot backtrack over more than one
token (`\\d+`, `\\w+` and `\\S+` next to characters they cannot take), each character
looked at a bounded number of times.

Every step adds what it scanned to `Scanner.work` (characters), so that a test can check
that the work is linear in the line, not time it.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_TOKEN = re.compile(r"\S+")
_TS = re.compile(r"(\d+)\.(\d+):")
_FLAGS = re.compile(r"[.a-zA-Z0-9]{3,6}")
_CPU = re.compile(r"\[(\d+)\]")
_TGID1 = re.compile(r"\((?:\d+|-+)\)")
_TGID2 = re.compile(r"(?:\d+|-+)\)")
_PID2 = re.compile(r"(\d+)(?:/(\d+))?")
_WORD = re.compile(r"\w+")
_DIGITS = re.compile(r"\d+")
_BLANKS = re.compile(r"\s*")

LOOKBACK = 5  # header tokens between a task's name and the time: pid, (tgid), [cpu], flags
MAX_DIGITS = 20  # a number of more digits is no field of an event (u64: 20 digits)
# The time of an event lies within this many characters of the line's first non-blank
# one (a task name is 16 bytes at most; with the pid, tgid, CPU and flags columns every
# tool prints well under 100): the header is looked for there only, so that a line's
# tokens are visited one by one at most over that stretch; what follows the event's
# name is read by str and re operations that scan it once.
MAX_HEAD = 512


class Header(NamedTuple):
    comm: str
    pid: int
    cpu: int
    sec: str
    frac: str
    event: str  # the event's name; for the syscall tracer's own form, sys_enter_/sys_exit_NAME
    rest: str  # what follows the event's name (its fields)


def number(s: str | None, base: int = 10) -> int | None:
    """int(s) for a field of at most MAX_DIGITS digits (never int() of a megabyte of
    digits, which Python refuses, or quadratic work); None otherwise."""
    if s is None or not s or len(s) > MAX_DIGITS + 2:
        return None
    try:
        return int(s, base)
    except ValueError:
        return None


class Scanner:
    """Splits ftrace lines (tracefs trace/trace_pipe, trace-cmd report, perf script) into
    their header and the event's text, and finds the fields of the events iowhy reads,
    counting the characters it scans in `work`."""

    def __init__(self) -> None:
        self.work = 0

    # -- counted primitives --------------------------------------------------------------
    def _full(self, rx: re.Pattern, s: str) -> re.Match | None:
        self.work += len(s) + 1
        return rx.fullmatch(s)

    def find(self, s: str, sub: str, start: int = 0) -> int:
        """s.find(sub, start), counting the characters it passed over."""
        i = s.find(sub, start)
        self.work += (len(s) if i < 0 else i + len(sub)) - start + 1
        return i

    def match(self, rx: re.Pattern, s: str, pos: int = 0) -> re.Match | None:
        """rx.match at pos, for patterns that are linear (no lazy quantifier followed by
        more pattern, adjacent quantifiers over disjoint classes): counts what it
        matched over."""
        m = rx.match(s, pos)
        self.work += (m.end() - pos if m else 0) + 1
        return m

    def search(self, rx: re.Pattern, s: str) -> re.Match | None:
        """rx.search for a pattern that starts with a literal and is linear from there:
        counts the line (each start is tried once, its match is linear)."""
        self.work += len(s) + 1
        return rx.search(s)

    # -- the line's header ---------------------------------------------------------------
    def split(self, line: str) -> Header | None:
        """The header of an event line (None if it is none), as
        `COMM-PID [(TGID)] [[CPU]] [FLAGS] SEC.FRAC: [SYSTEM:]EVENT: REST`, or perf's
        `COMM PID[/TID] [[CPU]] SEC.FRAC: SYSTEM:EVENT: REST`; else the syscall tracer's
        `COMM-PID ... SEC.FRAC: sys_NAME(ARGS)` or `sys_NAME -> RET`. The task name is
        the shortest that gives a header (it may hold blanks and dashes)."""
        return self._split(line, False) or self._split(line, True)

    def _split(self, line: str, syscall_form: bool) -> Header | None:
        window: list[tuple[int, int, str]] = []  # the tokens before this one (LOOKBACK+)
        first_start = len(line) - len(line.lstrip())
        self.work += len(line) + 1
        last = first_start
        head_end = min(len(line), first_start + MAX_HEAD)
        for m in _TOKEN.finditer(line, first_start, head_end):
            self.work += m.end() - last
            last = m.end()
            tok = (m.start(), m.end(), m.group())
            ts = self._full(_TS, tok[2]) if len(tok[2]) <= 2 * MAX_DIGITS + 2 else None
            if ts is not None and window:
                got = self._header(line, first_start, window, syscall_form)
                if got is not None:
                    h = self._event(line, tok[1], syscall_form)
                    if h is not None:
                        comm, pid, cpu = got
                        return Header(comm, pid, cpu, ts.group(1), ts.group(2), *h)
            window.append(tok)
            if len(window) > LOOKBACK:
                del window[0]
        return None

    def _header(self, line: str, s0: int, window: list[tuple[int, int, str]],
                syscall_form: bool) -> tuple[str, int, int] | None:
        """(comm, pid, cpu) from the tokens before the time: PID, then optionally
        (TGID), [CPU] and FLAGS, each a token of its own ((TGID) may be two); the
        earliest PID that fits wins, and for one PID the most optional parts."""
        n = len(window)
        for used in range(min(n, LOOKBACK), 0, -1):  # tokens after the pid's, and it
            k = n - used  # the pid's token
            opt = [t[2] for t in window[k + 1:]]
            cpu = self._optionals(opt)
            if cpu is None:
                continue
            start, _, text = window[k]
            pid = self._pid(line, s0, start, text, k, syscall_form)
            if pid is not None:
                return pid[0], pid[1], cpu
        return None

    def _optionals(self, opt: list[str]) -> int | None:
        """The cpu (0 when not given) if `opt` is [(TGID)] [[CPU]] [FLAGS] in that order,
        else None."""
        i = 0
        if opt[:1] == ["("] and len(opt) > 1 and self._full(_TGID2, opt[1]):
            i += 2
        elif i < len(opt) and self._full(_TGID1, opt[i]):
            i += 1
        cpu = 0
        if i < len(opt):
            c = self._full(_CPU, opt[i]) if len(opt[i]) <= MAX_DIGITS + 2 else None
            if c is not None:
                cpu = int(c.group(1))
                i += 1
        if i < len(opt) and self._full(_FLAGS, opt[i]):
            i += 1
        return cpu if i == len(opt) else None

    def _pid(self, line: str, s0: int, start: int, text: str, k: int,
             syscall_form: bool) -> tuple[str, int] | None:
        """(comm, pid) from the pid's token: NAME-PID (the name may begin in an earlier
        token), or, not in the syscall tracer's form, a token of its own PID[/TID] after
        the name."""
        dash = text.rfind("-")
        self.work += len(text) + 1
        if dash >= 0 and (dash > 0 or k > 0):
            tail = text[dash + 1:]
            if tail and len(tail) <= MAX_DIGITS and self._full(_DIGITS, tail):
                comm = line[s0:start + dash].strip()
                self.work += start + dash - s0
                if comm or dash > 0:
                    return comm, int(tail)
        if syscall_form or k == 0 or len(text) > 2 * MAX_DIGITS + 1:
            return None
        p = self._full(_PID2, text)
        if p is None:
            return None
        self.work += start - s0
        return line[s0:start].strip(), int(p.group(2) or p.group(1))

    def _event(self, line: str, pos: int, syscall_form: bool) -> tuple[str, str] | None:
        """(event, rest) from what follows the time (at least one blank, then the event)."""
        n = len(line)
        blanks = _BLANKS.match(line, pos)  # the blanks before the event (always matches)
        i = blanks.end() if blanks else pos
        self.work += i - pos + 1
        if i == pos or i >= n:
            return None
        if syscall_form:
            return self._syscall_event(line, i)
        w1 = self.match(_WORD, line, i)
        if w1 is None or w1.end() >= n or line[w1.end()] != ":":
            return None
        w2 = self.match(_WORD, line, w1.end() + 1)
        if w2 is not None and w2.end() < n and line[w2.end()] == ":":
            event, j = w2.group(), w2.end() + 1  # SYSTEM:EVENT:
        else:
            event, j = w1.group(), w1.end() + 1
        return event, self._rest(line, j)

    def _rest(self, line: str, j: int) -> str:
        self.work += len(line) - j + 1
        return line[j:].lstrip()

    def _syscall_event(self, line: str, i: int) -> tuple[str, str] | None:
        if not line.startswith("sys_", i):
            return None
        w = self.match(_WORD, line, i + 4)
        if w is None:
            return None
        name, j = w.group(), w.end()
        if line.startswith("(", j):
            self.work += len(line) - j
            body = line[j + 1:].rstrip()
            if not body.endswith(")"):
                return None
            return f"sys_enter_{name}", body[:-1]
        if line.startswith(" -> ", j):
            m = self.match(_NONBLANK, line, j + 4)
            if m is None or line[m.end():].strip():
                self.work += len(line) - (m.end() if m else j)
                return None
            self.work += len(line) - m.end()
            return f"sys_exit_{name}", m.group()
        return None

    # -- the fields of the events iowhy reads ---------------------------------------------
    def _from(self, rx: re.Pattern, s: str, start: int) -> re.Match | None:
        """rx.search(s, start) for a pattern that begins with a literal and cannot
        backtrack over more than the token it is in: counts what it scanned."""
        m = rx.search(s, start)
        self.work += (m.end() if m else len(s)) - start + 1
        return m

    def name_then_number(self, rest: str, key: str, then: re.Pattern, start: int = 0
                         ) -> tuple[str, int, int] | None:
        """For `KEY<name> THEN<digits>` (a task name may hold blanks): the name up to
        the first `then` (a pattern: a literal and the digits, captured) after the
        first KEY at or after start, the number, and the position after it."""
        a = self.find(rest, key, start)
        if a < 0:
            return None
        a += len(key)
        m = self._from(then, rest, a)
        if m is None or len(m.group(1)) > MAX_DIGITS:
            return None
        return rest[a:m.start()], int(m.group(1)), m.end()

    def sched_switch(self, rest: str) -> tuple[str, int, str, str, int] | None:
        """(prev_comm, prev_pid, prev_state, next_comm, next_pid) of
        `prev_comm=C prev_pid=P prev_prio=N prev_state=S ==> next_comm=C next_pid=P ...`:
        the task names are what lies between their key and the first place the rest of
        the line fits there."""
        a = self.find(rest, "prev_comm=")
        if a < 0:
            return None
        a += len("prev_comm=")
        mid = self._from(_SWITCH_MID, rest, a)
        if mid is None or len(mid.group(1)) > MAX_DIGITS:
            return None
        nxt = self._from(_NEXT_PID, rest, mid.end())
        if nxt is None or len(nxt.group(1)) > MAX_DIGITS:
            return None
        return (rest[a:mid.start()], int(mid.group(1)), mid.group(2),
                rest[mid.end():nxt.start()], int(nxt.group(1)))


_SWITCH_MID = re.compile(r" prev_pid=(\d+) prev_prio=\S+ prev_state=(\S+) ==> next_comm=")
_NEXT_PID = re.compile(r" next_pid=(\d+)")
PID_AFTER = re.compile(r" pid=(\d+)")
CHILD_PID_AFTER = re.compile(r" child_pid=(\d+)")
_NONBLANK = re.compile(r"\S+")
