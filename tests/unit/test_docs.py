"""Every fenced command and configuration block of README.md and docs/*.md is checked (issue 45):
shell blocks are ``bash -n`` clean and their ``ancre`` lines parse against the real CLI, TOML
blocks load with ancre's settings models, Python blocks compile and import what they name; a
block that can't be checked says why in a ``<!-- docs-test: … -->`` marker, listed by
:func:`test_unchecked_blocks_say_why` (``pytest -v`` shows each). The ``ancre`` lines that name the
bundled corpus are run by tests/integration/test_docs_commands.py. How blocks are found and
checked: tests/support/docs_blocks.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import docs_blocks as docs

from ancre.errors import ConfigError

BLOCKS = docs.all_blocks()
SHELL = [b for b in BLOCKS if b.lang in ("bash", "sh")]
TOML = [b for b in BLOCKS if b.lang == "toml"]
PYTHON = [b for b in BLOCKS if b.lang == "python"]
UNCHECKED = [b for b in BLOCKS if b.lang not in docs.CHECKED]
ANCRE_LINES = [(b, argv) for b in SHELL for argv in docs.ancre_lines(b.text)]


def _ids(blocks: list[docs.Block]) -> list[str]:
    return [b.where for b in blocks]


@pytest.fixture(autouse=True)
def _no_ancre_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block loads as written: no ``ANCRE_…`` variable of the machine running the tests."""
    import os

    for name in [n for n in os.environ if n.startswith("ANCRE_")]:
        monkeypatch.delenv(name)


def test_the_docs_have_blocks_of_every_kind() -> None:
    assert len(docs.doc_files()) >= 15
    assert len(SHELL) >= 10 and len(TOML) >= 8 and PYTHON and len(ANCRE_LINES) >= 15


@pytest.mark.parametrize("block", SHELL, ids=_ids(SHELL))
def test_shell_block_parses(block: docs.Block) -> None:
    assert docs.bash_n(block.text) == "", f"{block.where}: bash -n"
    docs.commands(block.text)  # every line splits into words (quotes closed)


NOT_RUN = [b for b in SHELL if any(not docs.runnable(a) for a in docs.ancre_lines(b.text))]


@pytest.mark.parametrize("block", NOT_RUN, ids=[f"{b.where}: {b.marker}" for b in NOT_RUN])
def test_a_block_whose_ancre_lines_cannot_run_here_says_why(block: docs.Block) -> None:
    """Its ``ancre`` lines name another configuration than the bundled corpus's, or run until
    stopped: they are parsed, not run (tests/integration/test_docs_commands.py runs the others)."""
    assert block.marker, f"{block.where}: ancre lines that can't run here, and no <!-- docs-test: reason --> before the block"


@pytest.mark.parametrize(("block", "argv"), ANCRE_LINES, ids=[f"{b.where} ancre {' '.join(a)[:60]}" for b, a in ANCRE_LINES])
def test_ancre_line_parses_against_the_cli(block: docs.Block, argv: list[str]) -> None:
    try:
        docs.parse_ancre(argv)
    except docs.UsageError as e:
        pytest.fail(f"{block.where}: ancre {' '.join(argv)}: {e.format_message()}")


@pytest.mark.parametrize("block", TOML, ids=_ids(TOML))
def test_toml_block_loads_with_the_settings_models(block: docs.Block, tmp_path: Path) -> None:
    try:
        docs.load_toml(block.text, tmp_path)
    except ConfigError as e:
        pytest.fail(f"{block.where}: {e}")
    if block.marker and block.marker.startswith("paths "):
        assert docs.missing_paths(block.text, block.marker, tmp_path / "mapped") == [], block.where


@pytest.mark.parametrize("block", PYTHON, ids=_ids(PYTHON))
def test_python_block_compiles_and_imports(block: docs.Block) -> None:
    assert docs.python_problems(block.text) == [], block.where


@pytest.mark.parametrize("block", UNCHECKED, ids=[f"{b.where} {b.lang or 'no language'}: {b.marker}" for b in UNCHECKED])
def test_unchecked_blocks_say_why(block: docs.Block) -> None:
    """A block of another language (output, a folder map) carries the reason it is not checked."""
    assert block.marker, f"{block.where}: a ```{block.lang} block without <!-- docs-test: reason --> before it"


def test_markers_sit_on_blocks_that_exist() -> None:
    """A marker is the last line before a fence: one left after its block was removed would
    mark the next block by mistake or nothing at all."""
    import re

    for path in docs.doc_files():
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if docs.MARKER.match(line):
                after = next((x for x in lines[i + 1 :] if x.strip()), "")
                assert re.match(r"\s*```", after), f"{path.name}:{i + 1}: a docs-test marker with no block after it"


# ---------------------------------------------------------------- the checks fail when they must


@pytest.mark.parametrize("argv", [
    ["sync", "--bogus"],                                   # an option that does not exist
    ["serch", "x", "--as", "alice"],                       # a command that does not exist
    ["audit", "verify", "--started-without-witnes"],       # a misspelt option of a subcommand
    ["search", "--as", "alice"],                           # a missing argument
    ["acl", "explain", "x"],                               # a missing required option
])
def test_a_line_naming_what_the_cli_does_not_have_fails(argv: list[str]) -> None:
    with pytest.raises(docs.UsageError):
        docs.parse_ancre(argv)


def test_lines_that_exist_parse() -> None:
    assert docs.parse_ancre(["audit", "verify", "--json", "--config", "x.toml"]) == ["audit", "verify"]
    assert docs.parse_ancre(["--version"]) == []
    assert docs.ancre_lines("sudo -u ancre -g ancre-admin /opt/ancre/bin/ancre status --config /etc/ancre/ancre.toml\n"
                            "sudo systemd-run --pipe -p User=ancre /opt/ancre/bin/ancre check  # c\n"
                            "systemctl status ancre ancre-api\nsudo install -d /etc/ancre") == [
        ["status", "--config", "/etc/ancre/ancre.toml"], ["check"]]


@pytest.mark.parametrize("text", [
    "[store]\nkind = \"edge\"\nmin_free_mbs = 1\n",                     # a key that does not exist
    "[directory]\nkind = \"file\"\nurl = \"ldaps://dc1\"\n",              # a key of another kind
    "[[sources]]\nid = \"x\"\nkind = \"folder\"\nroot = \"/srv\"\nwatch = \"sometimes\"\n",  # a bad value
    "[api]\nport = \"eight thousand\"\n",
])
def test_a_block_naming_a_key_that_does_not_exist_fails(text: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        docs.load_toml(text, tmp_path)


def test_a_paths_block_whose_files_are_missing_fails(tmp_path: Path) -> None:
    text = '[directory]\nkind = "file"\npath = "/srv/x/no-such.json"\n'
    assert docs.missing_paths(text, "paths /srv/x = examples/axonix", tmp_path)


def test_a_python_block_importing_what_does_not_exist_fails() -> None:
    assert docs.python_problems("from ancre.query import QueryCor\n")
    assert docs.python_problems("from ancre.nope import x\n")
    assert docs.python_problems("def f(:\n")
    assert docs.python_problems("from ancre.query import QueryCore\nimport httpx\n") == []


def test_a_bad_shell_block_fails() -> None:
    assert docs.bash_n("if true; then echo\n")
    with pytest.raises(ValueError):
        docs.commands("echo 'never closed\n")
