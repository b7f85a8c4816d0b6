"""One ACL writer for the sync engine's rights lane and the live rights check's write-back
(:mod:`ancre.index.acl_writer`): readings of a document's ACL are written in the order they
started, whichever of the two took them. Real folder source (an ACL manifest edited between the
readings), real embedded store, e5-local; each interleaving is forced by pausing one reader right
after it read the source."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from support.corpus import CORPUS

from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.connectors.folder import FolderConnector
from ancre.models import COLLECTIONS, Acl, SourceItem
from ancre.query.live_acl import LiveAclChecker
from ancre.settings import QueryConfig

FILE = "CLIENTS/test-deny-explicite.docx"
DOC_ID = f"partage:{FILE}"


class Paused(FolderConnector):
    """A folder connector that, when armed, stops right after reading ``FILE``'s ACL at the
    source (``read`` is set) until ``go`` is set: the reading is taken, not yet written."""

    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self.armed = False
        self.read = threading.Event()
        self.go = threading.Event()

    def _pause(self) -> None:
        if self.armed:
            self.armed = False
            self.read.set()
            assert self.go.wait(30)

    def read_acls(self, paths: Sequence[str]) -> Mapping[str, Acl]:
        out = super().read_acls(paths)
        if FILE in paths:
            self._pause()
        return out

    def fetch_acl(self, item: SourceItem) -> Acl:
        acl = super().fetch_acl(item)
        if item.path == FILE:
            self._pause()
        return acl


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Path, Runtime]]:
    root = tmp_path / "corpus"
    (root / "share").mkdir(parents=True)
    shutil.copytree(CORPUS / "share" / "CLIENTS", root / "share" / "CLIENTS")
    for name in ("acl.json", "directory.json"):
        shutil.copy2(CORPUS / name, root / name)
    (root / "ancre.toml").write_text(
        'data_dir = "data"\n[embedder]\nkind = "e5-local"\n[store]\nkind = "edge"\n'
        '[directory]\nkind = "file"\npath = "directory.json"\ncache_ttl_s = 0\n'
        '[query]\nlive_acl_ttl_s = 0\n'
        '[[sources]]\nid = "partage"\nroot = "share"\nacl_manifest = "acl.json"\n',
        encoding="utf-8",
    )
    rt = Runtime(load_settings(root / "ancre.toml"))
    (conn,) = rt.connectors()
    rep = rt.engine.run_pass(conn)
    assert rep.outcome == "ok" and rep.failed == 0 and rep.new == 2, rep
    yield root, rt
    rt.close()


def set_file_aces(root: Path, *aces: list[str]) -> None:
    """The manifest entry of ``FILE``: its explicit deny of the interns, after ``aces``."""
    manifest = root / "acl.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["entries"][FILE]["aces"] = [*aces, ["DENY", "GG_Stagiaires", "READ", ""]]
    manifest.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")


GRANT = ["ALLOW", "GG_Commercial", "READ", ""]
REVOKE = ["DENY", "GG_Commercial", "READ", ""]


def paused(rt: Runtime) -> Paused:
    s = rt.settings
    return Paused(s.sources[0], directory=rt.directory, ignore=s.ignore, private_dirs=s.private_paths())


def stored(rt: Runtime) -> set[Acl]:
    return {
        Acl(frozenset(p.payload.acl_allow), frozenset(p.payload.acl_deny))
        for c in COLLECTIONS for p in rt.store.scroll(c) if p.payload.doc_id == DOC_ID
    }


def payload(rt: Runtime):
    return next(p.payload for c in COLLECTIONS for p in rt.store.scroll(c) if p.payload.doc_id == DOC_ID)


def source_acl(rt: Runtime) -> Acl:
    (conn,) = rt.connectors()
    item = conn.get_item(FILE)
    assert item is not None
    return conn.fetch_acl(item)


def state_digest(rt: Runtime) -> str | None:
    return next(st.acl_hash for st in rt.state.items("partage").values() if st.doc_id == DOC_ID)


def test_a_live_reading_of_a_grant_is_not_written_after_the_rights_lane_recorded_a_revocation(
    world: tuple[Path, Runtime],
) -> None:
    """Live check reads a grant → the rights lane reads and writes a newer revocation → the live
    check's write-back comes last: it must not widen the store."""
    root, rt = world
    david = rt.directory.principals("david")  # GG_Commercial: not in the CLIENTS ACL
    conn = paused(rt)
    checker = LiveAclChecker(lambda _s: conn, rt.acl_writer, QueryConfig(live_acl_ttl_s=0))
    pl = payload(rt)
    try:
        set_file_aces(root, GRANT)
        conn.armed = True
        out: dict = {}
        t = threading.Thread(target=lambda: out.update(checker.check([pl], david)))
        t.start()
        assert conn.read.wait(30)  # the live check holds its reading of the grant, unwritten
        set_file_aces(root, REVOKE)
        rep = rt.engine.refresh_acls(rt.connectors()[0])  # the rights lane: a newer reading, written
        assert rep.acl_only == 1, rep
        conn.go.set()
        t.join(30)
        assert not t.is_alive()
    finally:
        checker.close()
    revoked = source_acl(rt)
    assert not revoked.readable_by(david)
    assert stored(rt) == {revoked}, "the older live reading (the grant) overwrote the newer revocation"
    assert state_digest(rt) == revoked.digest()
    assert out[DOC_ID].outcome == "changed" and out[DOC_ID].readable is False  # both readings must admit


def test_a_rights_lane_reading_is_not_written_after_a_newer_live_reading(world: tuple[Path, Runtime]) -> None:
    """The rights lane reads a grant → the source revokes it and the live check reads and writes
    that → the rights lane's write comes last: it must not widen the store either."""
    root, rt = world
    david = rt.directory.principals("david")
    set_file_aces(root, GRANT)
    conn = paused(rt)
    conn.armed = True
    reports: list = []
    lane = threading.Thread(target=lambda: reports.append(rt.engine.refresh_acls(conn)))
    lane.start()
    assert conn.read.wait(30)  # the rights lane holds its reading of the grant, unwritten
    set_file_aces(root, REVOKE)
    checker = LiveAclChecker(lambda _s: rt.connectors()[0], rt.acl_writer, QueryConfig(live_acl_ttl_s=0))
    try:
        got = checker.check([payload(rt)], david)
    finally:
        checker.close()
    assert got[DOC_ID].outcome == "changed" and got[DOC_ID].readable is False
    conn.go.set()
    lane.join(30)
    assert not lane.is_alive() and reports
    revoked = source_acl(rt)
    assert stored(rt) == {revoked}, "the rights lane's older reading (the grant) overwrote the live revocation"
    assert state_digest(rt) == revoked.digest()
