"""``acl explain`` canonicalises paths as sync does: ``..`` is resolved and may
not leave the source; absolute, UNC and URL paths must be under the source."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ancre.acl.directory import FileDirectory
from ancre.acl.explain import PathOutsideSourceError, canonical_path, explain, explain_trace
from ancre.acl.manifest import AclManifest
from ancre.connectors.base import AclExplainable
from ancre.connectors.folder import FolderConnector, FolderSourceConfig
from ancre.errors import AncreError

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "axonix"
UNC = "\\\\SRV-FICHIERS\\Partage"
SALARIES = "RH/Grille_Salariale_2026.docx"


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("CLIENTS/x.docx", "CLIENTS/x.docx"),
        ("CLIENTS/../RH/Grille_Salariale_2026.docx", SALARIES),
        ("CLIENTS\\..\\RH\\Grille_Salariale_2026.docx", SALARIES),
        ("./CLIENTS//./a/../x.docx", "CLIENTS/x.docx"),
        ("CLIENTS/..", ""),
        ("Cafe\u0301/x.docx", "Café/x.docx"),  # NFC, as sync stores paths
        (f"{UNC}\\CLIENTS\\..\\RH\\Grille_Salariale_2026.docx", SALARIES),
        ("//srv-fichiers/partage/RH/Grille_Salariale_2026.docx", SALARIES),
        ("https://sp.example/sites/D/Documents partages/a/../b.docx", "b.docx"),
    ],
)
def test_canonical_paths(given: str, canonical: str) -> None:
    unc = "https://sp.example/sites/D/Documents partages" if given.startswith("https:") else UNC
    assert canonical_path(given, unc_root=unc, root=Path("/srv/partage")) == canonical


@pytest.mark.parametrize(
    "given",
    [
        "../../etc/passwd",
        "CLIENTS/../../etc/passwd",
        "..",
        "/etc/passwd",
        "/srv/partage/../etc/passwd",
        "/srv/partage-bis/x.docx",  # a sibling whose name starts like the root
        "C:\\Windows\\win.ini",
        f"{UNC}\\..\\Autre\\x.docx",
        f"{UNC}\\CLIENTS\\..\\..\\Autre\\x.docx",
        "\\\\SRV-FICHIERS\\Autre\\x.docx",
        "https://sp.example/sites/D/Documents partages/../../x.docx",
    ],
)
def test_paths_outside_the_source_are_errors(given: str) -> None:
    unc = "https://sp.example/sites/D/Documents partages" if given.startswith("https:") else UNC
    with pytest.raises(PathOutsideSourceError, match=r"outside|not under"):
        canonical_path(given, unc_root=unc, root=Path("/srv/partage"))
    assert issubclass(PathOutsideSourceError, AncreError)


def test_unc_roots_with_non_ascii_names() -> None:
    assert canonical_path("\\\\SRV\\STRAßE\\a\\b.docx", unc_root="\\\\srv\\Straße") == "a/b.docx"
    with pytest.raises(PathOutsideSourceError):
        canonical_path("\\\\SRV\\STRASSE\\a\\b.docx", unc_root="\\\\srv\\Straße")


def test_an_absolute_path_inside_a_folder_source_is_its_relative_path(tmp_path: Path) -> None:
    (tmp_path / "RH").mkdir()
    assert canonical_path(str(tmp_path / "RH" / "x.docx"), root=tmp_path) == "RH/x.docx"
    assert canonical_path(f"{tmp_path}/CLIENTS/../RH/x.docx", root=tmp_path) == "RH/x.docx"
    with pytest.raises(PathOutsideSourceError):
        canonical_path("/RH/x.docx", root=tmp_path)  # not "relative to the share" any more
    with pytest.raises(PathOutsideSourceError):
        canonical_path(str(tmp_path / "RH" / "x.docx"))  # SMB source: no local root


def test_explain_answers_for_the_canonical_path() -> None:
    """bruno (GG_Techniciens) reads CLIENTS, not RH: going through CLIENTS/.. changes nothing."""
    directory = FileDirectory(CORPUS / "directory.json")
    manifest = AclManifest.load(CORPUS / "acl.json", directory)
    direct = explain(directory, manifest, "bruno", SALARIES)
    tricked = explain(directory, manifest, "bruno", "CLIENTS/../" + SALARIES)
    assert not direct.readable and not tricked.readable
    assert tricked == direct and tricked.path == SALARIES
    assert explain(directory, manifest, "bruno", "CLIENTS/./21_Contrat_Maintenance_Baumont_Industries.docx").readable
    with pytest.raises(PathOutsideSourceError):
        explain(directory, manifest, "bruno", "../../etc/passwd")


# ---------------------------------------------------------------- the folder connector explains (AclExplainable)
def _folder(tmp_path: Path, **kw: Any) -> FolderConnector:
    shutil.copytree(CORPUS / "share", tmp_path / "share")
    cfg = FolderSourceConfig(id="partage", root=tmp_path / "share", unc_root=UNC, **kw)
    return FolderConnector(cfg, directory=FileDirectory(CORPUS / "directory.json"), ignore=())


def test_the_folder_connector_traces_its_manifest(tmp_path: Path) -> None:
    conn = _folder(tmp_path, acl_manifest=CORPUS / "acl.json")
    assert isinstance(conn, AclExplainable)
    rel = conn.explain_path(f"{UNC}\\CLIENTS\\..\\{SALARIES.replace('/', chr(92))}")
    assert rel == SALARIES and conn.explain_path(str(tmp_path / "share" / SALARIES)) == SALARIES
    with pytest.raises(PathOutsideSourceError):
        conn.explain_path("/etc/passwd")
    trace = conn.explain_acl(rel)
    assert trace.source == "partage" and trace.indexable is True and trace.protected_at == "RH"
    assert trace.descriptor is not None and set(trace.origins.values()) == {"RH"}
    # the trace explains as the manifest does
    directory = FileDirectory(CORPUS / "directory.json")
    manifest = AclManifest.load(CORPUS / "acl.json", directory)
    assert explain_trace(trace, "bruno", directory=directory) == replace(
        explain(directory, manifest, "bruno", rel), source="partage"
    )
    assert conn.explain_acl("CLIENTS/inexistant.docx").indexable is False


def test_an_unreadable_manifest_explains_as_nobody(tmp_path: Path) -> None:
    broken = tmp_path / "acl.json"
    broken.write_text("{not json", encoding="utf-8")
    conn = _folder(tmp_path, acl_manifest=broken)
    trace = conn.explain_acl(SALARIES)
    assert trace.descriptor is None and "not valid JSON" in (trace.unreadable or "")
    ex = explain_trace(trace, "emma", directory=FileDirectory(CORPUS / "directory.json"))
    assert not ex.readable and "unreadable security descriptor" in ex.rule
    (tmp_path / "acl.json").unlink()
    assert "cannot read" in (conn.explain_acl(SALARIES).unreadable or "")


def test_the_folder_connector_traces_its_principals(tmp_path: Path) -> None:
    conn = _folder(tmp_path, principals=("GG_Direction",))
    trace = conn.explain_acl("CLIENTS/x.docx")
    assert trace.grants is not None and trace.descriptor is None and trace.indexable is False
    directory = FileDirectory(CORPUS / "directory.json")
    alice = explain_trace(trace, "alice", directory=directory)
    assert alice.readable and alice.provider == "directory" and alice.deciding_name is None
    assert "the source grants read to AXONIX\\GG_Direction, which alice holds" in alice.render()
    assert not explain_trace(trace, "bruno", directory=directory).readable


# ---------------------------------------------------------------- the token SID that decided, bit by bit
def test_explain_names_the_token_sid_and_the_bits() -> None:
    from ancre.acl.engine import Ace, AceType, SecurityDescriptor
    from ancre.acl.explain import AclTrace
    from ancre.acl.token import LocalGroups, TokenRules

    directory = FileDirectory(CORPUS / "directory.json")
    dom = "S-1-5-21-1004336348-1177238915-682003330"
    rules = TokenRules.network(LocalGroups({"S-1-5-32-545": frozenset({"S-1-5-11"})}, origin="SAMR on \\\\test"),
                               account_domain=dom, primary_domain=dom)
    allow_users = Ace(AceType.ACCESS_ALLOWED, "S-1-5-32-545", 0x1200A9)
    deny_ea = Ace(AceType.ACCESS_DENIED, "S-1-5-2", 0x8)
    trace = AclTrace("smb", "x.docx", descriptor=SecurityDescriptor(dacl=(deny_ea, allow_users)), rules=rules)
    ex = explain_trace(trace, "bruno", directory=directory)
    assert not ex.readable and ex.deciding_ace == deny_ea
    assert ex.summary.startswith("denied by explicit DENY ACE on x.docx for NETWORK (S-1-5-2)")
    assert ex.token is not None and "NETWORK: in every network logon" in ex.token
    assert "FILE_READ_EA: refused by DENY ACE 1 for NETWORK (S-1-5-2)" in " ".join(ex.bits)
    assert "FILE_READ_DATA: granted by ALLOW ACE 2 for BUILTIN\\Users (S-1-5-32-545)" in " ".join(ex.bits)
    ok = explain_trace(replace(trace, descriptor=SecurityDescriptor(dacl=(allow_users,))), "bruno", directory=directory)
    assert ok.readable and ok.decided_by == "sid:S-1-5-11"
    assert ok.token is not None and "local group BUILTIN\\Users of the file server (SAMR on \\\\test)" in ok.token
