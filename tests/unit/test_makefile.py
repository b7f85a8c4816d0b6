"""``make demo`` on a fresh machine says what to install (issue 45): a Python without the venv
module (Debian's python3 without ``python3-venv``) or older than 3.11 stops with one line naming
the package or the version, and leaves no half-made ``.venv`` behind."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _fake_python(tmp_path: Path, *, version_ok: bool) -> Path:
    """A ``python3`` that passes or fails the version check, and whose ``-m venv`` fails as
    Debian's does without python3-venv (after creating the folder)."""
    exe = tmp_path / "python3"
    exe.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-c" ]; then exit {0 if version_ok else 1}; fi\n'
        'if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3"; '
        'echo "The virtual environment was not created successfully because ensurepip is not available." >&2; exit 1; fi\n'
        "exit 2\n",
        encoding="utf-8",
    )
    exe.chmod(0o755)
    return exe


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(("version_ok", "said"), [
    (True, "sudo apt install python3-venv"),
    (False, "ancre needs Python 3.11 or later"),
])
def test_make_install_says_what_is_missing(tmp_path: Path, version_ok: bool, said: str) -> None:
    venv = tmp_path / "venv"
    res = subprocess.run(["make", "--no-print-directory", "install", f"PY={_fake_python(tmp_path, version_ok=version_ok)}",
                          f"VENV={venv}"], cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode != 0 and said in res.stderr, res.stderr
    assert not venv.exists()
