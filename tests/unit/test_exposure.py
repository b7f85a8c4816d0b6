"""The exposure report's rules on the embedded store and a file directory: which principals are
broad, the share of users, deny entries, grants that expire, what a detector could not decide,
and what is said when the directory can't list its users."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ancre.acl.directory import FileDirectory
from ancre.acl.providers import DirectoryProvider, PrincipalResolver
from ancre.errors import DirectoryError
from ancre.index.edge_store import EdgeStore
from ancre.index.store import PointWrite
from ancre.models import Acl, ChunkPayload, Grant, point_id
from ancre.reports.exposure import Basis, exposure_report
from ancre.settings.reports import ReportsConfig

DOM = "S-1-5-21-7-7-7"
G = {name: f"sid:{DOM}-{rid}" for name, rid in (("GG_A", 1101), ("GG_B", 1102), ("GG_ALL", 1103), ("GG_X", 1104))}
EVERYONE, AU, DOMAIN_USERS, BUILTIN_USERS = "sid:S-1-1-0", "sid:S-1-5-11", f"sid:{DOM}-513", "sid:S-1-5-32-545"
SECRET = "N° AVS 756.9217.0769.85"


@pytest.fixture()
def directory(tmp_path: Path) -> FileDirectory:
    groups = {n: {"sid": sid[4:], "member_of": []} for n, sid in G.items() if n != "GG_ALL"}
    groups["GG_ALL"] = {"sid": G["GG_ALL"][4:], "member_of": []}
    groups["GG_A"]["member_of"] = ["GG_ALL"]
    groups["GG_B"]["member_of"] = ["GG_ALL"]
    users = {f"u{i}": {"sid": f"{DOM}-{2000 + i}", "groups": ["GG_A" if i < 5 else "GG_B"]} for i in range(10)}
    users["outsider"] = {"sid": f"{DOM}-2999", "groups": ["GG_X"]}
    p = tmp_path / "directory.json"
    p.write_text(json.dumps({"domain_sid": DOM, "netbios": "T", "groups": groups, "users": users}), encoding="utf-8")
    return FileDirectory(p)


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[EdgeStore]:
    s = EdgeStore(tmp_path / "store")
    s.open("test:4", 4)
    yield s
    s.close()


def put(store: EdgeStore, name: str, acl: Acl, text: str = SECRET, *, ocr: bool = False) -> None:
    doc = f"t:{name}"
    store.upsert("documents", [PointWrite(point_id(doc, 0), np.array([1, 0, 0, 0], dtype=np.float32), ChunkPayload(
        source="t", doc_id=doc, path=f"F/{name}", filename=name, location="\\\\S\\P\\F\\", chunk_index=0, text=text,
        acl_allow=tuple(sorted(acl.allow)), acl_deny=tuple(sorted(acl.deny)), content_hash="0", indexed_at=0.0,
        ocr=ocr, acl_grants=acl.grants_payload(),
    ))])


def report(store: EdgeStore, directory: FileDirectory, **cfg: object):
    rep = exposure_report(store, directory, PrincipalResolver([DirectoryProvider(directory)]), ReportsConfig(**cfg))
    return rep, {d.filename: d for f in rep.folders for d in f.documents}


def acl(*allow: str, deny: tuple[str, ...] = ()) -> Acl:
    return Acl(frozenset(allow), frozenset(deny))


def test_well_known_broad_principals_and_their_readers(store: EdgeStore, directory: FileDirectory) -> None:
    put(store, "everyone", acl(EVERYONE, deny=(G["GG_B"],)))
    put(store, "au", acl(AU))
    put(store, "du", acl(DOMAIN_USERS))
    put(store, "bu", acl(BUILTIN_USERS))
    put(store, "entra", acl("aad:everyone-internal"))
    put(store, "group_a", acl(G["GG_A"]))
    rep, docs = report(store, directory)
    names = {k: (d.reach.name, d.reach.readers) for k, d in docs.items()}
    # the deny entry narrows who reads, the broad principal still opened it
    assert names["everyone"] == ("Everyone", 6) and names["au"] == ("Authenticated Users", 11)
    assert names["du"][0].endswith("(Domain Users)") and names["bu"][0] == "BUILTIN\\Users"
    assert names["entra"][0].startswith("Entra")
    assert "group_a" not in docs  # 5 of 11 users: not broad
    assert rep.users == 11 and all(d.reach.users == 11 for d in docs.values())
    assert all([x.kind.value for x in d.findings] == ["avs"] for d in docs.values())
    assert rep.folders[0].restricted == 1 and rep.restricted == ()  # same folder: counted there, not scanned


def test_a_group_holding_more_than_the_share_of_users(store: EdgeStore, directory: FileDirectory) -> None:
    put(store, "all_staff", acl(G["GG_ALL"], G["GG_X"]))  # 10 + 1 of 11 users
    put(store, "most", acl(G["GG_ALL"]))  # 10 of 11 = 91 %
    _, docs = report(store, directory, broad_share=0.95)
    assert set(docs) == {"all_staff"} and docs["all_staff"].reach.basis is Basis.SHARE
    assert docs["all_staff"].reach.name == "T\\GG_ALL" and docs["all_staff"].reach.readers == 11
    _, docs = report(store, directory, broad_share=0.9)
    assert set(docs) == {"all_staff", "most"}


def test_configured_broad_principals_by_name(store: EdgeStore, directory: FileDirectory) -> None:
    put(store, "x", acl(G["GG_X"]))
    rep, docs = report(store, directory, broad_principals=("T\\GG_X", "T\\NO_SUCH"))
    assert docs["x"].reach.name == "T\\GG_X" and docs["x"].reach.readers == 1
    assert any("NO_SUCH" in n for n in rep.notes)


def test_grants_are_evaluated_now_and_their_end_is_said(store: EdgeStore, directory: FileDirectory) -> None:
    soon, past = time.time() + 3600, time.time() - 3600
    put(store, "link", Acl.of([Grant(frozenset({"aad:everyone-internal"}), expires=soon), Grant(frozenset({G["GG_A"]}))]))
    put(store, "expired", Acl.of([Grant(frozenset({EVERYONE}), expires=past), Grant(frozenset({G["GG_A"]}))]))
    # an ordered DACL: Everyone allowed after a deny of GG_B (one grant), GG_B by its own later run
    put(store, "walk", Acl.of([Grant(frozenset({EVERYONE}), frozenset({G["GG_B"]})), Grant(frozenset({G["GG_B"]}))]))
    _, docs = report(store, directory)
    assert set(docs) == {"link", "walk"}
    assert docs["link"].reach.until is not None and docs["walk"].reach.until is None
    assert docs["walk"].reach.readers == 11  # GG_B reads through its own grant


def test_what_a_detector_cannot_decide_is_said(store: EdgeStore, directory: FileDirectory) -> None:
    put(store, "scan", acl(EVERYONE), "N° AVS 756.9217.0769.84", ocr=True)
    put(store, "typed", acl(EVERYONE), "N° AVS 756.9217.0769.84")
    rep, docs = report(store, directory)
    (f,) = docs["scan"].findings
    assert (f.count, f.undecided) == (0, 1) and f.reasons and docs["typed"].findings == ()
    assert rep.undecided == 1 and rep.sensitive == 0 and any("could not decide" in n for n in rep.notes)


def test_a_directory_that_cannot_list_its_users_is_said(store: EdgeStore, directory: FileDirectory) -> None:
    class Broken(FileDirectory):
        def users(self) -> list[str]:
            raise DirectoryError("LDAP down")

    put(store, "everyone", acl(EVERYONE))
    put(store, "all", acl(G["GG_ALL"]))
    broken = Broken(directory.path)
    rep, docs = report(store, broken)
    assert set(docs) == {"everyone"} and docs["everyone"].reach.readers is None
    assert rep.users is None and any("could not be listed" in n for n in rep.notes)
