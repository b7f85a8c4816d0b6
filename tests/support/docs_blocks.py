"""The fenced blocks of README.md and docs/*.md, and the checks a docs test runs on them (issue 45).

Every fenced block is one of:

- ``bash`` / ``sh``: ``bash -n`` clean, and each command line that runs ``ancre`` (after ``sudo``
  and its options, ``systemd-run`` and its options, variable assignments, ``exec``, ``env``, or
  inside ``sh -c '…'``) parses against the real CLI (:func:`parse_ancre`: the command exists, its
  options exist, its arguments are there); tests/integration/test_docs_commands.py also runs the
  lines that name the bundled corpus;
- ``toml``: loaded the way ``ancre`` loads a file (:func:`ancre.config.load_settings`: an unknown
  key or a bad value is refused, naming it), from a folder of its own, no ``ANCRE_…`` variable set
  (secrets are named, not read, when a file loads);
- ``python``: compiles, and each ``from ancre… import name`` it makes imports;
- anything else (output, a folder map): marked right before it, on the line above the fence, with
  ``<!-- docs-test: REASON -->`` saying why it can't be checked — the test lists them.

A marker may also go before a checked block: ``<!-- docs-test: not run — why -->`` before a shell
block whose ``ancre`` lines can't run here (they are still parsed), ``<!-- docs-test: paths
/srv/x = examples/axonix -->`` before a TOML block whose paths must exist once that prefix is
mapped to a folder of the repository, ``<!-- docs-test: output of `ancre …` -->`` before a text
block that the integration test compares with that command's output on the bundled corpus.
"""

from __future__ import annotations

import ast
import importlib
import re
import shlex
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:  # typer ≥ 0.20 carries its own copy of click (typer._click)
    from typer._click.exceptions import UsageError
    from typer.exceptions import Exit as _Exit
except ImportError:  # pragma: no cover - an older typer on the real click
    from click.exceptions import Exit as _Exit  # type: ignore[assignment]
    from click.exceptions import UsageError  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[2]
CHECKED = {"bash", "sh", "toml", "python"}
MARKER = re.compile(r"^\s*<!-- docs-test: (?P<reason>.+?) -->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+)(?P<lang>[\w+-]*)\s*$")
BUNDLED = "examples/axonix/ancre.toml"
LONG_RUNNING = {"daemon", "serve", "api"}
"""Commands that run until stopped: parsed, never run by the docs test."""


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is (``file`` relative to the repository, the fence's 1-based
    ``line``), its language (``""`` when none), its text (dedented) and the reason of the
    ``docs-test`` marker right before it (``None`` when there is none)."""

    file: str
    line: int
    lang: str
    text: str
    marker: str | None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every page of docs/ (CONFIGURATION.md included: it is generated, and holds
    no fenced block today)."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def blocks(path: Path, root: Path = ROOT) -> list[Block]:
    """The fenced blocks of the Markdown file ``path``, in order. Raises ``ValueError`` on a fence
    that is never closed."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == m["fence"]), None)
        if end is None:
            raise ValueError(f"{path}:{i + 1}: a ``` fence that is never closed")
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(before)
        text = textwrap.dedent("\n".join(lines[i + 1 : end])) + "\n"
        found.append(Block(str(path.relative_to(root)), i + 1, m["lang"], text, marker["reason"] if marker else None))
        i = end + 1
    return found


def all_blocks(root: Path = ROOT) -> list[Block]:
    return [b for p in doc_files(root) for b in blocks(p, root)]


# --------------------------------------------------------------------------- shell

_SUDO_ARG = {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "--user", "--group"}
_RUN_ARG = {"-p", "--property", "-u", "--unit", "-E", "--setenv", "--uid", "--gid", "-M", "--machine", "--slice"}


def logical_lines(script: str) -> list[str]:
    """The script's lines joined where a line ends with ``\\`` or a quote is still open."""
    out: list[str] = []
    buf = ""
    for line in script.splitlines():
        buf = f"{buf}\n{line}" if buf else line
        if buf.endswith("\\"):
            buf = buf[:-1] + " "
            continue
        try:
            shlex.split(buf, comments=True)
        except ValueError:  # a quote still open: the next line goes on
            continue
        out.append(buf)
        buf = ""
    if buf.strip():
        raise ValueError(f"unterminated shell line: {buf!r}")
    return out


def commands(script: str) -> list[list[str]]:
    """The simple commands of a shell script as word lists: comments dropped, split at ``;``,
    ``&&``, ``||``, ``|``, ``&``, parentheses and line ends (quotes kept together). Raises
    ``ValueError`` on a quote never closed."""
    out: list[list[str]] = []
    for line in logical_lines(script):
        lex = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lex.whitespace_split = True
        lex.commenters = "#"
        out.append([])
        for tok in lex:
            if tok in {";", "&&", "||", "|", "&", ";;", "(", ")"} or set(tok) <= set(";&|()<>"):
                out.append([])
            else:
                out[-1].append(tok)
    return [c for c in out if c]


def ancre_argv(words: list[str]) -> list[str] | None:
    """The arguments given to ``ancre`` by one simple command (``None`` when it runs something
    else): after variable assignments, ``exec``/``env``/``time``, ``sudo``, ``systemd-run`` or ``setpriv`` and
    their options, ``sh -c 'script'`` (the script's first ``ancre`` command)."""
    i = 0
    while i < len(words):
        w = words[i]
        if re.fullmatch(r"[A-Za-z_]\w*=.*", w) or w in {"exec", "env", "time", "nohup"}:
            i += 1
        elif w in {"sudo", "systemd-run", "setpriv"}:
            takes = _SUDO_ARG if w == "sudo" else _RUN_ARG if w == "systemd-run" else set()
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 2 if words[i] in takes else 1
        elif w in {"sh", "bash"} and i + 2 < len(words) and words[i + 1] == "-c":
            inner = [a for c in commands(words[i + 2]) if (a := ancre_argv(c)) is not None]
            return inner[0] if inner else None
        elif w == "ancre" or w.endswith("/bin/ancre"):
            return words[i + 1 :]
        else:
            return None
    return None


def ancre_lines(script: str) -> list[list[str]]:
    """Every ``ancre`` command line of a shell script, as argument lists."""
    found: list[list[str]] = []
    for words in commands(script):
        argv = ancre_argv(words)
        if argv is not None:
            found.append(argv)
        elif words[:2] in (["sh", "-c"], ["bash", "-c"]):
            found.extend(ancre_lines(words[2]))
    return found


def runnable(argv: list[str]) -> bool:
    """Whether the docs test runs this ``ancre`` line: it names the bundled corpus's configuration
    and does not run until stopped (``reindex`` only with ``--yes``)."""
    if BUNDLED not in argv:
        return False
    words = [a for a in argv if not a.startswith("-")]
    return not (words and words[0] in LONG_RUNNING) and not (words[:1] == ["reindex"] and "--yes" not in argv)


def bash_n(script: str) -> str:
    """``bash -n``'s complaint about ``script`` (``""`` when it parses)."""
    r = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    return r.stderr.strip() if r.returncode else ""


def parse_ancre(argv: list[str]) -> list[str]:
    """Parse ``argv`` against ancre's CLI (typer's click command) without running it; returns the
    command path (``["audit", "verify"]``). Raises ``click.UsageError`` (an unknown command or
    option, a missing argument, a bad value) with click's message — typer's own copy of click
    (``typer._click``, :data:`UsageError`)."""
    import typer.main

    from ancre.app.cli import app

    cmd: Any = typer.main.get_command(app)
    path: list[str] = []
    rest, parent = list(argv), None
    while True:
        try:
            ctx = cmd.make_context("ancre", rest, parent=parent, resilient_parsing=False)
        except _Exit:  # --help, --version: parsed, and would print
            return path
        if not hasattr(cmd, "resolve_command"):  # a command, not a group of them
            return path
        args = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if not args:
            return path
        name, sub, rest = cmd.resolve_command(ctx, args)
        if sub is None or name is None:
            raise UsageError(f"no such command {args[0]!r}")
        path.append(name)
        cmd, parent = sub, ctx


# --------------------------------------------------------------------------- TOML, Python

PATHS = re.compile(r"^paths (?P<prefix>/\S+) = (?P<folder>\S+)$")


def load_toml(text: str, folder: Path) -> object:
    """Load ``text`` as ``folder/ancre.toml`` with :func:`ancre.config.load_settings` (relative
    paths against ``folder``, as for a real file). Raises :class:`ancre.errors.ConfigError`
    naming the key it refuses."""
    from ancre.config import load_settings

    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / "ancre.toml"
    cfg.write_text(text, encoding="utf-8")
    return load_settings(cfg)


def missing_paths(text: str, marker: str, folder: Path) -> list[str]:
    """For a TOML block marked ``paths /prefix = repo/folder``: the path keys that can't play
    their role once ``/prefix`` is that folder of the repository and ``data_dir`` a fresh one."""
    from ancre.settings.locations import path_problems

    m = PATHS.match(marker)
    assert m, f"not a paths marker: {marker!r}"
    mapped = text.replace(m["prefix"], str(ROOT / m["folder"]))
    mapped = re.sub(r'(?m)^data_dir = ".*"$', f'data_dir = "{folder / "data"}"', mapped)
    return path_problems(load_toml(mapped, folder))  # type: ignore[arg-type]


def python_problems(text: str) -> list[str]:
    """Why a Python block would not run as written: a syntax error, or an ``ancre`` import that
    does not exist (``from ancre.query import QueryCore``)."""
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return [f"syntax error: {e}"]
    problems: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ancre":
            try:
                module = importlib.import_module(node.module)
            except ImportError as e:
                problems.append(f"{node.module}: {e}")
                continue
            problems += [f"{node.module}.{a.name} does not exist" for a in node.names if not hasattr(module, a.name)]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "ancre":
                    try:
                        importlib.import_module(a.name)
                    except ImportError as e:
                        problems.append(f"{a.name}: {e}")
    return problems


__all__ = [
    "BUNDLED", "CHECKED", "Block", "UsageError", "all_blocks", "ancre_argv", "ancre_lines", "bash_n", "blocks", "commands", "doc_files",
    "load_toml", "missing_paths", "parse_ancre", "python_problems", "runnable",
]
