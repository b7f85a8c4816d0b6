"""The distribution's shape: one package ``ancre`` whose parts import as ``ancre.<part>``, every
module importable (a module importing a file that was never added fails here), and no top-level
``daemon`` / ``query`` / ``acl`` / ``connectors`` module installed."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import ancre

ROOT = Path(ancre.__file__).resolve().parent
PARTS = ("acl", "api", "connectors", "daemon", "index", "query", "testing")


def _modules() -> list[str]:
    names = []
    for p in sorted(ROOT.rglob("*.py")):
        rel = p.relative_to(ROOT)
        if rel.parts[0] not in PARTS and len(rel.parts) > 1:
            continue  # tests/, examples/, .venv/ ...
        if rel.parts[0].startswith(".") or rel.parts[0] == "tests":
            continue
        dotted = ".".join(rel.with_suffix("").parts)
        if dotted == "__init__":
            continue
        names.append("ancre." + dotted.removesuffix(".__init__"))
    return names


@pytest.mark.parametrize("name", _modules())
def test_every_module_imports(name: str) -> None:
    importlib.import_module(name)


@pytest.mark.parametrize("part", ["daemon", "query", "acl", "connectors", "index", "api"])
def test_parts_are_not_top_level_imports(part: str, tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", f"import importlib.util, sys; print(importlib.util.find_spec({part!r}) is None)"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    )
    assert out.stdout.strip() == "True", f"a top-level '{part}' module is importable"


def test_console_script_entry_point() -> None:
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "ancre"]
    assert ep.value == "ancre.app.cli:main"


def test_the_shipped_source_contract_imports_without_pytest() -> None:
    """``ancre.testing`` ships with ancre, whose dependencies do not include pytest: importing it
    must not import pytest (its tests import it when they run)."""
    code = (
        "import sys; sys.modules['pytest'] = None\n"  # any `import pytest` now raises ImportError
        "import ancre.testing as t\n"
        "assert 'pytest' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print(sorted(n for n in t.__all__ if n.endswith('Contract')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == str(
        ["AclContract", "ChangeFeedContract", "ContentContract", "ListingContract", "LiveRightsContract", "SourceContract"]
    )
