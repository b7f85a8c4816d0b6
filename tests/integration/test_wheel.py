"""The wheel: built from a copy of the source tree (offline, no build isolation), installed into a
fresh virtual environment, it holds every module of the package — found on disk, not listed by
hand: a package added to the tree ships without an edit of pyproject.toml — and each one imports
from the installed copy; ``py.typed`` and the console script ship."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOT_PACKAGE = ("tests", "examples", "docs", "systemd", "build")
"""Top-level folders of the repository that are not part of the ``ancre`` package."""
NEW_PACKAGE = {"ancre.connectors.toy_probe", "ancre.connectors.toy_probe.part"}
"""A package the fixture adds to the copied tree: found without any edit of pyproject.toml."""


def _source_modules() -> set[str]:
    """``ancre.<dotted>`` for every module of the package in the source tree: the ``.py`` files of
    the root and of each folder below it that has an ``__init__.py`` (``setup.py`` excluded)."""
    out = set()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in NOT_PACKAGE or rel.parts[0].startswith(".") or rel == Path("setup.py"):
            continue
        if not all((ROOT / Path(*rel.parts[:i]) / "__init__.py").is_file() for i in range(1, len(rel.parts))):
            continue
        parts = rel.with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.add(".".join(("ancre", *parts)))
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the tree (so no ``build/`` or ``*.egg-info`` lands in it)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        *NOT_PACKAGE, ".*", "*.egg-info", "__pycache__", "ancre-data", "*.pyc"))
    (src / "connectors" / "toy_probe").mkdir()
    (src / "connectors" / "toy_probe" / "__init__.py").write_text('"""A package added to the tree."""\n', encoding="utf-8")
    (src / "connectors" / "toy_probe" / "part.py").write_text("VALUE = 1\n", encoding="utf-8")
    dist = base / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", str(dist), str(src)],
        check=True, timeout=600,
    )
    (whl,) = dist.glob("ancre-*.whl")
    return whl


def test_the_wheel_holds_every_module_and_nothing_else(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    modules = set()
    for name in names:
        if name.endswith(".py"):
            dotted = name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            modules.add(dotted)
    assert modules == _source_modules() | NEW_PACKAGE
    assert "ancre/py.typed" in names
    assert not [n for n in names if not n.startswith(("ancre/", "ancre-"))], "files outside the ancre package"
    (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["ancre"]


def test_every_module_imports_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, timeout=300)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # the dependencies: the test environment's site-packages, appended to the path (its .pth files,
    # among them the editable install of the source tree, are not run)
    (site / "zz_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    probe = """
import importlib, importlib.resources, json, pkgutil, sys
import ancre
mods = sorted(m.name for m in pkgutil.walk_packages(ancre.__path__, "ancre."))
for m in mods:
    importlib.import_module(m)
print(json.dumps({"file": ancre.__file__, "modules": ["ancre", *mods],
                  "typed": importlib.resources.files("ancre").joinpath("py.typed").is_file(),
                  "where": {m: sys.modules[m].__file__ for m in mods}}))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run([str(python), "-c", probe], check=True, capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=600)
    got = json.loads(out.stdout.splitlines()[-1])
    assert Path(got["file"]).is_relative_to(site)
    assert all(Path(f).is_relative_to(site) for f in got["where"].values()), "a module came from the source tree"
    assert set(got["modules"]) == _source_modules() | NEW_PACKAGE
    assert got["typed"]
    cli = subprocess.run([str(venv / "bin" / "ancre"), "--help"], check=True, capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert "ask" in cli.stdout and "sync" in cli.stdout
