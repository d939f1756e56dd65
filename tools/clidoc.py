#!/usr/bin/env python3
"""The man page iowhy(1) and the bash and zsh completions, generated from the argparse
parser of the installed iowhy (`iowhy.cli.build_parser()`), so that every subcommand
and option appears as soon as it is in the parser.

    python tools/clidoc.py man  [-o build/man/iowhy.1]
    python tools/clidoc.py bash [-o build/completion/iowhy.bash]
    python tools/clidoc.py zsh  [-o build/completion/_iowhy]

Run it with the Python that has iowhy installed (`make` uses .venv/bin/python).
Standard library only. The page's date is SOURCE_DATE_EPOCH when set, else today.
What the parser cannot say (EXAMPLES, OVERHEAD, ENVIRONMENT, ...) is written below.
A subparser's `epilog`, when it has one, is printed at the end of its section.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass, field

PROG = "iowhy"


# -- the parser as a tree of commands ------------------------------------------------

@dataclass
class Command:
    path: tuple[str, ...]  # () for `iowhy` itself, ("lab", "run") for `iowhy lab run`
    parser: argparse.ArgumentParser
    summary: str  # the one-line help its parent gives it
    aliases: list[str] = field(default_factory=list)
    children: list["Command"] = field(default_factory=list)

    @property
    def name(self) -> str:
        return " ".join((PROG,) + self.path)

    @property
    def subparsers(self) -> argparse._SubParsersAction | None:
        for a in self.parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                return a
        return None

    def options(self) -> list[argparse.Action]:
        return [a for a in self.parser._actions
                if a.option_strings and a.help != argparse.SUPPRESS]

    def positionals(self) -> list[argparse.Action]:
        return [a for a in self.parser._actions
                if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
                and a.help != argparse.SUPPRESS]

    def groups(self) -> list[tuple[str, list[argparse.Action]]]:
        """(title, its options) per argument group with options, in parser order."""
        out = []
        for g in self.parser._action_groups:
            acts = [a for a in g._group_actions
                    if a.option_strings and a.help != argparse.SUPPRESS]
            if acts:
                out.append((g.title or "options", acts))
        return out

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


def command_tree(parser: argparse.ArgumentParser, path: tuple[str, ...] = (),
                 summary: str = "") -> Command:
    cmd = Command(path, parser, summary)
    sp = cmd.subparsers
    if sp is not None:
        helps = {ca.dest: (ca.help or "") for ca in sp._choices_actions}
        seen: dict[int, Command] = {}
        for name, sub in sp.choices.items():
            if id(sub) in seen:  # an alias of a command already listed
                seen[id(sub)].aliases.append(name)
                continue
            child = command_tree(sub, path + (name,), helps.get(name, ""))
            seen[id(sub)] = child
            cmd.children.append(child)
    return cmd


def load_tree() -> Command:
    from iowhy.cli import build_parser
    return command_tree(build_parser())


def expand_help(parser: argparse.ArgumentParser, a: argparse.Action) -> str:
    """The action's help with %(default)s and friends filled in, on one line."""
    if not a.help:
        return ""
    text = parser._get_formatter()._expand_help(a)
    return " ".join(text.split())


def takes_value(a: argparse.Action) -> bool:
    return a.nargs != 0


def metavar(a: argparse.Action) -> str:
    if a.metavar is not None:
        return a.metavar if isinstance(a.metavar, str) else " ".join(a.metavar)
    if a.choices is not None:
        return "{" + ",".join(map(str, a.choices)) + "}"
    return a.dest.upper()


def value_kind(a: argparse.Action) -> str:
    """What completes an option's value or a positional: words, none, dir, file, rest."""
    if a.nargs == argparse.REMAINDER:
        return "rest"
    if a.choices is not None:
        return "words"
    if a.type in (int, float):
        return "none"
    mv = (a.metavar if isinstance(a.metavar, str) else "") or a.dest
    if mv.upper() == "DIR" or a.dest.endswith("dir"):
        return "dir"
    if mv.upper() == "PID" or a.dest == "pid":
        return "none"
    return "file"


# -- man page ----------------------------------------------------------------------------

def roff(text: str) -> str:
    """Escape prose for roff: backslashes, hyphens (so options copy as typed), quotes;
    `code` spans become bold."""
    text = text.replace("\\", "\\e").replace("-", "\\-").replace("'", "\\(aq")
    text = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", text)
    text = text.replace("`", "\\(ga")
    return text


def line(text: str) -> str:
    """A text line that does not start a request."""
    return "\\&" + text if text[:1] in (".", "'") else text


def opt_synopsis(a: argparse.Action) -> str:
    flag = "\\fB" + roff(a.option_strings[0]) + "\\fR"
    if takes_value(a):  # an unbreakable space: the value stays on the option's line
        flag += "\\ \\fI" + roff(metavar(a)) + "\\fR"
    return flag


def pos_synopsis(a: argparse.Action) -> str:
    if a.nargs == argparse.REMAINDER:
        mv = metavar(a)
        # "-- CMD [ARGS...]": the separator bold, the rest italic
        if mv.startswith("-- "):
            return "\\fB\\-\\-\\fR \\fI" + roff(mv[3:]) + "\\fR"
        return "\\fI" + roff(mv) + "\\fR"
    s = "\\fI" + roff(metavar(a)) + "\\fR"
    if a.nargs == "?":
        return "[" + s + "]"
    if a.nargs in ("*", "+"):
        return s + " ..." if a.nargs == "+" else "[" + s + " ...]"
    return s


def synopsis(cmd: Command) -> str:
    parts = []
    for a in cmd.options():
        if isinstance(a, argparse._HelpAction):
            continue
        s = opt_synopsis(a)
        parts.append(s if a.required else "[" + s + "]")
    for a in cmd.positionals():
        parts.append(pos_synopsis(a))
    if cmd.subparsers is not None:
        parts.append("\\fI" + roff(cmd.subparsers.metavar or "COMMAND") + "\\fR ...")
    body = [line(" ".join(parts))] if parts else []
    return "\n".join(['.SY "' + cmd.name + '"'] + body + [".YS"])


def option_items(cmd: Command, a: argparse.Action) -> list[str]:
    forms = []
    for o in a.option_strings:
        f = "\\fB" + roff(o) + "\\fR"
        if takes_value(a):
            f += " \\fI" + roff(metavar(a)) + "\\fR"
        forms.append(f)
    out = [".TP", line(", ".join(forms))]
    h = expand_help(cmd.parser, a)
    if isinstance(a, (argparse._AppendAction, argparse._AppendConstAction)) \
            and "repeat" not in h:
        h += " (repeatable)"
    out.append(line(roff(h)) if h else "")
    return [x for x in out if x]


def positional_items(cmd: Command, a: argparse.Action) -> list[str]:
    out = [".TP", line(pos_synopsis(a))]
    h = expand_help(cmd.parser, a)
    if h:
        out.append(line(roff(h)))
    return out


def command_section(cmd: Command) -> list[str]:
    out = [f'.SS "{cmd.name}"']
    if cmd.aliases:
        names = [" ".join((PROG,) + cmd.path[:-1] + (al,)) for al in cmd.aliases]
        out += [line(roff("Also: " + ", ".join(names) + ".")), ".PP"]
    if cmd.parser.description:
        out += paragraph(cmd.parser, cmd.parser.description)
    elif cmd.summary:
        out.append(line(roff(" ".join(cmd.summary.split()))))
    out += [".PP", synopsis(cmd)]
    pos = cmd.positionals()
    if pos:
        out.append(".PP")
        out.append("Arguments:")
        out.append(".RS")
        for a in pos:
            out += positional_items(cmd, a)
        out.append(".RE")
    for title, acts in cmd.groups():
        acts = [a for a in acts if not isinstance(a, argparse._HelpAction)]
        if not acts:
            continue
        out += [".PP", line(roff(title[:1].upper() + title[1:]) + ":"), ".RS"]
        for a in acts:
            out += option_items(cmd, a)
        out.append(".RE")
    if cmd.children:
        out += [".PP", "Commands:", ".RS"]
        for c in cmd.children:
            out += [".TP", "\\fB" + roff(c.path[-1]) + "\\fR", line(roff(c.summary))]
        out.append(".RE")
    if cmd.parser.epilog:
        out += [".PP"] + paragraph(cmd.parser, cmd.parser.epilog)
    return out


def paragraph(parser: argparse.ArgumentParser, text: str) -> list[str]:
    """A description or epilog: filled, or line by line when the parser's formatter keeps
    its lines (RawDescriptionHelpFormatter, RawTextHelpFormatter)."""
    if issubclass(parser.formatter_class, argparse.RawDescriptionHelpFormatter):
        body = [line(roff(ln)) if ln.strip() else "" for ln in text.strip("\n").splitlines()]
        return [".nf"] + [b if b else ".sp" for b in body] + [".fi"]
    return [line(roff(" ".join(text.split())))]


# (what it shows, the command); tests/unit/test_clidoc.py parses every command.
EXAMPLES = [
    ("Record a workload (as root) until it exits, then see where its time went:",
     "sudo iowhy record -o untar.iowt -- tar -xf linux.tar -C /mnt"),
    ("", "iowhy report untar.iowt"),
    ("Check that every probe loads and attaches on this kernel, and exit:",
     "sudo iowhy record --dry-run"),
    ("Record only the requests of one disk, and time every syscall of the workload:",
     "sudo iowhy record --dev /dev/nvme0n1 --syscalls all -o db.iowt -- ./bench.sh"),
    ("Follow a running process and its future children for 30 seconds:",
     "sudo iowhy attach -p 4242 -d 30 -o server.iowt"),
    ("What a trace holds, what was lost, and what recording cost:",
     "iowhy info untar.iowt"),
    ("A self-contained HTML report, and every figure as JSON:",
     "iowhy report untar.iowt --html untar.html"),
    ("", "iowhy report untar.iowt --json"),
    ("Device latency of the journal writes as a log2 histogram, in microseconds:",
     "iowhy hist untar.iowt --metric device --class log --unit usecs"),
    ("Two runs side by side (A is the baseline):",
     "iowhy compare ext4.iowt xfs.iowt"),
    ("What the same run would take without barriers, or on an SSD:",
     "iowhy whatif untar.iowt --nobarrier"),
    ("", "iowhy whatif untar.iowt --disk ssd --json"),
    ("A profile of the disk a trace was recorded on, then that disk for another run:",
     "iowhy whatif --fit yesterday.iowt -o mydisk.json"),
    ("", "iowhy whatif untar.iowt --disk mydisk.json"),
    ("A seed scenario on the emulated disk, checked against its ground truth:",
     "sudo iowhy lab run all --disk ssd"),
]

OVERHEAD = """\
Recording attaches tracepoint programs to the block layer (request creation, insert, \
issue and completion, bio submission), the scheduler (context switch, wakeup, fork, \
exit), the journals (jbd2 commits, the XFS log, btrfs log syncs) and the fsync family of \
syscalls. The programs run for every such event on the machine, not only the workload's, \
so the cost grows with the rate of block requests, context switches and wakeups, not \
with the bytes moved.
.PP
A workload that mostly fills the page cache, such as an untar, pays little: its requests \
come from writeback and are recorded once each. A workload made of small synchronous \
writes pays most, because every fsync brings several requests, context switches and \
wakeups; expect a few percent of its elapsed time. Any attached syscall tracepoint sends \
every syscall of every task through the kernel's slower syscall path, which costs tens of \
nanoseconds per syscall with the default \\fB\\-\\-syscalls sync\\fR; \
\\fB\\-\\-syscalls all\\fR times every syscall of the workload and costs about ten times \
more per call; \\fB\\-\\-eager\\-writes\\fR times every write(2) from the start; \
\\fB\\-\\-probe\\-stats\\fR adds two clock reads to every program run.
.PP
Events are staged per CPU and sent to the recorder in chunks through one BPF ring buffer \
(\\fB\\-r\\fR). When it or a map fills, events are dropped and counted, never lost \
silently: \\fBiowhy info\\fR and \\fBiowhy report\\fR print the counts on their first lines, \
together with the recorder's own CPU time (and, with \\fB\\-\\-probe\\-stats\\fR, each \
program's run count and run time as the kernel measured them).
.PP
Measured figures for an untar and for fsync-heavy tasks, and the protocol behind them, \
are in bench/README.md and the Performance section of README.md in the iowhy source \
(\\fBbench/bench_record.py\\fR repeats them)."""

ENVIRONMENT = [
    ("IOWHY_RECORDER", "The recorder binary to run. The installed \\fBiowhy\\fR sets it "
     "to \\fIPREFIX\\fR/libexec/iowhy/iowhy\\-record when it is not set."),
    ("IOWHY_EMUDISK", "The emulated disk daemon of \\fBiowhy lab\\fR (installed: "
     "\\fIPREFIX\\fR/libexec/iowhy/emudisk)."),
    ("IOWHY_CACHE", "Where \\fBiowhy lab\\fR keeps the workloads' input files "
     "(default: /var/cache/iowhy)."),
]

FILES = [
    ("\\fIPREFIX\\fR/bin/iowhy", "The command; it runs the package in "
     "\\fIPREFIX\\fR/lib/iowhy/python with the Python it was installed for."),
    ("\\fIPREFIX\\fR/libexec/iowhy/iowhy\\-record", "The recorder: loads the BPF programs, "
     "starts or attaches to the workload and writes the trace."),
    ("*.iowt", "Trace files, written mode 0600 (they hold command lines and file names). "
     "The format is described in docs/trace\\-format.md in the source."),
]
# PREFIX is /usr/local unless `make install PREFIX=...` said otherwise.

SEE_ALSO = ["bpftrace(8)", "biolatency-bpfcc(8)", "biosnoop-bpfcc(8)", "perf(1)",
            "fsync(2)", "sync(2)", "proc(5)"]


def man_page(tree: Command, version: str, date: str) -> str:
    top = tree.parser
    out = [
        ".\\\" Generated by tools/clidoc.py from iowhy's argument parser; do not edit.",
        ".\\\" No hyphenation: options and names are copied from the page as printed.",
        ".nr HY 0",
        f'.TH IOWHY 1 "{date}" "iowhy {version}" "User Commands"',
        ".nh",
        ".ad l",
        ".SH NAME",
        "iowhy \\- where did the elapsed time of an I/O\\-heavy workload go",
        ".SH SYNOPSIS",
    ]
    leaves = [c for c in tree.walk() if c.path and not c.children]
    out.append(synopsis(tree))
    for c in leaves:
        out.append(synopsis(c))
    out += [".SH DESCRIPTION", line(roff(" ".join((top.description or "").split())))]
    out += [".PP",
            "\\fBiowhy record\\fR (as root) runs a command with eBPF tracepoint probes attached "
            "and writes a trace file; \\fBiowhy report\\fR and the other analysis commands read "
            "it as any user and attribute every nanosecond of the workload's elapsed time to "
            "exactly one of barrier (cache flushes), log, metadata, data, read, cpu, "
            "runqueue or wait\\-other. The probes need a kernel with BTF and tracepoints; "
            "nothing is compiled on the target machine.",
            ".PP",
            "Bad input ends in one line on standard error, \\fBiowhy: \\fIwhat\\fR and a hint, "
            "and a non\\-zero exit status. Losses (events the kernel did not deliver, drops, "
            "a truncated trace) are printed first by every command that reads a trace."]
    out += [".SH OPTIONS", ".TP", "\\fB\\-h\\fR, \\fB\\-\\-help\\fR",
            "Print the usage of \\fBiowhy\\fR or of a command (\\fBiowhy\\fR "
            "\\fIcommand\\fR \\fB\\-h\\fR) and exit."]
    for a in tree.options():
        if not isinstance(a, argparse._HelpAction):
            out += option_items(tree, a)
    out.append(".SH COMMANDS")
    for c in tree.walk():
        if c.path:
            out += command_section(c)
    out.append(".SH EXAMPLES")
    for what, cmd in EXAMPLES:
        if what:
            out += [".PP", line(roff(what))]
        out += [".RS", ".EX", line(roff(cmd).replace("\\fB", "").replace("\\fR", "")),
                ".EE", ".RE"]
    out += [".SH OVERHEAD"] + OVERHEAD.splitlines()
    out.append(".SH ENVIRONMENT")
    for var, text in ENVIRONMENT:
        out += [".TP", "\\fB" + roff(var) + "\\fR", text]
    out.append(".SH FILES")
    for f, text in FILES:
        out += [".TP", f, text]
    out.append(".PP")
    out.append("\\fIPREFIX\\fR is /usr/local unless the install chose another.")
    out += [".SH EXIT STATUS",
            "0 on success; 1 when a command failed (its message says why); 2 for a usage "
            "error; 127 when the command to record does not exist. \\fBiowhy record\\fR "
            "exits with the workload's exit status. \\fBiowhy lab run\\fR exits 3 when a "
            "figure is out of tolerance.",
            ".SH LICENSE",
            "GNU General Public License version 2 only (GPL\\-2.0\\-only); the BPF programs "
            "declare the GPL license to the kernel.",
            ".SH SEE ALSO",
            ",\n".join(f".BR {p[:p.index('(')]} ({p[p.index('(') + 1:-1]})"
                       .replace("-", "\\-") for p in SEE_ALSO)]
    return "\n".join(out) + "\n"


# -- bash completion ----------------------------------------------------------------------

def _sq(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def _case_pattern(keys: list[str]) -> str:
    return "|".join(_sq(k) for k in keys)


def _bash_value(a: argparse.Action) -> str:
    """The bash code completing a positional argument ('' for none)."""
    kind = value_kind(a)
    if kind == "rest":
        return "mapfile -t COMPREPLY < <(compgen -c -- \"$cur\")"
    if kind == "words":
        return f"_iowhy_words {_sq(' '.join(map(str, a.choices or ())))}"
    if kind in ("file", "dir"):
        return "_iowhy_files " + ("-d" if kind == "dir" else "-f")
    return ""


def bash_completion(tree: Command) -> str:
    cmds = list(tree.walk())
    key = {id(c): " ".join(c.path) for c in cmds}
    subs: list[str] = []  # "path|word" patterns that enter a subcommand
    arg_opts: list[str] = []  # "path|option" that take a separate value
    rest_at: list[str] = []  # paths whose first positional starts a command line
    for c in cmds:
        for ch in c.children:
            for nm in [ch.path[-1]] + ch.aliases:
                subs.append(f"{key[id(c)]}|{nm}")
        for a in c.options():
            if takes_value(a):
                arg_opts += [f"{key[id(c)]}|{o}" for o in a.option_strings]
        pos = c.positionals()
        if pos and pos[0].nargs == argparse.REMAINDER:
            rest_at.append(key[id(c)])

    value_cases: dict[str, list[str]] = {}  # completion code -> "path|option" patterns
    for c in cmds:
        for a in c.options():
            if not takes_value(a):
                continue
            kind = value_kind(a)
            if kind == "words":
                code = f"_iowhy_words {_sq(' '.join(map(str, a.choices or ())))}"
            elif kind == "dir":
                code = "_iowhy_files -d"
            elif kind == "file":
                code = "_iowhy_files -f"
            else:
                code = ":"
            value_cases.setdefault(code, []).extend(f"{key[id(c)]}|{o}" for o in a.option_strings)

    L = [
        "# bash completion for iowhy(1). Generated by tools/clidoc.py from iowhy's argument",
        "# parser; do not edit.",
        "",
        "_iowhy_words() { mapfile -t COMPREPLY < <(compgen -W \"$1\" -- \"$cur\"); }",
        "_iowhy_files() {",
        "    compopt -o filenames 2>/dev/null",
        "    mapfile -t COMPREPLY < <(compgen \"$1\" -- \"$cur\")",
        "}",
        "",
        "_iowhy() {",
        "    # npos: the positional arguments given so far to the command in `path`",
        "    local cur=${COMP_WORDS[COMP_CWORD]} prev='' path='' skip=0 npos=0 i w",
        "    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}",
        "    # --opt=value: bash splits it at '=' (COMP_WORDBREAKS)",
        "    if [[ $cur == = ]]; then",
        "        cur=''",
        "    elif [[ $prev == = ]] && ((COMP_CWORD > 1)); then",
        "        prev=${COMP_WORDS[COMP_CWORD - 2]}",
        "    fi",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        "        w=${COMP_WORDS[i]}",
        "        if [[ $w == = ]]; then skip=1; continue; fi",
        "        if ((skip)); then skip=0; continue; fi",
        "        case \"$path|$w\" in",
    ]
    if subs:
        L.append(f"        {_case_pattern(subs)})")
        L.append("            path=${path:+$path }$w; npos=0; continue ;;")
    if arg_opts:
        L.append(f"        {_case_pattern(arg_opts)})")
        L.append("            skip=1; continue ;;")
    L.append("        esac")
    L.append("        [[ $w == -* ]] || npos=$((npos + 1))")
    if rest_at:
        L += [
            "        # the workload's command line: `--` or the first non-option word",
            "        case \"$path\" in",
            f"        {_case_pattern(rest_at)})",
            "            if [[ $w == -- ]]; then ((i++)); elif [[ $w == -* ]]; then continue; fi",
            "            if declare -F _command_offset >/dev/null; then",
            "                _command_offset \"$i\"",
            "            elif ((i == COMP_CWORD)); then",
            "                mapfile -t COMPREPLY < <(compgen -c -- \"$cur\")",
            "            else",
            "                _iowhy_files -f",
            "            fi",
            "            return ;;",
            "        esac",
        ]
    L += ["    done"]
    if value_cases:
        L.append("    case \"$path|$prev\" in")
        for code, pats in value_cases.items():
            L.append(f"    {_case_pattern(pats)})")
            L.append(f"        {code}; return ;;")
        L.append("    esac")
    L += ["    if [[ $cur == -* ]]; then", "        case \"$path\" in"]
    for c in cmds:
        opts = [o for a in c.options() for o in a.option_strings]
        if c.path and c.positionals() and c.positionals()[0].nargs == argparse.REMAINDER:
            opts.append("--")
        L.append(f"        {_sq(key[id(c)])}) _iowhy_words {_sq(' '.join(opts))} ;;")
    L += ["        esac", "        return", "    fi", "    case \"$path\" in"]
    for c in cmds:
        if c.children:
            names = [n for ch in c.children for n in [ch.path[-1]] + ch.aliases]
            L.append(f"    {_sq(key[id(c)])}) _iowhy_words {_sq(' '.join(names))} ;;")
        elif c.positionals():
            # the completion of each positional by its place (the last one's for any
            # further word): its choices, files, directories or a command name
            codes = [_bash_value(a) for a in c.positionals()]
            if len(set(codes)) == 1:
                if codes[0]:
                    L.append(f"    {_sq(key[id(c)])}) {codes[0]} ;;")
                continue
            arms = [f"{k}) {code or ':'} ;;" for k, code in enumerate(codes[:-1])]
            arms.append(f"*) {codes[-1] or ':'} ;;")
            L.append(f"    {_sq(key[id(c)])}) case $npos in {' '.join(arms)} esac ;;")
    L += ["    esac", "}", "", "complete -F _iowhy iowhy", ""]
    return "\n".join(L)


# -- zsh completion -------------------------------------------------------------------------

def _zdesc(text: str) -> str:
    """First sentence of a help text, escaped for an _arguments description."""
    text = re.sub(r"\s*\(default: [^)]*\)", "", " ".join(text.split()))
    m = re.match(r"(.+?[.;])(\s|$)", text)
    first = m.group(1).rstrip(".;") if m else text
    if len(first) > 70:
        first = first[:67].rstrip() + "..."
    for ch in "\\[]:":
        first = first.replace(ch, "\\" + ch)
    return first


def _zaction(a: argparse.Action) -> str:
    kind = value_kind(a)
    if kind == "words":
        return "(" + " ".join(str(c) for c in a.choices or ()) + ")"
    if kind == "dir":
        return "_files -/"
    if kind == "file":
        return "_files"
    return " "


def _zfunc(c: Command) -> str:
    return "_" + "_".join(re.sub(r"\W", "_", p) for p in (PROG,) + c.path)


def _zmsg(a: argparse.Action) -> str:
    mv = a.metavar if isinstance(a.metavar, str) else a.dest
    return mv.replace(":", "\\:").lower()


def zsh_function(c: Command) -> list[str]:
    specs = []
    for a in c.options():
        strs = a.option_strings
        desc = _zdesc(expand_help(c.parser, a))
        if isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
            excl = "(- *)"
        else:
            excl = "(" + " ".join(strs) + ")" if len(strs) > 1 else ""
        rep = "*" if isinstance(a, (argparse._AppendAction, argparse._CountAction,
                                    argparse._AppendConstAction)) else ""
        if rep:
            excl = ""
        forms = []
        for o in strs:
            if takes_value(a):
                forms.append(o + ("+" if not o.startswith("--") else "="))
            else:
                forms.append(o)
        arg = f":{_zmsg(a)}:{_zaction(a)}" if takes_value(a) else ""
        for f in forms:
            specs.append(_sq(f"{excl}{rep}{f}[{desc}]{arg}"))
    n = 0
    for a in c.positionals():
        n += 1
        msg = _zmsg(a)
        if a.nargs == argparse.REMAINDER:
            specs.append(_sq("*::command:_normal"))
        elif a.nargs in ("*", "+"):
            specs.append(_sq(f"*:{msg}:{_zaction(a)}"))
        elif a.nargs == "?":
            specs.append(_sq(f"{n}::{msg}:{_zaction(a)}"))
        else:
            specs.append(_sq(f"{n}:{msg}:{_zaction(a)}"))
    if c.children:
        specs.append(_sq(f"{n + 1}: :->cmd"))
        specs.append(_sq("*:: :->arg"))
    L = [f"{_zfunc(c)}() {{",
         "    local curcontext=$curcontext state state_descr line ret=1",
         "    typeset -A opt_args",
         "    _arguments -C -s -S \\"]
    L += [f"        {s} \\" for s in specs]
    L.append("        && ret=0")
    if c.children:
        items = []
        for ch in c.children:
            for nm in [ch.path[-1]] + ch.aliases:
                items.append(_sq(nm.replace(":", "\\:") + ":" + " ".join(ch.summary.split())))
        L += ["    case $state in",
              "    cmd)",
              "        local -a cmds",
              f"        cmds=({' '.join(items)})",
              f"        _describe -t commands {_sq(c.name + ' command')} cmds && ret=0 ;;",
              "    arg)",
              f"        curcontext=${{curcontext%:*:*}}:{'-'.join((PROG,) + c.path)}-$words[1]:",
              "        case $words[1] in"]
        for ch in c.children:
            pats = "|".join([ch.path[-1]] + ch.aliases)
            L.append(f"        {pats}) {_zfunc(ch)} && ret=0 ;;")
        L += ["        esac ;;", "    esac"]
    L += ["    return ret", "}", ""]
    return L


def zsh_completion(tree: Command) -> str:
    L = ["#compdef iowhy",
         "# zsh completion for iowhy(1). Generated by tools/clidoc.py from iowhy's argument",
         "# parser; do not edit.",
         ""]
    for c in tree.walk():
        L += zsh_function(c)
    L += ['_iowhy "$@"', ""]
    return "\n".join(L)


# -- command line ---------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Generate iowhy's man page and completions.")
    ap.add_argument("what", choices=("man", "bash", "zsh"))
    ap.add_argument("-o", "--output", help="file to write (default: stdout)")
    args = ap.parse_args(argv)
    from iowhy import __version__
    tree = load_tree()
    if args.what == "man":
        epoch = os.environ.get("SOURCE_DATE_EPOCH")
        t = time.gmtime(int(epoch)) if epoch and epoch.isdigit() else time.gmtime()
        text = man_page(tree, __version__, time.strftime("%Y-%m-%d", t))
    elif args.what == "bash":
        text = bash_completion(tree)
    else:
        text = zsh_completion(tree)
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.output)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
