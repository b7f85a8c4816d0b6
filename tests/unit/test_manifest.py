"""ACL manifests on the real corpus (visibility.json is the oracle), fail-closed entries, explain."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from support.corpus import load_visibility

from ancre.acl.directory import CachedDirectory, FileDirectory
from ancre.acl.engine import READ, Ace, AceType, SecurityDescriptor
from ancre.acl.explain import explain
from ancre.acl.manifest import AclManifest
from ancre.errors import AclError

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "axonix"
SHARE = CORPUS / "share"
DOM = "S-1-5-21-1004336348-1177238915-682003330"
DENY_FILE = "CLIENTS/test-deny-explicite.docx"


@pytest.fixture(scope="module")
def directory() -> FileDirectory:
    return FileDirectory(CORPUS / "directory.json")


@pytest.fixture(scope="module")
def manifest(directory: FileDirectory) -> AclManifest:
    return AclManifest.load(CORPUS / "acl.json", directory)


def corpus_manifest() -> dict[str, Any]:
    return json.loads((CORPUS / "acl.json").read_text(encoding="utf-8"))


def write_manifest(tmp_path: Path, data: Any) -> Path:
    p = tmp_path / "acl.json"
    p.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return p


def readable(m: AclManifest, d: FileDirectory, user: str, rel: str, is_dir: bool = False) -> bool:
    return m.acl_for(rel, is_dir).readable_by(d.principals(user))


def _visibility() -> list[tuple[str, set[str], set[str]]]:
    """(user, readable top-level folders, files excepted inside them) from visibility.json."""
    out = []
    for user, items in load_visibility().items():
        folders, excepted = set(), set()
        for item in items:
            if item == "nothing" or item.startswith("sharepoint:"):
                continue
            name, _, rest = item.partition(" (except ")
            folders.add(name)
            if rest:
                excepted.add(f"{name}/{rest.rstrip(')')}")
        out.append((user, folders, excepted))
    return out


@pytest.mark.parametrize(("user", "folders", "excepted"), _visibility(), ids=[v[0] for v in _visibility()])
def test_visibility_matches_the_corpus_oracle(
    manifest: AclManifest, directory: FileDirectory, user: str, folders: set[str], excepted: set[str]
) -> None:
    tops = sorted(p.name for p in SHARE.iterdir() if p.is_dir())
    assert tops  # the corpus is there
    seen_files = 0
    for top in tops:
        expected = top in folders
        assert readable(manifest, directory, user, top, is_dir=True) is expected, (user, top)
        for f in sorted((SHARE / top).rglob("*")):
            rel = f.relative_to(SHARE).as_posix()
            want = expected and rel not in excepted
            assert readable(manifest, directory, user, rel, is_dir=f.is_dir()) is want, (user, rel)
            seen_files += 1
    assert seen_files >= 9
    assert not readable(manifest, directory, user, "", is_dir=True)  # share root: Administrators only


def test_the_deny_file_and_the_protected_folder(manifest: AclManifest, directory: FileDirectory) -> None:
    assert not readable(manifest, directory, "chloe", DENY_FILE)
    assert readable(manifest, directory, "chloe", "CLIENTS/21_Contrat_Maintenance_Baumont_Industries.docx")
    assert readable(manifest, directory, "bruno", DENY_FILE)
    assert readable(manifest, directory, "alice", DENY_FILE)
    assert not readable(manifest, directory, "alice", "RH", is_dir=True)
    assert not readable(manifest, directory, "alice", "RH/Grille_Salariale_2026.docx")
    assert readable(manifest, directory, "emma", "RH/Grille_Salariale_2026.docx")
    assert readable(manifest, directory, "emma", "DOCUMENTATION/Politique_Securite_SI.pdf")
    acl = manifest.acl_for(DENY_FILE)
    assert acl.deny == {f"sid:{DOM}-1103"} and acl.reason is None


def test_protected_entry_blocks_what_the_root_grants(tmp_path: Path, directory: FileDirectory) -> None:
    # in the corpus the root grants Administrators only, so make it grant everyone to see RH's protection
    data = corpus_manifest()
    data["entries"][""]["aces"].append(["ALLOW", "Authenticated Users", "READ", "OI|CI"])
    m = AclManifest.load(write_manifest(tmp_path, data), directory)
    assert readable(m, directory, "alice", "CLIENTS/x.docx") and readable(m, directory, "alice", "", is_dir=True)
    assert not readable(m, directory, "alice", "RH", is_dir=True)
    assert not readable(m, directory, "alice", "RH/Grille_Salariale_2026.docx")
    assert readable(m, directory, "emma", "RH/Grille_Salariale_2026.docx")
    data["entries"]["RH"]["protected"] = False
    m = AclManifest.load(write_manifest(tmp_path, data), directory)
    assert readable(m, directory, "alice", "RH/Grille_Salariale_2026.docx")


def test_unknown_identity_reads_nothing(manifest: AclManifest, directory: FileDirectory) -> None:
    assert directory.principals("inconnu") == frozenset()
    for f in SHARE.rglob("*"):
        assert not manifest.acl_for(f.relative_to(SHARE).as_posix(), f.is_dir()).readable_by(frozenset())


def test_path_matching_is_case_insensitive_and_nfc(manifest: AclManifest, tmp_path: Path, directory: FileDirectory) -> None:
    assert manifest.acl_for("clients/TEST-DENY-EXPLICITE.DOCX") == manifest.acl_for(DENY_FILE)
    assert manifest.acl_for("Clients\\test-deny-explicite.docx") == manifest.acl_for(DENY_FILE)
    assert manifest.acl_for("/rh//./Grille.docx") == manifest.acl_for("RH/Grille.docx")
    data = {"entries": {"": {"aces": [["ALLOW", "Administrators", "FULL", "OI|CI"]]},
                        unicodedata.normalize("NFD", "Réunions"): {"aces": [["ALLOW", "GG_RH", "READ", "OI|CI"]]}}}
    m = AclManifest.load(write_manifest(tmp_path, data), directory)
    composed = unicodedata.normalize("NFC", "RÉUNIONS/pv.docx")
    assert f"sid:{DOM}-1105" in m.acl_for(composed).allow


def test_unresolvable_principal_closes_that_subtree_only(tmp_path: Path, directory: FileDirectory) -> None:
    data = corpus_manifest()
    data["entries"]["CLIENTS"]["aces"].append(["ALLOW", "GG_Inconnu", "READ", "OI|CI"])
    data["entries"]["CLIENTS/Sous"] = {"protected": True, "aces": [["ALLOW", "GG_Techniciens", "READ", "OI|CI"]]}
    m = AclManifest.load(write_manifest(tmp_path, data), directory)
    for rel, is_dir in (("CLIENTS", True), (DENY_FILE, False), ("CLIENTS/a/b.docx", False), ("CLIENTS/Sous/x.docx", False)):
        acl = m.acl_for(rel, is_dir)
        assert acl.allow == frozenset() and acl.deny == frozenset(), rel
        assert acl.reason is not None and "'CLIENTS'" in acl.reason and "GG_Inconnu" in acl.reason
        with pytest.raises(AclError):
            m.security_descriptor(rel, is_dir)
    assert readable(m, directory, "david", "COMMERCIAL/04_Reponse_AO_Migration_Azure_Sarrasin.docx")
    assert readable(m, directory, "emma", "DOCUMENTATION/x.md")


def test_names_are_resolved_against_the_current_directory(tmp_path: Path) -> None:
    d = json.loads((CORPUS / "directory.json").read_text(encoding="utf-8"))
    dir_path = tmp_path / "directory.json"
    dir_path.write_text(json.dumps(d), encoding="utf-8")
    data = corpus_manifest()
    data["entries"]["PROJETS"] = {"aces": [["ALLOW", "GG_Projets", "READ", "OI|CI"]]}
    directory = FileDirectory(dir_path)
    m = AclManifest.load(write_manifest(tmp_path, data), directory)
    assert m.acl_for("PROJETS/p.docx").reason is not None  # unknown group: closed
    d["groups"]["GG_Projets"] = {"sid": f"{DOM}-1150", "member_of": []}
    d["users"]["bruno"]["groups"].append("GG_Projets")
    dir_path.write_text(json.dumps(d), encoding="utf-8")
    os.utime(dir_path, (1_800_000_000, 1_800_000_000))
    assert readable(m, directory, "bruno", "PROJETS/p.docx")


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ({"aces": [["ALLOW", "GG_RH", "READALL", "OI|CI"]]}, "right 'READALL'"),
        ({"aces": [["PERMIT", "GG_RH", "READ", "OI|CI"]]}, "type 'PERMIT'"),
        ({"aces": [["ALLOW", "GG_RH", "READ", "OI|XX"]]}, "flag 'XX'"),
        ({"aces": [["ALLOW", "GG_RH", "READ"]]}, "aces.0"),
        ({"aces": [["ALLOW", "", "READ", ""]]}, "empty principal"),
        ({"protected": "yes", "aces": []}, "protected"),
        ({"aces": [["ALLOW", "GG_RH", "READ", "OI|CI"]], "acl": 1}, "acl"),
        ("ALLOW GG_RH", "'RH'"),
    ],
)
def test_bad_entry_closes_its_subtree(tmp_path: Path, directory: FileDirectory, entry: Any, needle: str) -> None:
    data = corpus_manifest()
    data["entries"]["RH"] = entry
    m = AclManifest.load(write_manifest(tmp_path, data), directory)
    for rel, is_dir in (("RH", True), ("RH/Grille_Salariale_2026.docx", False)):
        acl = m.acl_for(rel, is_dir)
        assert acl.allow == frozenset() and acl.reason is not None
        assert "'RH'" in acl.reason and needle in acl.reason
    assert readable(m, directory, "emma", "DOCUMENTATION/x.md")


def test_duplicate_keys_close_both(tmp_path: Path, directory: FileDirectory) -> None:
    data = corpus_manifest()
    data["entries"]["Clients"] = {"aces": [["ALLOW", "Everyone", "READ", "OI|CI"]]}
    m = AclManifest.load(write_manifest(tmp_path, data), directory)
    acl = m.acl_for("CLIENTS/x.docx")
    assert acl.allow == frozenset() and "same path" in (acl.reason or "")


@pytest.mark.parametrize("content", ["{oops", "[]", '{"entries": []}', '{"share": "x"}'])
def test_unusable_file_raises_acl_error(tmp_path: Path, directory: FileDirectory, content: str) -> None:
    with pytest.raises(AclError, match="acl manifest"):
        AclManifest.load(write_manifest(tmp_path, content), directory)
    with pytest.raises(AclError, match="cannot read"):
        AclManifest.load(tmp_path / "missing.json", directory)


def test_no_propagate_and_inherit_only_flags(tmp_path: Path, directory: FileDirectory) -> None:
    data = {"entries": {
        "": {"protected": True, "aces": [["ALLOW", "Administrators", "FULL", "OI|CI"]]},
        "A": {"aces": [["ALLOW", "GG_RH", "READ", "OI|CI|NP"], ["ALLOW", "GG_Commercial", "READ", "OI|CI|IO"]]},
    }}
    m = AclManifest.load(write_manifest(tmp_path, data), directory)
    assert readable(m, directory, "emma", "A/f.docx") and readable(m, directory, "emma", "A/sub", is_dir=True)
    assert not readable(m, directory, "emma", "A/sub/f.docx")  # NP: one generation only
    assert not readable(m, directory, "david", "A", is_dir=True)  # IO: not on A itself
    assert readable(m, directory, "david", "A/sub/deep/f.docx")


def test_literal_sid_principal_and_share_fields(tmp_path: Path, directory: FileDirectory) -> None:
    data = {"share": "Partage", "unc_root": "\\\\SRV\\Partage",
            "entries": {"": {"aces": [["ALLOW", f"{DOM}-1205", "READ", "OI|CI"]]}}}
    m = AclManifest.load(write_manifest(tmp_path, data), directory)
    assert m.acl_for("x/y.docx").allow == {f"sid:{DOM}-1205"}
    assert (m.share, m.unc_root) == ("Partage", "\\\\SRV\\Partage")
    assert m.entry("") is not None and m.entry("x") is None


def test_missing_root_entry_is_closed(tmp_path: Path, directory: FileDirectory) -> None:
    m = AclManifest.load(write_manifest(tmp_path, {"entries": {}}), directory)
    acl = m.acl_for("any/file.docx")
    assert acl.allow == frozenset() and acl.reason == "empty DACL: nobody"


# --- explain ---------------------------------------------------------------------------------------
def test_explain_names_the_deny_ace_and_the_group(manifest: AclManifest, directory: FileDirectory) -> None:
    e = explain(CachedDirectory(directory, 60), manifest, "chloe", DENY_FILE)
    assert not e.readable
    assert e.deciding_ace == Ace(AceType.ACCESS_DENIED, f"{DOM}-1103", READ)
    assert e.deciding_name == "AXONIX\\GG_Stagiaires" and e.via == ("GG_Stagiaires",)
    assert e.summary == (
        f"denied by explicit DENY ACE on {DENY_FILE} for AXONIX\\GG_Stagiaires ({DOM}-1103); "
        "chloe is a member via GG_Stagiaires"
    )
    text = e.render()
    assert "NOT READABLE" in text and e.summary in text
    assert f"sid:{DOM}-1106  AXONIX\\GG_Personnel" in text and "Authenticated Users" in text
    assert len(e.principals) == 7  # with NETWORK


def test_explain_allow_inherited_and_nested(manifest: AclManifest, directory: FileDirectory) -> None:
    e = explain(directory, manifest, "bruno", DENY_FILE)
    assert e.readable and e.origin == "CLIENTS"
    assert "ALLOW ACE inherited from CLIENTS for AXONIX\\GG_Techniciens" in e.summary
    assert "bruno is a member via GG_Techniciens" in e.summary
    e = explain(directory, manifest, "emma", "DOCUMENTATION/09-pipeline-llm.md")
    assert e.readable and "Authenticated Users (S-1-5-11)" in e.summary


def test_explain_refusals(manifest: AclManifest, directory: FileDirectory, tmp_path: Path) -> None:
    e = explain(directory, manifest, "alice", "RH/Grille_Salariale_2026.docx")
    assert not e.readable and e.deciding_ace is None and e.rule == "no ACE grants read"
    assert "inheritance is disabled at RH" in e.summary
    e = explain(directory, manifest, "zoe", DENY_FILE)
    assert not e.readable and "unknown identity" in e.summary and e.principals == ()
    data = corpus_manifest()
    data["entries"]["CLIENTS"]["aces"][0][1] = "GG_Inconnu"
    broken = AclManifest.load(write_manifest(tmp_path, data), directory)
    e = explain(directory, broken, "bruno", DENY_FILE)
    assert not e.readable and "GG_Inconnu" in e.summary and e.rule.startswith("unreadable security descriptor")


def test_explain_with_a_descriptor_getter(directory: FileDirectory) -> None:
    sds = {"a.docx": SecurityDescriptor(dacl=(Ace(AceType.ACCESS_ALLOWED, f"{DOM}-1202", READ),))}
    e = explain(directory, sds.get, "bruno", "a.docx")
    assert e.readable and e.origin is None and "this is bruno's own account" in e.summary
    e = explain(directory, sds.get, "bruno", "b.docx")
    assert not e.readable and e.rule.startswith("unreadable security descriptor")
