"""The source registry: ``[[sources]]`` validated as the discriminated union of the registered
kinds' config models (errors name ``sources.N.<key>``), factories looked up by kind, capability
protocols checked with ``isinstance``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ancre.app.runtime import Runtime
from ancre.config import Settings, load_settings
from ancre.connectors.base import (
    Checkable,
    Closeable,
    Connector,
    LocalTree,
    SubtreeListing,
    Watchable,
    collection_for,
)
from ancre.connectors.folder import FolderConnector, FolderSourceConfig
from ancre.connectors.registry import REGISTRY, source_kind
from ancre.connectors.smb import SmbConnector, SmbSourceConfig
from ancre.errors import ConfigError
from ancre.models import SourceItem
from ancre.settings.sources import SourceSettings


def _load(tmp_path: Path, sources: str) -> Settings:
    cfg = tmp_path / "ancre.toml"
    cfg.write_text(f"data_dir = 'd'\n{sources}", encoding="utf-8")
    return load_settings(cfg)


def _error(tmp_path: Path, sources: str) -> str:
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, sources)
    return str(e.value)


def test_kind_defaults_to_folder_and_paths_resolve_against_the_file(tmp_path: Path) -> None:
    s = _load(tmp_path, "[[sources]]\nid = 'a'\nroot = 'tree'\nacl_manifest = 'acl.json'\nprincipals = ['G']\n")
    (src,) = s.sources
    assert isinstance(src, FolderSourceConfig)
    assert src.kind == "folder"
    assert src.root == tmp_path / "tree" and src.acl_manifest == tmp_path / "acl.json"
    assert src.principals == ("G",) and src.max_size_mb == 50.0 and src.watch == "auto"


def test_smb_source_keeps_its_keys_and_defaults(tmp_path: Path) -> None:
    s = _load(
        tmp_path,
        "[[sources]]\nid = 'p'\nkind = 'smb'\nserver = 'srv'\nshare = 'Partage'\nusername = 'svc'\n"
        "password_env = 'X'\nshare_allow = ['GG']\ncollection_overrides = { DOC = 'documentation' }\n",
    )
    (src,) = s.sources
    assert isinstance(src, SmbSourceConfig)
    assert (src.server, src.share, src.port, src.auth, src.require_signing, src.encrypt, src.dfs, src.timeout_s) == (
        "srv", "Partage", 445, "ntlm", True, False, True, 30.0
    )
    assert src.share_allow == ("GG",) and src.collection_overrides == {"DOC": "documentation"}
    assert s.source("p") is src


@pytest.mark.parametrize(
    ("sources", "named"),
    [
        ("[[sources]]\nid = 'a'\nroot = 'r'\nserver = 'srv'\n", "sources.0.server (source 'a'): not a key of kind 'folder' (only of 'smb')"),
        ("[[sources]]\nid = 'a'\nroot = 'r'\nfollow_symlinks = 'often'\n", "sources.0.follow_symlinks (source 'a'):"),
        ("[[sources]]\nid = 'a'\n", "sources.0.root (source 'a'): Field required"),
        ("[[sources]]\nid = 'a'\nroot = 'r'\n[[sources]]\nid = 'b'\nkind = 'smb'\nserver = 's'\nshare = 'P'\nport = 'x'\n",
         "sources.1.port (source 'b'):"),
        ("[[sources]]\nid = 'b'\nkind = 'smb'\nshare = 'P'\n", "sources.0.server (source 'b'): Field required"),
        ("[[sources]]\nid = 'b'\nkind = 'smb'\nserver = 's'\nshare = 'P'\nroot = 'r'\n",
         "sources.0.root (source 'b'): not a key of kind 'smb' (only of 'folder')"),
        ("[[sources]]\nid = 'b'\nkind = 'smb'\nserver = 's'\nshare = 'P'\npassword = 'x'\npassword_env = 'Y'\n",
         "not both"),
    ],
)
def test_a_bad_key_or_value_names_sources_n_key(tmp_path: Path, sources: str, named: str) -> None:
    assert named in _error(tmp_path, sources)


def test_an_unknown_kind_is_named_with_the_known_ones(tmp_path: Path) -> None:
    msg = _error(tmp_path, "[[sources]]\nid = 'a'\nroot = 'r'\n[[sources]]\nid = 'g'\nkind = 'gopher'\n")
    assert "sources.1.kind (source 'g'): unknown source kind 'gopher' (known: folder, smb" in msg
    with pytest.raises(ConfigError, match="unknown source kind 'gopher'"):
        source_kind("gopher")


def test_registry_lists_each_kind_with_its_config_model() -> None:
    assert list(REGISTRY)[:2] == ["folder", "smb"]
    for name, kind in REGISTRY.items():
        assert kind.kind == name and issubclass(kind.config, SourceSettings)
        assert kind.config.model_fields["kind"].annotation.__args__ == (name,)  # type: ignore[union-attr]


def test_runtime_builds_connectors_through_the_registry_and_closes_them(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    s = _load(
        tmp_path,
        "[[sources]]\nid = 'a'\nroot = 'tree'\n"
        "[[sources]]\nid = 'p'\nkind = 'smb'\nserver = '127.0.0.1'\nshare = 'P'\nport = 9\npassword = 'x'\n",
    )
    rt = Runtime(s)
    folder, smb = rt.connectors()
    assert isinstance(folder, FolderConnector) and isinstance(smb, SmbConnector)
    smb.session.cache["127.0.0.1:9"] = _Conn()  # a pooled connection the runtime must release
    conn = smb.session.cache["127.0.0.1:9"]
    rt.close()
    assert conn.closed and smb.session.cache == {}


class _Conn:
    closed = False

    def disconnect(self, close: bool = True) -> None:
        self.closed = True


def test_capabilities_are_protocols_checked_with_isinstance(tmp_path: Path) -> None:
    folder = FolderConnector(FolderSourceConfig(id="a", root=tmp_path), directory=None, ignore=())
    smb = SmbConnector(
        SmbSourceConfig(id="p", kind="smb", server="127.0.0.1", share="P", port=9), directory=None, ignore=()
    )
    for conn in (folder, smb):
        assert isinstance(conn, Connector) and isinstance(conn, SubtreeListing)
    assert isinstance(folder, LocalTree) and not isinstance(smb, LocalTree)
    for cap in (Watchable, Closeable, Checkable):
        assert isinstance(smb, cap) and not isinstance(folder, cap), cap


def test_collection_for_by_top_level_folder(tmp_path: Path) -> None:
    cfg = FolderSourceConfig(id="a", root=tmp_path, collection_overrides={"Documentation": "documentation"})
    assert collection_for(cfg, "DOCUMENTATION/guide.md") == "documentation"
    assert collection_for(cfg, "Documentation") == "documents"  # a file at the root has no folder
    assert collection_for(cfg, "CLIENTS/x.docx") == "documents"
    conn = FolderConnector(cfg, directory=None, ignore=())
    assert conn.collection_for(SourceItem("a", "documentation/x.md", "documentation/x.md", 1, 0.0)) == "documentation"
