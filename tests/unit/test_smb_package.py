"""The SMB source's wire layer is quarantined: of all of ancre's modules, only
``ancre.connectors.smb.wire`` imports smbclient's or smbprotocol's private modules
(``smbclient._io``, ``smbclient._os``, ``smbclient._pool`` …) or reads their private attributes
(``_t_exc``). import-linter can't say it (its ``forbidden`` contracts name root-level external
packages only), so this test reads every module's imports with :mod:`ast`."""

from __future__ import annotations

import ast
from pathlib import Path

import ancre

ROOT = Path(ancre.__file__).resolve().parent
WIRE = ROOT / "connectors" / "smb" / "wire.py"
EXTERNAL = ("smbclient", "smbprotocol")


def _production_modules() -> list[Path]:
    skip = {"tests", "build", ".venv", "examples", "docs"}
    return [p for p in ROOT.rglob("*.py") if not skip & set(p.relative_to(ROOT).parts) and p.name != "setup.py"]


def _private_uses(tree: ast.AST) -> list[str]:
    """``smbclient._io``-like imports and ``._x`` attribute reads of a module (dunder excluded)."""
    out: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] in EXTERNAL and any(p.startswith("_") and not p.startswith("__") for p in parts[1:]):
                out.append(name)
        if isinstance(node, ast.Constant) and node.value == "_t_exc":
            out.append("_t_exc")
    return out


def test_only_the_wire_module_touches_smbclient_privates() -> None:
    offenders = {
        str(p.relative_to(ROOT)): uses
        for p in _production_modules()
        if p != WIRE and (uses := _private_uses(ast.parse(p.read_text(encoding="utf-8"))))
    }
    assert offenders == {}


def test_the_wire_module_is_where_they_are() -> None:
    # the check above looks at the right thing: the wire module does use them
    uses = _private_uses(ast.parse(WIRE.read_text(encoding="utf-8")))
    assert {"smbclient._io", "smbclient._os", "smbclient._pool", "_t_exc"} <= set(uses)


def test_the_connector_package_keeps_its_public_names() -> None:
    from ancre.connectors import smb
    from ancre.connectors.registry import source_kind

    assert source_kind("smb") is smb.KIND
    for name in ("SmbConnector", "SmbSourceConfig", "DfsTarget", "dfs_target_inside", "list_dir",
                 "read_security_descriptor", "is_connection_error"):
        assert hasattr(smb, name), name
