"""The ``ancre`` command lines of README.md and docs/*.md that name the bundled corpus run, as
written, on a copy of it (issue 45): each exits 0, after one ``ancre sync`` like ``make demo``'s;
and the output a page shows for a command (``<!-- docs-test: output of `ancre …` -->``) is what
that command prints. tests/unit/test_docs.py parses every line and checks the blocks that can't
run here; tests/support/docs_blocks.py finds them."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import docs_blocks as docs

ANCRE = Path(sys.executable).with_name("ancre")
LINES = [(b, argv) for b in docs.all_blocks() if b.lang in ("bash", "sh")
         for argv in docs.ancre_lines(b.text) if docs.runnable(argv)]
OUTPUTS = [b for b in docs.all_blocks() if b.marker and b.marker.startswith("output of `ancre ")]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out as the checkout the docs speak from: ``examples/axonix`` (no index),
    synced once as ``make demo`` does."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(docs.ROOT / "examples" / "axonix", root / "examples" / "axonix",
                    ignore=shutil.ignore_patterns("ancre-data"))
    r = _run(root, ["sync", "--config", docs.BUNDLED])
    assert r.returncode == 0, r.stdout + r.stderr
    return root


def _run(root: Path, argv: list[str], columns: int = 100) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCRE_") and k not in ("NOTIFY_SOCKET", "COLUMNS")}
    env.update(ANCRE_API_KEY=secrets.token_hex(32), ANCRE_OWUI_JWT_SECRET=secrets.token_hex(32), COLUMNS=str(columns),
               PATH=f"{ANCRE.parent}{os.pathsep}{env.get('PATH', '')}")
    return subprocess.run([str(ANCRE), *argv], cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_the_docs_run_commands_on_the_bundled_corpus() -> None:
    """The demo's commands and the CLI page's examples are among them (not a test that checks
    nothing)."""
    commands = {" ".join(a for a in argv if not a.startswith("-") and " " not in a)[:20] for _, argv in LINES}
    assert len(LINES) >= 15, LINES
    assert any(c.startswith("report exposure") for c in commands) and any(c.startswith("audit verify") for c in commands)


@pytest.mark.parametrize(("block", "argv"), LINES, ids=[f"{b.where} ancre {' '.join(a)[:70]}" for b, a in LINES])
def test_a_command_of_the_docs_runs(checkout: Path, block: docs.Block, argv: list[str]) -> None:
    r = _run(checkout, argv)
    assert r.returncode == 0, f"{block.where}: ancre {' '.join(argv)} → exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    assert "Traceback" not in r.stderr


def _normalise(text: str) -> list[str]:
    """Lines without trailing spaces, and the timing a run prints (``read in 0.2 s``) left out."""
    return [re.sub(r"\d+(\.\d+)? s\b", "… s", line.rstrip()) for line in text.strip().splitlines()]


@pytest.mark.parametrize("block", OUTPUTS, ids=[b.where for b in OUTPUTS])
def test_the_output_a_page_shows_is_the_commands(checkout: Path, block: docs.Block) -> None:
    """The page's block is what the command prints on the bundled corpus, at the width of the
    block (a terminal that wide), every line."""
    command = re.match(r"output of `ancre (?P<cmd>[^`]+)`", block.marker or "")
    assert command, block.marker
    argv = [*command["cmd"].split(), "--config", docs.BUNDLED]
    width = max(len(line) for line in block.text.splitlines())
    r = _run(checkout, argv, columns=width)
    assert r.returncode == 0, r.stderr
    assert _normalise(r.stdout) == _normalise(block.text), f"{block.where}: the page shows another output than\n{r.stdout}"
