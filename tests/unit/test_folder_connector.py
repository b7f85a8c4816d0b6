"""The local folder connector: listing rules, NFC paths, locations, collections and where the
ACL comes from (manifest, configured principals, or nobody)."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from support.corpus import CORPUS

from ancre.acl.directory import FileDirectory
from ancre.config import DEFAULT_IGNORE
from ancre.connectors.folder import FolderConnector, FolderSourceConfig, unc_folder
from ancre.errors import SourceUnavailableError

DIRECTORY = FileDirectory(CORPUS / "directory.json")
SID = json.loads((CORPUS / "directory.json").read_text(encoding="utf-8"))


def _conn(root: Path, **kw) -> FolderConnector:
    return FolderConnector(FolderSourceConfig(id="s", root=root, **kw), directory=DIRECTORY, ignore=DEFAULT_IGNORE)


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "share"
    for rel in ("A/doc.docx", "A/~$doc.docx", "A/.~lock.doc.docx#", "A/x.tmp", "A/Thumbs.db", "B/desktop.ini",
                "B/notes.md", "B/sub/old.pdf", "B/.goutputstream-ABC"):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    (root / "B" / unicodedata.normalize("NFD", "Résumé.md")).write_bytes(b"y")
    return root


def test_listing_skips_never_indexed_names_and_normalises_to_nfc(tmp_path: Path) -> None:
    conn = _conn(_tree(tmp_path), principals=("sid:S-1-1-0",))
    paths = sorted(i.path for i in conn.list_items())
    assert paths == ["A/doc.docx", "B/Résumé.md", "B/notes.md", "B/sub/old.pdf"]
    item = next(i for i in conn.list_items() if i.filename == "Résumé.md")
    assert conn.fetch_content(item) == b"y"  # the real NFD name is still found on disk
    assert item.doc_id == "s:B/Résumé.md"


def test_include_exclude_globs(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    conn = _conn(root, include=("B/*",), exclude=("*.pdf",), principals=("sid:S-1-1-0",))
    assert sorted(i.path for i in conn.list_items()) == ["B/Résumé.md", "B/notes.md"]
    assert conn.get_item("B/sub/old.pdf") is None and conn.get_item("B/notes.md") is not None
    assert conn.get_item("A/~$doc.docx") is None and conn.get_item("B/absent.md") is None


def test_missing_root_is_unavailable_never_empty(tmp_path: Path) -> None:
    conn = _conn(tmp_path / "nope", principals=("sid:S-1-1-0",))
    with pytest.raises(SourceUnavailableError):
        list(conn.list_items())
    with pytest.raises(SourceUnavailableError):
        conn.get_item("a.md")


def test_unreadable_subfolder_makes_listing_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder that can't be listed (EACCES, EIO on a flaky mount) makes the whole listing
    unavailable: a partial listing would look like deletions. Root bypasses permission bits, so
    the failure is injected at ``os.scandir`` for that one folder."""
    import os

    root = _tree(tmp_path)
    real_scandir = os.scandir
    bad = str(root / "B" / "sub")

    def failing_scandir(path="."):  # type: ignore[no-untyped-def]
        if os.fspath(path) == bad:
            raise PermissionError(13, "Permission denied", bad)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", failing_scandir)
    with pytest.raises(SourceUnavailableError, match="could not be read"):
        list(_conn(root, principals=("sid:S-1-1-0",)).list_items())


def test_acl_from_configured_principals_by_name_or_sid(tmp_path: Path) -> None:
    conn = _conn(_tree(tmp_path), principals=("GG_Direction", "sid:S-1-5-21-9-9"))
    item = next(iter(conn.list_items()))
    acl = conn.fetch_acl(item)
    assert acl.allow == {f"sid:{SID['groups']['GG_Direction']['sid']}", "sid:S-1-5-21-9-9"}
    assert acl.reason is None


def test_unresolvable_principal_means_nobody(tmp_path: Path) -> None:
    conn = _conn(_tree(tmp_path), principals=("GG_Inexistant",))
    acl = conn.fetch_acl(next(iter(conn.list_items())))
    assert acl.allow == frozenset() and "GG_Inexistant" in (acl.reason or "")


def test_no_manifest_no_principals_means_nobody(tmp_path: Path) -> None:
    conn = _conn(_tree(tmp_path))
    acl = conn.fetch_acl(next(iter(conn.list_items())))
    assert acl.allow == frozenset() and acl.reason


def test_unreadable_manifest_means_nobody(tmp_path: Path) -> None:
    bad = tmp_path / "acl.json"
    bad.write_text("{ not json", encoding="utf-8")
    conn = _conn(_tree(tmp_path), acl_manifest=bad)
    acl = conn.fetch_acl(next(iter(conn.list_items())))
    assert acl.allow == frozenset() and "acl_unreadable" in (acl.reason or "")


def test_manifest_acl_on_corpus() -> None:
    conn = _conn(CORPUS / "share", acl_manifest=CORPUS / "acl.json")
    items = {i.path: i for i in conn.list_items()}
    deny = conn.fetch_acl(items["CLIENTS/test-deny-explicite.docx"])
    assert deny.readable_by(DIRECTORY.principals("bruno")) and not deny.readable_by(DIRECTORY.principals("chloe"))
    assert not conn.fetch_acl(items["RH/Grille_Salariale_2026.docx"]).readable_by(DIRECTORY.principals("alice"))


def test_location_and_collection() -> None:
    conn = _conn(CORPUS / "share", acl_manifest=CORPUS / "acl.json", unc_root="\\\\SRV\\Partage",
                 collection_overrides={"documentation": "documentation"})
    items = {i.path: i for i in conn.list_items()}
    assert conn.location(items["CLIENTS/test-deny-explicite.docx"]) == "\\\\SRV\\Partage\\CLIENTS\\"
    assert conn.collection_for(items["DOCUMENTATION/09-pipeline-llm.md"]) == "documentation"
    assert conn.collection_for(items["CLIENTS/test-deny-explicite.docx"]) == "documents"
    assert unc_folder("\\\\SRV\\Partage\\", "a.docx") == "\\\\SRV\\Partage\\"
    assert unc_folder("https://x.example/sites/D/Docs", "A/b.docx") == "https://x.example/sites/D/Docs/A/"
