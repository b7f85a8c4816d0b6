"""One write path for ACLs and one composition root (docs/ARCHITECTURE.md "Invariants"), kept by
reading the package's source: the ACL writer (``index/acl_writer.py``) is the only caller of the
store's ``set_acl`` and of the state DB's ``set_acl_hash``; the composition root
(``query/bootstrap.py``) is the only place that builds an ACL writer, a cursor store or a
connector. A call through ``getattr`` with the name as a string counts too."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = {".venv", "tests", "build", "docs", "examples", ".typecheck", "systemd"}


@functools.cache
def package_modules(root: Path = ROOT) -> tuple[tuple[str, ast.Module], ...]:
    """``(path relative to the package, parsed module)`` of every module of the package under
    ``root`` (not its tests)."""
    out: list[tuple[str, ast.Module]] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if LEFT_OUT & set(rel.parts) or rel.name == "setup.py":
            continue
        out.append((rel.as_posix(), ast.parse(path.read_text(encoding="utf-8"), str(rel))))
    return tuple(out)


def callers(name: str, *, attribute: bool, modules: Iterable[tuple[str, ast.Module]] | None = None) -> list[str]:
    """``path:line`` of every call of ``name`` in ``modules`` (default: the package's): as a
    method (``x.name(…)``, ``getattr(x, "name")``) when ``attribute``, else as a plain name
    (``name(…)``)."""
    found: list[str] = []
    for rel, tree in package_modules() if modules is None else modules:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            hit = (isinstance(f, ast.Attribute) and f.attr == name) if attribute else (isinstance(f, ast.Name) and f.id == name)
            by_string = (
                isinstance(f, ast.Name) and f.id == "getattr" and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant) and node.args[1].value == name
            )
            if hit or by_string:
                found.append(f"{rel}:{node.lineno}")
    return found


def files(places: list[str]) -> list[str]:
    return sorted({p.rsplit(":", 1)[0] for p in places})


def test_the_acl_writer_is_the_one_caller_of_set_acl() -> None:
    """Every ACL written into the store's payloads — by the sync engine's passes, its rights lane,
    the live rights check — goes through :meth:`AclWriter.write`, in the order its readings
    started; no other module may call ``set_acl`` (a second path would skip that order)."""
    places = callers("set_acl", attribute=True)
    assert len(places) == 1 and files(places) == ["index/acl_writer.py"], places


def test_the_acl_writer_is_the_one_writer_of_acl_digests() -> None:
    places = callers("set_acl_hash", attribute=True)
    assert len(places) == 1 and files(places) == ["index/acl_writer.py"], places


@pytest.mark.parametrize("factory", ["AclWriter", "CursorStore", "make_connector"])
def test_the_composition_root_builds_every_acl_writer_cursor_store_and_connector(factory: str) -> None:
    """``app/`` included: the daemon's cursor store and ``acl explain``'s connectors come from the
    one :class:`~ancre.query.bootstrap.Bootstrap`."""
    assert files(callers(factory, attribute=False)) == ["query/bootstrap.py"]


def test_the_check_sees_a_call_written_either_way() -> None:
    code = (
        "def f(store, acl):\n"
        "    store.set_acl('documents', 'd', acl)\n"
        "    getattr(store, 'set_acl')('documents', 'd', acl)\n"
        "    make_connector(src, ctx)\n"
    )
    module = [("daemon/elsewhere.py", ast.parse(code))]
    assert callers("set_acl", attribute=True, modules=module) == ["daemon/elsewhere.py:2", "daemon/elsewhere.py:3"]
    assert callers("make_connector", attribute=False, modules=module) == ["daemon/elsewhere.py:4"]
