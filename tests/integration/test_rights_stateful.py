"""Property: whatever the sequence of file adds/modifies/deletes, ACL changes, directory membership
changes, syncs (with or without BM25 rebuild) and searches, no search ever returns a chunk that the
user may not read per the ACL engine on the source state *now* (the live rights check re-reads
the manifest at every search, ``live_acl_ttl_s = 0``, without waiting for a sync), nor a deleted
or outdated chunk. ``ANCRE_STATEFUL_EXAMPLES`` sets the number of examples (CI: 200; bench: 10,000)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from ancre.acl.directory import FileDirectory
from ancre.acl.manifest import AclManifest
from ancre.app.runtime import Runtime
from ancre.config import load_settings

DOMAIN = "S-1-5-21-1-2-3"
GROUPS = {"G_A": f"{DOMAIN}-1101", "G_B": f"{DOMAIN}-1102", "G_C": f"{DOMAIN}-1103", "G_ALL": f"{DOMAIN}-1104"}
USERS = {"u1": f"{DOMAIN}-1201", "u2": f"{DOMAIN}-1202", "u3": f"{DOMAIN}-1203"}
FOLDERS = ("F1", "F2", "F2/SUB")
NAMES = ("a.md", "b.md", "c.txt", "d.md")
WORDS = ("contrat", "maintenance", "serveur", "salaire", "migration", "forfait", "pare-feu", "client")
PRINCIPAL_NAMES = (*GROUPS, *USERS, "Authenticated Users", "Everyone")

EXAMPLES = int(os.environ.get("ANCRE_STATEFUL_EXAMPLES", "200"))


class RightsMachine(RuleBasedStateMachine):
    """Drives a real folder source + e5-local + embedded store through random histories."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="ancre-stateful-"))
        self.share = self.tmp / "share"
        self.clock = 1_700_000_000.0
        self.version = 0
        self.files: dict[str, str] = {}  # path -> marker of current content
        self.acl_entries: dict[str, dict] = {}
        self.membership: dict[str, list[str]] = {"u1": ["G_A"], "u2": ["G_B"], "u3": ["G_A", "G_C"]}
        self.synced_files: dict[str, str] = {}
        self.synced_manifest: AclManifest | None = None
        self.rt: Runtime | None = None

    # ---------------------------------------------------------------- helpers
    def _tick(self, p: Path) -> None:
        self.clock += 10
        os.utime(p, (self.clock, self.clock))

    def _write_directory(self) -> None:
        d = {
            "domain_sid": DOMAIN,
            "netbios": "T",
            "groups": {g: {"sid": s, "member_of": ["G_ALL"] if g != "G_ALL" else []} for g, s in GROUPS.items()},
            "users": {u: {"sid": s, "upn": f"{u}@t.test", "groups": self.membership[u]} for u, s in USERS.items()},
            "well_known": {"Everyone": "S-1-1-0", "Authenticated Users": "S-1-5-11", "Administrators": "S-1-5-32-544"},
        }
        p = self.tmp / "directory.json"
        p.write_text(json.dumps(d), encoding="utf-8")
        self._tick(p)

    def _write_acl(self) -> None:
        p = self.tmp / "acl.json"
        entries = {"": {"protected": True, "aces": [["ALLOW", "Administrators", "FULL", "OI|CI"]]}, **self.acl_entries}
        p.write_text(json.dumps({"share": "S", "entries": entries}), encoding="utf-8")
        self._tick(p)

    @initialize()
    def setup(self) -> None:
        for f in FOLDERS:
            (self.share / f).mkdir(parents=True, exist_ok=True)
        self.acl_entries = {"F1": {"aces": [["ALLOW", "G_A", "READ", "OI|CI"]]}, "F2": {"aces": [["ALLOW", "G_B", "READ", "OI|CI"]]}}
        self._write_directory()
        self._write_acl()
        cfg = self.tmp / "ancre.toml"
        cfg.write_text(
            'data_dir = "data"\n[directory]\nkind = "file"\npath = "directory.json"\ncache_ttl_s = 0\n'
            '[sync]\nmass_delete_min_items = 1000\n[query]\nlive_acl_ttl_s = 0\n'
            '[[sources]]\nid = "s"\nroot = "share"\nacl_manifest = "acl.json"\n',
            encoding="utf-8",
        )
        self.rt = Runtime(load_settings(cfg))

    def teardown(self) -> None:
        if self.rt is not None:
            self.rt.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---------------------------------------------------------------- source mutations
    @rule(folder=st.sampled_from(FOLDERS), name=st.sampled_from(NAMES), words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))
    def write_file(self, folder: str, name: str, words: list[str]) -> None:
        self.version += 1
        marker = f"marqueur{self.version}x"
        path = f"{folder}/{name}"
        p = self.share / path
        p.write_text(f"{' '.join(words)} {marker}\n", encoding="utf-8")
        self._tick(p)
        self.files[path] = marker

    @precondition(lambda self: bool(self.files))
    @rule(data=st.data())
    def delete_file(self, data: st.DataObject) -> None:
        path = data.draw(st.sampled_from(sorted(self.files)))
        (self.share / path).unlink()
        del self.files[path]

    @rule(
        target_path=st.sampled_from((*FOLDERS, *(f"{f}/{n}" for f in FOLDERS for n in NAMES))),
        aces=st.lists(
            st.tuples(st.sampled_from(("ALLOW", "DENY")), st.sampled_from(PRINCIPAL_NAMES), st.sampled_from(("READ", "FULL", "WRITE")), st.sampled_from(("OI|CI", ""))),
            max_size=3,
        ),
        protected=st.booleans(),
    )
    def change_acl(self, target_path: str, aces: list, protected: bool) -> None:
        entry: dict = {"aces": [list(a) for a in aces]}
        if protected:
            entry["protected"] = True
        self.acl_entries[target_path] = entry
        self._write_acl()

    @rule(user=st.sampled_from(sorted(USERS)), groups=st.lists(st.sampled_from(sorted(GROUPS)), unique=True, max_size=3))
    def change_membership(self, user: str, groups: list[str]) -> None:
        self.membership[user] = groups
        self._write_directory()

    @rule(rebuild=st.booleans())
    def sync(self, rebuild: bool) -> None:
        assert self.rt is not None
        rep = self.rt.engine.run_pass(self.rt.connectors()[0], rebuild_bm25=rebuild)
        assert rep.outcome == "ok" and rep.failed == 0, rep
        self.synced_files = dict(self.files)
        self.synced_manifest = AclManifest.load(self.tmp / "acl.json", FileDirectory(self.tmp / "directory.json"))

    # ---------------------------------------------------------------- the property
    @precondition(lambda self: self.synced_manifest is not None)
    @rule(query=st.sampled_from((*WORDS, "contrat serveur", "marqueur1x")))
    def search(self, query: str) -> None:
        assert self.rt is not None and self.synced_manifest is not None
        oracle_dir = FileDirectory(self.tmp / "directory.json")
        current = AclManifest.load(self.tmp / "acl.json", oracle_dir)  # rights right now
        for user in (*USERS, "intrus"):
            principals = oracle_dir.principals(user)
            got = self.rt.retriever.retrieve(query, self.rt.directory.principals(user), limit=100).results
            if not principals:
                assert got == ()
            for r in got:
                assert r.path in self.synced_files, f"{r.path} is deleted but was returned"
                assert self.synced_files[r.path] in r.text, f"{r.path}: outdated chunk returned"
                acl = current.acl_for(r.path, is_dir=False)
                assert acl.readable_by(principals), f"{user} may not read {r.path} now ({acl})"
                assert (self.share / r.path).is_file(), f"{r.path} was deleted at its source"

RightsMachine.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=16,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestRights = RightsMachine.TestCase
