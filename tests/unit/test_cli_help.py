"""Every ``ancre`` command's help is whole (issue 45): in the command lists (``ancre --help``,
``ancre audit --help``…) each command shows its one-line summary, a whole sentence, never a
paragraph cut or broken across lines; ``ancre <command> --help`` shows its whole docstring,
square brackets included (``[store] min_free_mb`` is text, not markup). Rendered by typer and
rich as a user sees them, at 80 and 120 columns."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from ancre.app.cli import app

runner = CliRunner()


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, cmd in group.commands.items():
        yield (*path, name), cmd
        if hasattr(cmd, "commands"):  # a group (typer's own click)
            yield from _commands(cmd, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


def _flat(text: str) -> str:
    """Rendered help without its box drawing and line breaks: words separated by one space."""
    return " ".join(re.sub(r"[│╭╮╰╯─┌┐└┘]", " ", text).split())


def _help(*args: str, width: int) -> str:
    res = runner.invoke(app, [*args, "--help"], env={"COLUMNS": str(width), "TERMINAL_WIDTH": str(width)},
                        terminal_width=width)
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_the_summary_is_one_whole_sentence(path: tuple[str, ...], cmd: Any) -> None:
    summary = (cmd.help or "").split("\n\n")[0]
    assert summary and "\n" not in summary.strip(), f"ancre {' '.join(path)}: the summary must be one line: {summary!r}"
    assert summary.strip().endswith("."), summary
    assert len(summary.strip()) <= 100, summary


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_lists_and_pages_show_the_whole_text(path: tuple[str, ...], cmd: Any, width: int) -> None:
    summary = " ".join((cmd.help or "").split("\n\n")[0].split())
    listing = _flat(_help(*path[:-1], width=width))
    assert summary in listing, f"`ancre {' '.join(path[:-1])} --help` cuts {path[-1]}: {summary!r}"
    page = _flat(_help(*path, width=width))
    for para in (cmd.help or "").split("\n\n"):
        assert " ".join(para.replace("\\b", "").split()) in page, para
