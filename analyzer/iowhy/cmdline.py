"""A workload's name for headings: its label, or its command line made short.

A recorded command line is the truth of what ran, and it stays whole in the trace's
metadata (META `command`) and in every report's metadata block. Headings, titles and
comparisons use a shorter form, `short_command`, which keeps what tells two runs apart
and drops what names the machine they ran on:

* a path under one of the trace's mounted filesystems (other than /) is shown relative
  to its mount point, named after the mount point's last component:
  `/var/tmp/x-1234/fs/tree` on the filesystem mounted at `/var/tmp/x-1234/fs` is
  `<fs>/tree`. Two runs of the same workload on different scratch mounts then read
  the same, and a comparison does not call their paths a configuration difference;
* the program (the first word, and each word after a shell operator in `sh -c`) and a
  script given to an interpreter are shown by their file name (`/usr/bin/python3` is
  `python3`, `<venv>/site-packages/pkg/tool.py` is `tool.py`); so is any path inside an
  installed package (site-packages, dist-packages);
* the script of `sh -c` (bash, dash) is shortened word by word the same way, and so is
  the path in a KEY=PATH word (dd's `of=`).

Quoting in the short form is for reading, not for pasting into a shell: a word is
quoted only when it holds a blank or a quote. `--label` (record, attach) names a
workload outright; `title` prefers it.
"""

from __future__ import annotations

import os
import shlex
from typing import Any, Iterable, Mapping, Sequence

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "busybox"})
INTERPRETERS = frozenset({"python", "python2", "python3", "perl", "ruby", "node", "php",
                          "lua", "tclsh", "Rscript", "java"}) | SHELLS
SHELL_OPERATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", "!"})
PACKAGE_DIRS = ("/site-packages/", "/dist-packages/")
LABEL_CHARS = 120       # the longest --label accepted


def _program(word: str) -> str:
    return os.path.basename(word.rstrip("/")) or word


def _is_interpreter(name: str) -> bool:
    base = name.split(".")[0] if name.startswith("python") else name
    return base in INTERPRETERS or name.startswith("python")


def _mount_points(mounts: Iterable[str]) -> list[str]:
    """Mount points other than /, longest first (the deepest mount owns a path)."""
    out = {m.rstrip("/") for m in mounts if isinstance(m, str) and m.startswith("/")}
    out.discard("")
    return sorted(out, key=len, reverse=True)


def _path_word(word: str, mounts: Sequence[str]) -> str:
    """One word: relative to its mount point, or a package file's name, or as is; the
    value of a KEY=PATH word (dd's of=) the same way."""
    key, eq, value = word.partition("=")
    if eq and value.startswith("/") and "/" not in key:
        return f"{key}={_path_word(value, mounts)}"
    for m in mounts:
        if word == m or word.startswith(m + "/"):
            return f"<{_program(m)}>{word[len(m):]}"
    if any(d in word for d in PACKAGE_DIRS):
        return _program(word)
    return word


def _quote(word: str) -> str:
    if word and not any(c in word for c in " \t\n'\"\\"):
        return word
    return shlex.quote(word)


def _shorten_words(words: Sequence[str], mounts: Sequence[str], depth: int) -> list[str]:
    out: list[str] = []
    at_program = True         # the next word names a program
    after_interp = False      # ... the one after it is the interpreter's script
    i = 0
    while i < len(words):
        w = words[i]
        if w in SHELL_OPERATORS:
            out.append(w)
            at_program, after_interp = True, False
            i += 1
            continue
        if at_program:
            name = _program(w) if "/" in w else w
            out.append(name)
            at_program = False
            after_interp = _is_interpreter(name)
            # sh -c SCRIPT: the script is a command line of its own
            if name in SHELLS and depth < 3 and i + 2 < len(words) and words[i + 1] == "-c":
                out += ["-c", short_script(words[i + 2], mounts, depth + 1)]
                i += 3
                after_interp = False
                continue
            i += 1
            continue
        if after_interp and not w.startswith("-"):
            p = _path_word(w, mounts)
            out.append(_program(w) if p == w and w.startswith("/") else p)
            after_interp = False
            i += 1
            continue
        out.append(_path_word(w, mounts))
        i += 1
    return out


def short_script(script: str, mounts: Sequence[str], depth: int = 1) -> str:
    """A shell script (of `sh -c`) shortened word by word; as is when it does not split
    (unbalanced quotes)."""
    try:
        lex = shlex.shlex(script, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        words = list(lex)
    except ValueError:
        return script
    return " ".join(w if w in SHELL_OPERATORS else _quote(w)
                    for w in _shorten_words(words, mounts, depth))


def short_command(command: Any, mounts: Iterable[str] = ()) -> str | None:
    """The short form of a command (an argument list, or one string), or None when
    there is none. `mounts` are the mount points of the trace's filesystems."""
    if not command:
        return None
    mps = _mount_points(mounts)
    if isinstance(command, str):
        return short_script(command, mps, depth=0)
    words = [str(c) for c in command]
    return " ".join(w if w in SHELL_OPERATORS else _quote(w)
                    for w in _shorten_words(words, mps, 0))


def full_command(command: Any) -> str | None:
    """The command as recorded, as one line (shell-quoted when it is a list)."""
    if not command:
        return None
    if isinstance(command, (list, tuple)):
        return shlex.join(str(c) for c in command)
    return str(command)


def title(trace: Mapping[str, Any]) -> str:
    """How outputs name a recorded workload (a report's "trace" block): its label, else
    its short command, else the attached pid."""
    label = trace.get("label")
    if label:
        return str(label)
    short = trace.get("command_short") or full_command(trace.get("command"))
    if short:
        return str(short)
    return f"(attached process, pid {trace['pid']})" if trace.get("pid") else "(unknown)"


def check_label(text: str) -> str | None:
    """Why `text` cannot be a label, or None."""
    if not text.strip():
        return "the label is empty"
    if len(text) > LABEL_CHARS:
        return f"the label is longer than {LABEL_CHARS} characters"
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        return "the label holds a control character"
    return None
