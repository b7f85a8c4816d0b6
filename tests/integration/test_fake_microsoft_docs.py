"""The fake tenant serves what Microsoft's documentation describes, checked against the pages
themselves (tests/support/ms_docs: their JSON representations and examples, verbatim), not against
ancre's code: the properties of every permission, identity, link and delta item it answers are
properties of the documented resources, and the rules the pages state hold (no ``inheritedFrom``
in a SharePoint library, effective permissions, ``0001-01-01T00:00:00Z`` for no expiry, delta
without ``path`` and ``cTag``, a deleted item without its name, ``$batch`` answers matched by id
and not by order)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import httpx
import pytest
from support.fake_microsoft import NO_EXPIRY, FakeMicrosoft
from support.ms_docs import RULES, example, names, source_of

PERMISSION_KEYS = set(example("permission-resource"))
IDENTITY_SET_KEYS = set(example("sharepoint-identity-set"))
SP_IDENTITY_KEYS = {"id", "displayName", "loginName", "email", "thumbnails"}  # sharePointIdentity / identity
LINK_KEYS = set(example("sharinglink-resource"))
DRIVE_ITEM_KEYS = set(example("driveitem-resource"))
BATCH_RESPONSE_KEYS = set().union(*(set(r) for r in example("batch-response")["responses"]))


@pytest.fixture
def ms() -> Iterator[FakeMicrosoft]:
    with FakeMicrosoft.axonix() as fake:
        team = fake.add_group("Equipe", unified=True)
        team.owners.append(fake.user("chloe").id)
        docs = fake.drive("Direction")
        f = fake.item(docs, "Grille_Salariale_2026.docx")
        fake.grant(docs, f, user="bruno", expires="2030-01-01T00:00:00Z")
        fake.grant(docs, f, owners_of="Equipe")
        fake.add_link(docs, f, scope="users", recipients=["bruno"])
        fake.add_link(docs, f, scope=None, recipients=["chloe"])
        fake.add_link(docs, f, scope="organization", expires="2020-01-01T00:00:00Z")
        fake.break_inheritance(docs, "Contrats")
        yield fake


def graph(ms: FakeMicrosoft) -> httpx.Client:
    ca = ssl.create_default_context(cafile=str(ms.ca_path))
    tok = httpx.post(f"{ms.authority}/{ms.tenant_id}/oauth2/v2.0/token", verify=ca, data={
        "grant_type": "client_credentials", "client_id": ms.client_id, "client_secret": ms.client_secret,
        "scope": f"{ms.base_url}/.default"}).json()["access_token"]
    return httpx.Client(base_url=ms.graph_url, verify=ca, headers={"Authorization": f"Bearer {tok}"})


def test_every_example_cites_its_page() -> None:
    assert len(names()) >= 15
    for n in names():
        assert source_of(n).startswith("https://learn.microsoft.com/"), n
    assert all(page.startswith("https://learn.microsoft.com/") and text for page, text in RULES.values())


def test_permissions_have_only_documented_properties_and_no_inherited_from(ms: FakeMicrosoft) -> None:
    docs = ms.drive("Direction")
    with graph(ms) as g:
        for it in docs.items.values():
            perms = g.get(f"/drives/{docs.id}/items/{it.id}/permissions").json()["value"]
            for p in perms:
                assert set(p) <= PERMISSION_KEYS, p
                assert "inheritedFrom" not in p  # RULES["no-inherited-from"]
                for ident in [p.get("grantedToV2"), *p.get("grantedToIdentitiesV2", [])]:
                    if ident is None:
                        continue
                    assert set(ident) <= IDENTITY_SET_KEYS, ident
                    assert all(set(v) <= SP_IDENTITY_KEYS for v in ident.values()), ident
                if "link" in p:
                    assert set(p["link"]) <= LINK_KEYS, p
                    assert p["expirationDateTime"]  # RULES["expiration"]: MinValue when none
        grille = ms.item(docs, "Grille_Salariale_2026.docx")
        perms = g.get(f"/drives/{docs.id}/items/{grille.id}/permissions").json()["value"]
        links = [p for p in perms if "link" in p]
        assert {p["link"].get("scope") for p in links} == {"users", None, "organization"}
        assert [p["expirationDateTime"] for p in links if p["link"].get("scope") == "users"] == [NO_EXPIRY]
        owners = [p for p in perms if p.get("grantedToV2", {}).get("siteUser", {}).get("loginName", "").endswith("_o")]
        assert len(owners) == 1 and "group" in owners[0]["grantedToV2"]  # the group *and* its owners claim
        # an item that inherits lists its parent's effective permissions (RULES["effective"])
        contrats = ms.item(docs, "Contrats")
        child = ms.item(docs, "Contrats/03_Contrat_Maintenance_Etude_Rochat.docx")
        assert g.get(f"/drives/{docs.id}/items/{contrats.id}/permissions").json() == {"value": []}
        assert g.get(f"/drives/{docs.id}/items/{child.id}/permissions").json() == {"value": []}
        plain = ms.item(docs, "09-pipeline-llm.md")
        site_groups = [p["grantedToV2"]["siteGroup"] for p in g.get(f"/drives/{docs.id}/items/{plain.id}/permissions").json()["value"]]
        assert {s["displayName"] for s in site_groups} == {"Direction Owners", "Members"}


def test_delta_items_are_documented_driveitems(ms: FakeMicrosoft) -> None:
    docs = ms.drive("Direction")
    with graph(ms) as g:
        body = g.get(f"/drives/{docs.id}/root/delta").json()
        link = body["@odata.deltaLink"]
        for it in body["value"]:
            assert set(it) - {"@microsoft.graph.sharedChanged"} <= DRIVE_ITEM_KEYS, it
            assert "path" not in it.get("parentReference", {})  # RULES["delta-no-path"]
            assert "cTag" not in it  # omitted on create/modify in OneDrive for Business
        ms.delete_item(docs, "09-pipeline-llm.md")
        gone = g.get(link).json()["value"]
        assert [set(x) for x in gone] == [{"id", "parentReference", "deleted"}]  # RULES["delta-deleted"]: no name
    # the page's own examples are delta answers the connector's client reads the same way
    assert {"@odata.nextLink"} <= set(example("delta-first-page")) and "@odata.deltaLink" in example("delta-last-page")


def test_batch_answers_are_matched_by_id_not_order(ms: FakeMicrosoft) -> None:
    docs = ms.drive("Direction")
    ids = [it.id for it in docs.items.values()][:5]
    with graph(ms) as g:
        reqs = [{"id": str(n), "method": "GET", "url": f"/drives/{docs.id}/items/{i}/permissions"} for n, i in enumerate(ids)]
        got = g.post("/$batch", json={"requests": reqs}).json()["responses"]
    assert [r["id"] for r in got] != [r["id"] for r in reqs]  # RULES["batch-order"]
    assert sorted(r["id"] for r in got) == sorted(r["id"] for r in reqs)
    assert all(set(r) <= BATCH_RESPONSE_KEYS for r in got)
    with graph(ms) as g:
        too_many = [{"id": str(n), "method": "GET", "url": "/users"} for n in range(21)]
        assert g.post("/$batch", json={"requests": too_many}).status_code == 400  # RULES["batch-limit"]


def test_the_delta_pages_own_examples_apply_as_documented(ms: FakeMicrosoft, tmp_path) -> None:
    """The "driveItem: delta" page's Example 1 and Example 2 items, verbatim, in two rounds: after
    both, ``file.txt`` (a ``file`` facet, no parent: the library root) is listed, ``folder2``
    (deleted in round 2) and ``file5.txt`` (deleted) are not."""
    from support.ms_docs import copy_of

    from ancre.connectors.base import SourceContext
    from ancre.connectors.sharepoint import build
    from ancre.connectors.sharepoint.config import SharePointSourceConfig

    docs = ms.drive("Direction")
    cert = ms.certificate
    cfg = SharePointSourceConfig(
        id="sp", kind="sharepoint", tenant_id=ms.tenant_id, client_id=ms.client_id,
        certificate_path=cert.key_pem_path, certificate_thumbprint=cert.thumbprint, authority=ms.authority,
        graph_url=ms.graph_url, ca_file=ms.ca_path, sites=(ms.site_url("Direction"),),
    )

    def no_directory():
        raise AssertionError("no directory")

    conn = build(cfg, SourceContext(directory=no_directory, ignore=(), private_paths=(), data_dir=tmp_path))
    try:
        list(conn.list_items())
        ms.add_delta_entries(docs.id, copy_of("delta-first-page")["value"])
        first = {it.path for it in conn.list_items()}
        assert "sites/Direction/Documents/file.txt" in first and "sites/Direction/Documents/file5.txt" not in first
        ms.add_delta_entries(docs.id, copy_of("delta-last-page")["value"])
        paths = {it.path for it in conn.list_items()}
        assert "sites/Direction/Documents/file.txt" in paths
        assert not any("folder2" in p or "file5" in p for p in paths)
    finally:
        conn.close()  # type: ignore[attr-defined]
