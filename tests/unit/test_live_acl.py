"""LiveAclChecker parts that need no corpus: batching, a source that does not answer in time (a
real TCP listener on 127.0.0.1 that never speaks SMB), an unknown source, grouping of what was
left out, the folder connector's ``read_acls`` and the state DB's ACL digest update."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from ancre.acl.directory import FileDirectory
from ancre.config import QueryConfig
from ancre.connectors.folder import FolderConnector, FolderSourceConfig
from ancre.connectors.smb import SmbConnector, SmbSourceConfig
from ancre.errors import ConfigError
from ancre.index.acl_writer import AclWriter
from ancre.index.edge_store import EdgeStore
from ancre.index.state import ItemState, StateDB
from ancre.models import Acl, ChunkPayload, ItemStatus
from ancre.query.live_acl import LiveAclChecker, RightsCheck, _slices, unverified

G1, G2 = "sid:S-1-5-21-1-1001", "sid:S-1-5-21-1-1002"


def payload(source: str, path: str, allow: tuple[str, ...] = (G1,)) -> ChunkPayload:
    return ChunkPayload(
        source=source, doc_id=f"{source}:{path}", path=path, filename=path.rsplit("/", 1)[-1], location="",
        chunk_index=0, text="", acl_allow=allow, acl_deny=(), content_hash="", indexed_at=0.0,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EdgeStore]:
    s = EdgeStore(tmp_path / "data")
    s.open("test:none", 4)
    yield s
    s.close()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts connections and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(2)
    for c in held:
        c.close()
    srv.close()


def test_slices_cut_batches_of_nearly_equal_size_in_order() -> None:
    paths = [f"p{i}" for i in range(30)]
    got = _slices(paths, 8)
    assert len(got) == 8 and [p for b in got for p in b] == paths and max(map(len, got)) == 4
    assert _slices(paths[:3], 8) == [["p0"], ["p1"], ["p2"]]
    assert _slices([], 8) == []


def test_a_source_that_does_not_answer_in_time_is_left_out_fail_closed(
    store: EdgeStore, silent_server: int
) -> None:
    src = SmbSourceConfig(
        id="partage", kind="smb", server="127.0.0.1", port=silent_server, share="Partage",
        username="svc", password=SecretStr("x"), timeout_s=30,
    )
    conn = SmbConnector(src, directory=None, ignore=())
    cfg = QueryConfig(live_acl_timeout_s=0.5)
    live = LiveAclChecker(lambda _s: conn, AclWriter(store, None), cfg)
    try:
        t = time.monotonic()
        out = live.check([payload("partage", "a.docx"), payload("partage", "b.docx")], frozenset({G1}))
        assert time.monotonic() - t < 5  # the question did not wait for the 30 s connection timeout
        assert {c.outcome for c in out.values()} == {"unreachable"}
        assert not any(c.readable or c.live for c in out.values())
        assert "no answer within 0.5 s" in (out["partage:a.docx"].reason or "")

        stored = LiveAclChecker(lambda _s: conn, AclWriter(store, None), cfg.model_copy(update={"live_acl_on_unreachable": "stored"}))
        try:
            out = stored.check([payload("partage", "a.docx"), payload("partage", "c.docx", (G2,))], frozenset({G1}))
            assert out["partage:a.docx"].outcome == "stored" and out["partage:a.docx"].readable
            assert out["partage:c.docx"].outcome == "stored" and not out["partage:c.docx"].readable
        finally:
            stored.close()
    finally:
        live.close()


def test_unknown_source_is_left_out(store: EdgeStore) -> None:
    def connector_for(source: str) -> FolderConnector:
        raise ConfigError(f"sources: no source with id {source!r}")

    live = LiveAclChecker(connector_for, AclWriter(store, None), QueryConfig(live_acl_on_unreachable="stored"))
    try:
        (c,) = live.check([payload("gone-source", "x.md")], frozenset({G1})).values()
        assert c.outcome == "no_source" and not c.readable and "no source with id" in (c.reason or "")
    finally:
        live.close()


def test_unverified_groups_left_out_documents_per_source() -> None:
    def check(doc: str, source: str, outcome: str) -> RightsCheck:
        return RightsCheck(doc, source, doc, doc, "documents", outcome, outcome == "live", f"{source} down")  # type: ignore[arg-type]

    groups = unverified(
        [check("a", "s1", "unreachable"), check("b", "s2", "live"), check("c", "s1", "unreachable"),
         check("d", "s3", "no_source"), check("e", "s2", "gone")]
    )
    assert [(g.source, g.documents, g.outcome) for g in groups] == [("s1", 2, "unreachable"), ("s3", 1, "no_source")]
    assert groups[0].reason == "s1 down"


def test_folder_read_acls_rereads_the_manifest_and_leaves_out_missing_files(tmp_path: Path) -> None:
    root = tmp_path / "share"
    (root / "A").mkdir(parents=True)
    (root / "A" / "x.md").write_text("x", encoding="utf-8")
    (tmp_path / "directory.json").write_text(json.dumps({
        "domain_sid": "S-1-5-21-1", "netbios": "T",
        "groups": {"G1": {"sid": "S-1-5-21-1-1001", "member_of": []}, "G2": {"sid": "S-1-5-21-1-1002", "member_of": []}},
        "users": {}, "well_known": {},
    }), encoding="utf-8")
    manifest = tmp_path / "acl.json"

    def write(who: str) -> None:
        manifest.write_text(json.dumps({"entries": {"": {"aces": [["ALLOW", who, "READ", "OI|CI"]]}}}), encoding="utf-8")

    write("G1")
    cfg = FolderSourceConfig(id="s", root=root, acl_manifest=manifest)
    conn = FolderConnector(cfg, directory=FileDirectory(tmp_path / "directory.json"), ignore=())
    assert conn.read_acls(["A/x.md", "A/absent.md"]) == {"A/x.md": Acl(frozenset({G1}))}
    write("G2")  # same size, same second: still seen (mtime in ns, size and inode)
    assert conn.read_acls(["A/x.md"]) == {"A/x.md": Acl(frozenset({G2}))}


def test_state_acl_digest_update_touches_only_indexed_rows(tmp_path: Path) -> None:
    db = StateDB(tmp_path / "state.sqlite3")
    try:
        common = {"source": "s", "collection": "documents", "size": 1, "mtime": 1.0, "etag": None, "acl_hash": "old",
                  "chunk_count": 1, "updated_at": 1.0}
        row = ItemState(**common, native_id="n1", path="a.md", doc_id="s:n1", content_hash="h", status=ItemStatus.INDEXED)
        db.put(row)
        db.put(ItemState(**common, native_id="n2", path="b.md", doc_id="s:n2", content_hash=None,
                         status=ItemStatus.PENDING))
        assert db.set_acl_hash("s", "s:n1", "new") is True
        assert db.set_acl_hash("s", "s:n2", "new") is False  # a pass holds it: left to the pass
        assert db.set_acl_hash("other", "s:n1", "new") is False
        rows = db.items("s")
        assert rows["n1"].acl_hash == "new" and rows["n2"].acl_hash == "old"
    finally:
        db.close()
