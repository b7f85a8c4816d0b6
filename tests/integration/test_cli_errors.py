"""Clear errors, never tracebacks (issue 43, point 3): a ``--since`` / ``--until`` out of range,
and a user who may not use the data folder — the ``ancre`` command itself, in a process of its
own: exit status 2, one line on stderr naming the path and the permission it needs.

The second runs each command as root *without any capability* (``setpriv --bounding-set=-all``:
uid 0 keeps no CAP_DAC_OVERRIDE after exec, so file modes apply as to any user) on a data folder
owned by ``nobody``, mode 0700 — the situation of an admin who is not the service's user."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ancre.models import visible

ANCRE = str(Path(sys.executable).with_name("ancre"))
REPO = Path(__file__).resolve().parents[2]


def ancre(*args: str, cfg: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, ANCRE, *args, "--config", str(cfg)], capture_output=True, text=True, timeout=300,
                          check=False)


def one_line_error(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and "Error:" not in res.stderr.replace("error:", ""), res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("errors")
    (root / "share" / "A").mkdir(parents=True)
    (root / "share" / "A" / "contrat.md").write_text("Le contrat de maintenance coûte CHF 3 840 HT par mois.\n")
    shutil.copy2(REPO / "examples" / "axonix" / "directory.json", root / "directory.json")
    cfg = root / "ancre.toml"
    cfg.write_text('data_dir = "data"\n[directory]\nkind = "file"\npath = "directory.json"\n'
                   '[[sources]]\nid = "s"\nroot = "share"\nprincipals = ["Everyone"]\n', encoding="utf-8")
    res = ancre("sync", cfg=cfg)
    assert res.returncode == 0, res.stdout + res.stderr
    assert ancre("ask", "Combien coûte le contrat ?", "--as", "alice", cfg=cfg).returncode == 0
    return cfg


@pytest.mark.parametrize("option", ["--since", "--until"])
@pytest.mark.parametrize("value", ["99999999d", "9" * 400 + "w", "0001-01-01T00:00:00+05:00", "2026-13-45"])
@pytest.mark.parametrize("command", [("audit", "stats"), ("audit", "who-saw", "A"), ("audit", "user", "alice")])
def test_a_period_out_of_range_is_one_clear_line(site: Path, command: tuple[str, ...], option: str, value: str) -> None:
    line = one_line_error(ancre(*command, option, value, cfg=site))
    assert ("out of range" in line or "not a date" in line) and value[:20] in line


COMMANDS = [
    ("audit", "stats"), ("audit", "verify"), ("audit", "who-saw", "A"), ("audit", "user", "alice"), ("status",),
    ("search", "contrat", "--as", "alice"), ("ask", "contrat", "--as", "alice"), ("report", "exposure"), ("sync",),
    ("reindex", "--yes"),
]


@pytest.fixture
def locked(site: Path):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (util-linux) to run a command without the capabilities that override modes")
    data = site.parent / "data"
    nobody = 65534
    for p in [data, *data.rglob("*")]:
        os.lchown(p, nobody, nobody)
    data.chmod(0o700)
    yield data
    for p in [data, *data.rglob("*")]:
        os.lchown(p, 0, 0)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_user_without_access_to_the_data_folder_gets_one_line(site: Path, locked: Path, command: tuple[str, ...]) -> None:
    line = one_line_error(ancre(*command, cfg=site, prefix=("setpriv", "--bounding-set=-all", "--")))
    # the commands that check the configuration's paths first name the key too (issue 45)
    assert re.match(rf"error: (data_dir: )?{re.escape(str(locked))}: permission denied — this command must ", line), line
    assert "(x)" in line or "(r-x)" in line  # the permission needed there
    assert "drwx------ nobody:nogroup" in line and "you are root" in line and "sudo -u nobody ancre" in line


def test_the_line_writes_out_a_hostile_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The path in the line may hold what a folder was named: written out, like any admin output."""
    import typer

    from ancre.app.cli_common import errors

    odd = tmp_path / "x\x1b]0;t\x07\u202e"
    odd.mkdir()

    @errors
    def command() -> None:
        raise PermissionError(13, "Permission denied", str(odd / "f"))

    with pytest.raises(typer.Exit) as stop:
        command()
    err = capsys.readouterr().err
    assert stop.value.exit_code == 2 and err.count("\n") == 1
    assert "x\\x1b]0;t\\x07<U+202E>" in err and visible(err.rstrip("\n")) == err.rstrip("\n")
