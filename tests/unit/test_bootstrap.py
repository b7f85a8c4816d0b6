"""One composition root (:class:`ancre.query.bootstrap.Bootstrap`): the :class:`Runtime` of the
CLI, daemon and API and a :meth:`QueryCore.open` from the same settings are wired the same way —
P(user) from the directory *and* every source's providers (a SharePoint source's Entra provider),
the same kinds of store, embedder and directory, the same ACL-writer mode, the same connectors —
and no module but :mod:`ancre.acl.providers` builds a directory-only resolver of its own."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ancre.acl.providers import DirectoryProvider, directory_resolver
from ancre.app.runtime import Runtime
from ancre.config import Settings, load_settings
from ancre.connectors.sharepoint.connector import SharePointConnector
from ancre.query import QueryCore, QueryParts
from ancre.query.bootstrap import Bootstrap

ROOT = Path(__file__).resolve().parents[2]
AXONIX = ROOT / "examples" / "axonix"


def _settings(tmp_path: Path) -> Settings:
    """A folder share and a SharePoint source over the Axonix directory; an embedded store and an
    Ollama embedder of known dimension (nothing is called: every endpoint is on loopback and the
    tests ask no question)."""
    return load_settings(
        None,
        data_dir=str(tmp_path / "data"),
        directory={"kind": "file", "path": str(AXONIX / "directory.json")},
        embedder={"kind": "ollama", "url": "http://127.0.0.1:9", "model": "nomic-embed-text", "dim": 8},
        store={"kind": "edge"},
        sources=[
            {"id": "partage", "kind": "folder", "root": str(AXONIX / "share")},
            {"id": "sp", "kind": "sharepoint", "tenant_id": "t", "client_id": "c", "client_secret": "x"},
        ],
    )


def _wiring(parts: QueryParts) -> dict[str, object]:
    return {
        "store": type(parts.store),
        "embedder": (type(parts.embedder), parts.embedder.name, parts.embedder.dim),
        "directory": type(parts.directory),
        "providers": parts.resolver.names,
        "acl_writer_read_only": parts.acl_writer.read_only if parts.acl_writer is not None else None,
        "connector": type(parts.connector("sp")),
    }


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    yield _settings(tmp_path)


def test_runtime_and_query_core_open_get_the_same_wiring(settings: Settings) -> None:
    with Runtime(settings) as rt:
        from_runtime = _wiring(rt.query_core.parts)
    core = QueryCore.open(settings)
    assert isinstance(core, QueryCore)
    with core:
        from_open = _wiring(core.parts)
    assert from_runtime == from_open
    # every source's providers in both: the SharePoint source brings its Entra provider
    assert from_open["providers"] == ("directory", "entra:sp")
    assert from_open["connector"] is SharePointConnector
    assert from_open["acl_writer_read_only"] is False  # the embedded store: this process writes


def test_each_part_is_built_once_and_shared(settings: Settings) -> None:
    with Bootstrap(settings) as boot:
        parts = boot.query_parts()
        assert parts.store is boot.store and parts.state is boot.state and parts.directory is boot.directory
        assert parts.principals is boot.principals and boot.query_parts().principals is parts.principals
        first = boot.principals.providers[0]
        assert isinstance(first, DirectoryProvider) and first.directory is boot.directory
        assert parts.acl_writer is boot.acl_writer and boot.acl_writer.store is boot.store


def test_directory_alone_comes_from_one_helper(settings: Settings) -> None:
    directory = Bootstrap(settings).directory
    resolver = directory_resolver(directory)
    assert resolver.names == ("directory",)
    assert resolver.principals("emma") == directory.principals("emma") != frozenset()
    # the same fallback wherever a resolver is optional
    parts = QueryParts(None, None, None, None, directory, lambda _s: None, None)  # type: ignore[arg-type]
    assert parts.resolver.names == ("directory",) and parts.resolver.principals("emma") == directory.principals("emma")


def test_no_module_builds_a_resolver_of_its_own() -> None:
    """The directory-only resolver has one builder (``directory_resolver``), P(user) with the
    sources' providers one (``Bootstrap.principals``)."""
    pattern = re.compile(r"PrincipalResolver\(\s*\[")
    builders = sorted(
        str(p.relative_to(ROOT))
        for p in ROOT.rglob("*.py")
        if not {".venv", "tests", "build"} & set(p.relative_to(ROOT).parts) and pattern.search(p.read_text("utf-8"))
    )
    assert builders == ["acl/providers.py", "query/bootstrap.py"]
