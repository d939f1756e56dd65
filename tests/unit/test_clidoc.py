"""The man page and the bash/zsh completions generated from the argparse parser
(tools/clidoc.py): every subcommand and option is in them, the page renders without
warnings, the examples parse, and the completions complete."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iowhy.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import clidoc  # noqa: E402

TREE = clidoc.load_tree()
COMMANDS = [c for c in TREE.walk() if c.path]


def options_of(c: clidoc.Command) -> list[str]:
    return [o for a in c.options() for o in a.option_strings]


def subcommands(c: clidoc.Command) -> list[str]:
    return [ch.path[-1] for ch in c.children]


def test_tree_is_the_parser():
    """The tree walks every subparser (nested ones too) and every option."""
    p = build_parser()
    sp = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    assert subcommands(TREE) == list(sp.choices)
    for c in COMMANDS:
        parser = p
        for name in c.path:
            parser = next(a for a in parser._actions
                          if isinstance(a, argparse._SubParsersAction)).choices[name]
        assert sorted(options_of(c)) == sorted(o for a in parser._actions
                                               for o in a.option_strings), c.name
    assert ("lab", "run") in [c.path for c in COMMANDS]


def test_readme_usage_names_every_command():
    """README.md's Usage block has a line for every subcommand the parser has."""
    text = (REPO / "README.md").read_text()
    usage = text.split("## Usage", 1)[1].split("```", 2)[1]
    missing = [c for c in subcommands(TREE) if not re.search(rf"^iowhy {c}\b", usage, re.M)]
    assert not missing, f"README.md's Usage block lacks: {missing}"


# -- man page ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def man_file(tmp_path_factory) -> Path:
    f = tmp_path_factory.mktemp("man") / "iowhy.1"
    f.write_text(clidoc.man_page(TREE, "0.0.test", "2026-01-01"))
    return f


def render(man_file: Path) -> str:
    if shutil.which("man") is None or shutil.which("groff") is None:
        pytest.skip("needs man-db and groff-base (make man installs them)")
    env = dict(os.environ, MANWIDTH="250", LANG="C.UTF-8")
    p = subprocess.run(["man", "--warnings", "-l", str(man_file)], capture_output=True,
                       text=True, env=env)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    return p.stdout


def test_man_renders_without_warnings(man_file):
    text = render(man_file)
    for sect in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXAMPLES",
                 "OVERHEAD", "ENVIRONMENT", "FILES", "EXIT STATUS", "SEE ALSO"):
        assert re.search(rf"^{sect}$", text, re.M), sect
    p = subprocess.run(["groff", "-man", "-ww", "-z", str(man_file)], capture_output=True,
                       text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_man_has_every_command_and_option(man_file):
    text = render(man_file)
    sections = re.split(r"^   (iowhy(?: [\w-]+)+)$", text, flags=re.M)
    by_name = dict(zip(sections[1::2], sections[2::2]))
    for c in COMMANDS:
        assert c.name in by_name, f"no section {c.name!r}"
        body = by_name[c.name]
        for o in options_of(c):
            if o not in ("-h", "--help"):  # an item of the option list, not the synopsis
                assert re.search(rf"^ +(\S+( \S+)?, )*{re.escape(o)}\b", body, re.M), \
                    (c.name, o)
        for ch in subcommands(c):
            assert re.search(rf"^\s+{ch}\b", body, re.M), (c.name, ch)
        # the synopsis line of each leaf command is in SYNOPSIS
        if not c.children:
            assert re.search(rf"^\s+{re.escape(c.name)}\b", text.split("DESCRIPTION")[0],
                             re.M), c.name
    top = text.split("COMMANDS")[0]
    for o in options_of(TREE):
        assert o in top, o


def test_examples_parse():
    """Every EXAMPLES command is valid for the current parser."""
    p = build_parser()
    for _, cmd in clidoc.EXAMPLES:
        argv = shlex.split(cmd)
        if argv[0] == "sudo":
            argv = argv[1:]
        assert argv[0] == "iowhy"
        try:
            p.parse_args(argv[1:])
        except SystemExit as e:
            pytest.fail(f"example does not parse ({e}): {cmd}")


def test_a_new_subcommand_appears_by_itself(tmp_path):
    """A subcommand a later change adds to the parser is in all three outputs."""
    p = build_parser()
    sp = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    n = sp.add_parser("latecomer", help="one line per request",
                      description="The per-request listing.")
    n.add_argument("trace")
    n.formatter_class = argparse.RawDescriptionHelpFormatter
    n.epilog = "examples:\n  iowhy latecomer t.iowt --slower 10\n\n  iowhy latecomer t.iowt"
    n.add_argument("--slower", type=float, metavar="MS", help="only requests slower than MS")
    tree = clidoc.command_tree(p)
    man = clidoc.man_page(tree, "0", "2026-01-01")
    assert '.SS "iowhy latecomer"' in man and "\\-\\-slower" in man
    assert ".nf\nexamples:\n  iowhy latecomer t.iowt \\-\\-slower 10\n.sp\n" in man
    (tmp_path / "iowhy.1").write_text(man)
    assert "  iowhy latecomer t.iowt --slower 10" in render(tmp_path / "iowhy.1")
    assert "'|latecomer'" in clidoc.bash_completion(tree)
    z = clidoc.zsh_completion(tree)
    assert "_iowhy_latecomer()" in z and "--slower=[only requests slower than MS]" in z


# -- bash ------------------------------------------------------------------------------------

BASH_DRIVER = r'''
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
_iowhy
printf '%s\n' "${COMPREPLY[@]}"
'''


@pytest.fixture(scope="module")
def bash_file(tmp_path_factory) -> Path:
    f = tmp_path_factory.mktemp("bash") / "iowhy.bash"
    f.write_text(clidoc.bash_completion(TREE))
    return f


def bash_complete(bash_file: Path, *words: str, cwd: Path | None = None) -> list[str]:
    p = subprocess.run(["bash", "--norc", "-c", BASH_DRIVER, "x", str(bash_file), *words],
                       capture_output=True, text=True, cwd=cwd)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    return [w for w in p.stdout.split("\n") if w]


def test_bash_completes_every_subcommand_and_option(bash_file):
    assert bash_complete(bash_file, "iowhy", "") == subcommands(TREE)
    assert sorted(bash_complete(bash_file, "iowhy", "-")) == sorted(options_of(TREE))
    for c in COMMANDS:
        got = bash_complete(bash_file, "iowhy", *c.path, "-")
        want = options_of(c)
        assert sorted(set(got) - {"--"}) == sorted(want), c.name
        if c.children:
            assert bash_complete(bash_file, "iowhy", *c.path, "") == subcommands(c)


def test_bash_completes_values_and_files(bash_file, tmp_path):
    (tmp_path / "run1.iowt").write_text("")
    (tmp_path / "out").mkdir()
    assert bash_complete(bash_file, "iowhy", "--log-level", "") == \
        ["debug", "info", "warning", "error"]
    assert bash_complete(bash_file, "iowhy", "record", "--syscalls", "=", "a") == ["all"]
    assert bash_complete(bash_file, "iowhy", "hist", "--metric", "s") == ["seek"]
    assert bash_complete(bash_file, "iowhy", "report", "ru", cwd=tmp_path) == ["run1.iowt"]
    assert bash_complete(bash_file, "iowhy", "lab", "run", "--out", "o", cwd=tmp_path) == ["out"]
    assert bash_complete(bash_file, "iowhy", "attach", "-p", "") == []  # a PID: no files
    # import: its format first (choices), then capture files, options anywhere
    assert bash_complete(bash_file, "iowhy", "import", "") == ["blktrace", "ftrace"]
    assert bash_complete(bash_file, "iowhy", "import", "f") == ["ftrace"]
    assert bash_complete(bash_file, "iowhy", "import", "-o", "x.iowt", "b") == ["blktrace"]
    assert bash_complete(bash_file, "iowhy", "import", "ftrace", "ru", cwd=tmp_path) == \
        ["run1.iowt"]
    assert bash_complete(bash_file, "iowhy", "import", "ftrace", "run1.iowt", "--pid", "1",
                         "ru", cwd=tmp_path) == ["run1.iowt"]
    # the workload of `record`: a command, after `--` or after the options
    assert "bash" in bash_complete(bash_file, "iowhy", "record", "-o", "x.iowt", "--", "bas")
    assert "bash" in bash_complete(bash_file, "iowhy", "record", "-q", "bas")
    # options after the workload's command are its own, not record's
    assert "--output" not in bash_complete(bash_file, "iowhy", "record", "--", "ls", "-")
    assert "--output" not in bash_complete(bash_file, "iowhy", "record", "-q", "ls", "-")
    assert "--dry-run" in bash_complete(bash_file, "iowhy", "record", "--output", "=", "x",
                                        "--d")


# -- zsh -------------------------------------------------------------------------------------

ZSH_DRIVER = r'''
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1='>'; fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z "setopt nolistbeep; LISTMAX=100000; zstyle ':completion:*' verbose no"
zpty -w -n z "$2"$'\t'
out=""; quiet=0
while ((quiet < 15)); do
  sleep 0.1
  if zpty -r -t z chunk; then out+=$chunk; quiet=0; while zpty -r -t z chunk; do out+=$chunk; done
  else ((quiet++)); fi
done
zpty -d z
print -r -- "$out"
'''


@pytest.fixture(scope="module")
def zsh_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("zsh")
    (d / "_iowhy").write_text(clidoc.zsh_completion(TREE))
    return d


def need_zsh() -> None:
    if shutil.which("zsh") is None:
        pytest.skip("needs zsh")


def test_zsh_syntax_and_every_option(zsh_dir):
    need_zsh()
    p = subprocess.run(["zsh", "-n", str(zsh_dir / "_iowhy")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    text = (zsh_dir / "_iowhy").read_text()
    funcs = dict(re.findall(r"^(_iowhy\w*)\(\) \{\n(.*?)^\}", text, re.M | re.S))
    for c in [TREE] + COMMANDS:
        body = funcs[clidoc._zfunc(c)]
        for o in options_of(c):
            assert re.search(rf"[')}}*]{re.escape(o)}[+=\[]", body), (c.name, o)
        for ch in subcommands(c):
            assert f"'{ch}:" in body, (c.name, ch)


def zsh_complete(zsh_dir: Path, typed: str, cols: int = 400) -> str:
    p = subprocess.run(["zsh", "-f", "-c", ZSH_DRIVER, "x", str(zsh_dir), typed],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, COLUMNS=str(cols), LINES="200", TERM="dumb"))
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", p.stdout)


def test_zsh_completes(zsh_dir):
    need_zsh()
    t0 = time.monotonic()
    out = zsh_complete(zsh_dir, "iowhy ")
    for name in subcommands(TREE):
        assert re.search(rf"\b{name}\b", out.split("iowhy ", 1)[-1]), (name, out[-2000:])
    out = zsh_complete(zsh_dir, "iowhy lab run --disk ")
    tail = out.split("--disk", 1)[-1]
    assert all(d in tail for d in ("hdd-7200", "ssd", "ram")), out[-2000:]
    out = zsh_complete(zsh_dir, "iowhy record --")
    tail = out.split("record --", 1)[-1]
    for o in options_of(next(c for c in COMMANDS if c.path == ("record",))):
        if o.startswith("--"):
            assert o in tail, (o, out[-3000:])
    assert time.monotonic() - t0 < 60
