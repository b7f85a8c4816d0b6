"""Harnesses of the in-tree source kinds for the source contract (:mod:`ancre.testing`), one
fixture per kind, each an :class:`~ancre.testing.harness.AclHarness`; test_connector_contract.py
runs the contract mixins on each (README "Adding a source").

The SMB harness uses the session's Samba AD DC (tests/support/samba.py): run it under
``flock /tmp/ancre-samba.lock``; ``-k TestFolderSource`` runs the folder harness alone.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import smbclient
from pydantic import SecretStr
from support.corpus import CORPUS
from support.samba import SambaDC

from ancre.acl.directory import FileDirectory
from ancre.config import DEFAULT_IGNORE
from ancre.connectors.base import Connector
from ancre.connectors.folder import FolderConnector, FolderSourceConfig
from ancre.connectors.smb import SmbConnector, SmbSourceConfig
from ancre.models import nfc


# ---------------------------------------------------------------- folder (with an acl.json manifest)
class FolderHarness:
    """A folder source over ``<tmp>/tree`` whose rights come from an ``acl.json`` manifest beside it
    (names resolved by the corpus directory.json): the root grants GG_Techniciens read."""

    def __init__(self, base: Path) -> None:
        self.tree = base / "tree"
        self.tree.mkdir()
        self.manifest = base / "acl.json"
        self.entries: dict[str, dict[str, object]] = {
            "": {"protected": True, "aces": [["ALLOW", "GG_Techniciens", "READ", "OI|CI"]]}
        }
        self._save()
        self.cfg = FolderSourceConfig(id="contract", root=self.tree, acl_manifest=self.manifest)
        self.connector: Connector = self._build()

    def _build(self) -> Connector:
        return FolderConnector(self.cfg, directory=FileDirectory(CORPUS / "directory.json"), ignore=DEFAULT_IGNORE)

    def reopen(self) -> Connector:
        self.connector = self._build()  # keeps no file of its own
        return self.connector

    def _save(self) -> None:
        tmp = self.manifest.with_suffix(".tmp")
        tmp.write_text(json.dumps({"share": "Contract", "entries": self.entries}), encoding="utf-8")
        os.replace(tmp, self.manifest)  # a new inode: the connector sees the edit at once

    def path(self, name: str) -> str:
        return nfc(name)

    def write(self, name: str, data: bytes) -> None:
        p = self.tree / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    def delete(self, name: str) -> None:
        (self.tree / name).unlink()

    def change_acl(self, name: str) -> None:
        self.entries[nfc(name)] = {"aces": [["ALLOW", "GG_RH", "READ", ""]]}
        self._save()

    def break_acl(self, name: str) -> None:
        self.entries[nfc(name)] = {"aces": [["ALLOW", "GG_Nobody_Knows", "READ", ""]]}
        self._save()

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        away = self.tree.with_name("unmounted")
        self.tree.rename(away)
        try:
            yield
        finally:
            away.rename(self.tree)


@pytest.fixture
def folder_source(tmp_path: Path) -> FolderHarness:
    """The folder connector's harness."""
    return FolderHarness(tmp_path)


# ---------------------------------------------------------------- SMB (the Samba AD DC's share)
class SmbHarness:
    """An SMB source over the DC's share ``Partage``, read as Administrator, restricted by
    ``include`` to a fresh folder ``contract-<hex>`` (the tree); files inherit the share root's
    rights. ACLs are changed with smbcacls, the server stopped with the fixture's ``stop_smbd``."""

    def __init__(self, dc: SambaDC) -> None:
        self.dc = dc
        self.folder = f"contract-{uuid.uuid4().hex[:8]}"
        self.cache: dict = {}
        self.admin = {"username": dc.admin_principal, "password": dc.admin_password, "port": dc.smb_port}
        self.cfg = SmbSourceConfig(
            id="contract", kind="smb", server=dc.host, port=dc.smb_port, share=dc.share,
            username=dc.admin_principal, password=SecretStr(dc.admin_password), include=(f"{self.folder}/*",),
        )
        self.connector: Connector = SmbConnector(self.cfg, directory=None, ignore=DEFAULT_IGNORE)
        smbclient.mkdir(self._unc(""), connection_cache=self.cache, **self.admin)

    def _unc(self, name: str) -> str:
        rel = f"{self.folder}/{name}".strip("/")
        return f"\\\\{self.dc.host}\\{self.dc.share}\\" + rel.replace("/", "\\")

    def path(self, name: str) -> str:
        return nfc(f"{self.folder}/{name}")

    def write(self, name: str, data: bytes) -> None:
        parent = name.rpartition("/")[0]
        if parent:
            smbclient.makedirs(self._unc(parent), exist_ok=True, connection_cache=self.cache, **self.admin)
        with smbclient.open_file(self._unc(name), "wb", connection_cache=self.cache, **self.admin) as fh:
            fh.write(data)

    def delete(self, name: str) -> None:
        smbclient.remove(self._unc(name), connection_cache=self.cache, **self.admin)

    def change_acl(self, name: str) -> None:
        self.dc.smbcacls(f"{self.folder}/{name}", "--add", f"ACL:{self.dc.sid_of('GG_RH')}:ALLOWED/0/READ")

    def break_acl(self, name: str) -> None:
        # a deny-object ACE ([MS-DTYP] 2.4.4.4): the ACL engine does not evaluate it, so nobody may read
        self.dc.smbcacls(
            f"{self.folder}/{name}", "--sddl", "--add",
            f"D:(OD;;CR;00299570-246d-11d0-a768-00aa006e0529;;{self.dc.sid_of('GG_Stagiaires')})",
        )

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        SmbConnector.drop_connections(self.cache)
        self.dc.stop_smbd()
        try:
            yield
        finally:
            self.dc.start_smbd()

    def reopen(self) -> Connector:
        assert isinstance(self.connector, SmbConnector)
        self.connector.close()  # keeps no file of its own
        self.connector = SmbConnector(self.cfg, directory=None, ignore=DEFAULT_IGNORE)
        return self.connector

    def close(self) -> None:
        assert isinstance(self.connector, SmbConnector)
        self.connector.close()
        SmbConnector.drop_connections(self.cache)
        shutil.rmtree(self.dc.share_path / self.folder, ignore_errors=True)


@pytest.fixture
def smb_source(samba_dc: SambaDC) -> Iterator[SmbHarness]:
    """The SMB connector's harness (needs the Samba DC: root and Samba installed)."""
    h = SmbHarness(samba_dc)
    try:
        yield h
    finally:
        h.close()


# ---------------------------------------------------------------- SharePoint (FakeMicrosoft on loopback)
class SharePointHarness:
    """A SharePoint source over the library "Documents" of a fresh site "Contract" of a
    :class:`~support.fake_microsoft.FakeMicrosoft` tenant, whose "Members" site group holds
    "Everyone except external users"; delta with sharing changes (``sharing_delta``). ACL changes
    are signalled sharing changes; an unreadable ACL is a permissions read answered 403; the
    source is unreachable while every Graph request answers 503."""

    def __init__(self, base: Path) -> None:
        from support.fake_microsoft import EVERYONE_EXCEPT_EXTERNAL, FakeMicrosoft

        from ancre.connectors.base import SourceContext
        from ancre.connectors.sharepoint import build
        from ancre.connectors.sharepoint.config import SharePointSourceConfig

        ms = FakeMicrosoft()
        site = ms.add_site("Contract")
        self.members = ms.add_site_group(site, "Members", [EVERYONE_EXCEPT_EXTERNAL.format(tenant=ms.tenant_id)])
        ms.add_group("GG_RH", sam="GG_RH")
        self.drive = ms.add_drive(site, "Documents")
        self.ms = ms.start()
        cert = ms.certificate
        cfg = SharePointSourceConfig(
            id="contract", kind="sharepoint", tenant_id=ms.tenant_id, client_id=ms.client_id,
            certificate_path=cert.key_pem_path, certificate_thumbprint=cert.thumbprint, authority=ms.authority,
            graph_url=ms.graph_url, ca_file=ms.ca_path, sites=(ms.site_url("Contract"),), sharing_delta=True,
            max_retries=0,
        )

        def no_directory():
            raise AssertionError("the SharePoint connector resolves no directory name")

        self.data_dir = base
        self._build = lambda: build(cfg, SourceContext(directory=no_directory, ignore=DEFAULT_IGNORE,
                                                       private_paths=(), data_dir=base))
        self.connector: Connector = self._build()

    def reopen(self) -> Connector:
        """A new connector after its drive snapshots (``sharepoint.sqlite3``) are deleted."""
        self.connector.close()  # type: ignore[attr-defined]
        own = list(self.data_dir.glob("sharepoint.sqlite3*"))
        assert own, "the SharePoint connector keeps its drive snapshots in the data directory"
        for f in own:
            f.unlink()
        self.connector = self._build()
        return self.connector

    def path(self, name: str) -> str:
        return nfc(f"sites/Contract/Documents/{name}")

    def _folder(self, parts: list[str]):
        parent = None
        for i, part in enumerate(parts):
            try:
                parent = self.ms.item(self.drive, "/".join(parts[: i + 1]))
            except KeyError:
                parent = self.ms.add_folder(self.drive, part, parent=parent)
        return parent

    def write(self, name: str, data: bytes) -> None:
        try:
            self.ms.modify_file(self.drive, self.ms.item(self.drive, name), data)
        except KeyError:
            *folders, leaf = name.split("/")
            self.ms.add_file(self.drive, leaf, data, parent=self._folder(folders))

    def delete(self, name: str) -> None:
        self.ms.delete_item(self.drive, name)

    def change_acl(self, name: str) -> None:
        members = {"roles": ["read"], "grantedToV2": {"siteGroup": {"id": str(self.members.id), "displayName": "Members"}}}
        rh = {"roles": ["read"], "grantedToV2": {"group": {"id": self.ms.group("GG_RH").id}}}
        self.ms.set_permissions(self.drive, name, [members, rh])

    def break_acl(self, name: str) -> None:
        item = self.ms.item(self.drive, name)
        self.ms.fail(rf"/items/{item.id}/permissions$", 403, times=1000)
        self.ms.set_permissions(self.drive, item, [])  # a signalled sharing change: the permissions are read again

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        self.ms.fail(r".", 503, times=10**6)
        try:
            yield
        finally:
            self.ms.clear_faults()

    def close(self) -> None:
        self.connector.close()  # type: ignore[attr-defined]
        self.ms.stop()


@pytest.fixture
def sharepoint_source(tmp_path: Path) -> Iterator[SharePointHarness]:
    """The SharePoint connector's harness (a fake Microsoft tenant on 127.0.0.1)."""
    h = SharePointHarness(tmp_path)
    try:
        yield h
    finally:
        h.close()
