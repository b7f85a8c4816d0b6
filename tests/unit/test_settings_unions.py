"""``[embedder]``, ``[store]`` and ``[directory]`` are discriminated unions on ``kind`` (like
``[[sources]]``): each kind has only its own keys, a key of another kind is refused naming it,
defaults are unchanged, and the factories dispatch on the variant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ancre.acl.directory import CachedDirectory, FileDirectory
from ancre.acl.directory_factory import make_directory
from ancre.acl.ldap_directory import LdapDirectory
from ancre.config import load_settings
from ancre.errors import ConfigError
from ancre.index.edge_store import EdgeStore
from ancre.index.qdrant_store import QdrantStore
from ancre.index.store_factory import make_store
from ancre.settings import (
    E5LocalEmbedderConfig,
    EdgeStoreConfig,
    FileDirectoryConfig,
    LdapDirectoryConfig,
    LocalStoreConfig,
    OllamaEmbedderConfig,
    OpenAIEmbedderConfig,
    QdrantStoreConfig,
    SecretRef,
)


def _error(**sections: Any) -> str:
    with pytest.raises(ConfigError) as e:
        load_settings(None, **sections)
    return str(e.value)


def test_defaults_are_unchanged() -> None:
    s = load_settings(None)
    assert s.embedder == E5LocalEmbedderConfig() and s.embedder.kind == "e5-local"
    assert s.store == EdgeStoreConfig() and s.store.kind == "edge" and s.store.bm25 == "qdrant"
    assert s.directory == FileDirectoryConfig() and s.directory.kind == "file" and s.directory.cache_ttl_s == 60.0
    # a table without kind is the default kind
    assert isinstance(load_settings(None, embedder={"batch_size": 8}).embedder, E5LocalEmbedderConfig)
    assert isinstance(load_settings(None, store={"build_after_points": 5}).store, EdgeStoreConfig)
    assert isinstance(load_settings(None, directory={"path": "d.json"}).directory, FileDirectoryConfig)


@pytest.mark.parametrize(
    ("section", "table", "variant"),
    [
        ("embedder", {"kind": "ollama"}, OllamaEmbedderConfig),
        ("embedder", {"kind": "openai", "url": "http://127.0.0.1:9", "model": "m"}, OpenAIEmbedderConfig),
        ("store", {"kind": "qdrant", "url": "http://127.0.0.1:6333"}, QdrantStoreConfig),
        ("store", {"kind": "local"}, LocalStoreConfig),
        ("directory", {"kind": "ldap", "url": "ldaps://dc1", "base_dn": "DC=x"}, LdapDirectoryConfig),
    ],
)
def test_kind_picks_the_variant(section: str, table: dict[str, Any], variant: type) -> None:
    assert type(getattr(load_settings(None, **{section: table}), section)) is variant


@pytest.mark.parametrize(
    ("section", "table", "message"),
    [
        ("store", {"kind": "edge", "url": "http://127.0.0.1:6333"}, "store.url: not a key of kind 'edge' (only of 'qdrant')"),
        ("store", {"path": "x"}, "store.path: not a key of kind 'edge' (only of 'local')"),
        ("store", {"kind": "local", "build_after_points": 3}, "store.build_after_points: not a key of kind 'local' (only of 'edge')"),
        ("store", {"kind": "qdrant", "url": "u", "api_key": "k", "path": "p"}, "store.path: not a key of kind 'qdrant' (only of 'local')"),
        ("directory", {"path": "d.json", "base_dn": "DC=x"}, "directory.base_dn: not a key of kind 'file' (only of 'ldap')"),
        ("directory", {"kind": "ldap", "url": "ldaps://dc", "base_dn": "DC=x", "path": "d.json"},
         "directory.path: not a key of kind 'ldap' (only of 'file')"),
        ("directory", {"bind_password": "x"}, "directory.bind_password: not a key of kind 'file' (only of 'ldap')"),
        ("embedder", {"kind": "e5-local", "keep_alive": "1h"}, "embedder.keep_alive: not a key of kind 'e5-local' (only of 'ollama')"),
        ("embedder", {"kind": "openai", "url": "u", "model": "m", "keep_alive": "1h"},
         "embedder.keep_alive: not a key of kind 'openai' (only of 'ollama')"),
    ],
)
def test_a_key_of_another_kind_is_refused_naming_it(section: str, table: dict[str, Any], message: str) -> None:
    assert message in _error(**{section: table})


@pytest.mark.parametrize(
    ("section", "table", "message"),
    [
        ("store", {"kind": "qdrant"}, "store.url: Field required"),
        ("store", {"kind": "s3"}, "store.kind: unknown store kind 's3' (known: edge, qdrant, local)"),
        ("directory", {"kind": "ldap", "url": "ldaps://dc"}, "directory.base_dn: Field required"),
        ("directory", {"kind": "ldap", "base_dn": "DC=x"}, "directory.url is required when directory.kind = 'ldap'"),
        ("directory", {"kind": "nis"}, "directory.kind: unknown directory kind 'nis' (known: file, ldap)"),
        ("embedder", "ollama", "embedder: expected a table, got 'ollama'"),
        ("directory", {"kind": "ldap", "url": "ldaps://dc", "base_dn": "DC=x", "timeout_s": 0}, "directory.timeout_s:"),
    ],
)
def test_a_variant_checks_its_own_keys(section: str, table: Any, message: str) -> None:
    assert message in _error(**{section: table})


def test_the_environment_can_switch_the_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANCRE_EMBEDDER__KIND", "ollama")
    monkeypatch.setenv("ANCRE_EMBEDDER__URL", "http://127.0.0.1:11434")
    monkeypatch.setenv("ANCRE_STORE__KIND", "qdrant")
    monkeypatch.setenv("ANCRE_STORE__URL", "http://127.0.0.1:6333")
    monkeypatch.setenv("ANCRE_STORE__API_KEY", "k")
    s = load_settings(None, embedder={"keep_alive": "2h"})
    assert s.embedder == OllamaEmbedderConfig(kind="ollama", url="http://127.0.0.1:11434", keep_alive="2h")
    assert isinstance(s.store, QdrantStoreConfig) and s.store.api_key == SecretRef(value="k")  # type: ignore[arg-type]


def test_the_factories_dispatch_on_the_variant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(make_store(EdgeStoreConfig(), tmp_path), EdgeStore)
    assert isinstance(make_store(LocalStoreConfig(kind="local"), tmp_path), QdrantStore)
    monkeypatch.delenv("T_QDRANT_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"^store\.api_key\.env: environment variable T_QDRANT_KEY is not set$"):
        make_store(QdrantStoreConfig(kind="qdrant", url="http://127.0.0.1:1", api_key=SecretRef(env="T_QDRANT_KEY")), tmp_path)
    directory = make_directory(FileDirectoryConfig(path=tmp_path / "d.json", cache_ttl_s=5))
    assert isinstance(directory, CachedDirectory) and isinstance(directory.inner, FileDirectory)
    with pytest.raises(ConfigError, match=r"directory\.path is required"):
        make_directory(FileDirectoryConfig())
    ldap = LdapDirectoryConfig(kind="ldap", url="ldap://127.0.0.1:1", base_dn="DC=x", bind_dn="svc",
                               bind_password=SecretRef(env="T_LDAP_PW"))
    with pytest.raises(ConfigError, match=r"^directory\.bind_password\.env: environment variable T_LDAP_PW is not set$"):
        make_directory(ldap)
    monkeypatch.setenv("T_LDAP_PW", "pw")
    assert isinstance(make_directory(ldap).inner, LdapDirectory)  # type: ignore[attr-defined]
