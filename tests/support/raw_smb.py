"""Raw SMB2 access for the differential ACL test: security descriptors written as they are, and
real opens by a given user.

- :func:`encode_sd` serialises a self-relative SECURITY_DESCRIPTOR ([MS-DTYP] 2.4.6) with impacket's
  encoder (``impacket.ldap.ldaptypes``), ACEs in the order given — not ancre's parser, not
  ``smbcacls`` (which sorts what it writes into canonical order).
- :class:`RawTree` is one user's smbprotocol session and tree connect on a share: ``create`` files
  and folders, ``set_security`` (SMB2 SET_INFO, InfoType SMB2_0_INFO_SECURITY, [MS-SMB2] 2.2.39),
  and ``can_open`` (SMB2 CREATE with a desired access, FILE_OPEN: the server's own access check).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from types import TracebackType
from typing import Self

from impacket.ldap import ldaptypes
from smbprotocol.connection import Connection
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.file_info import InfoType
from smbprotocol.header import NtStatus
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FileAttributes,
    ImpersonationLevel,
    Open,
    ShareAccess,
    SMB2SetInfoRequest,
    SMB2SetInfoResponse,
)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

SE_DACL_PRESENT = 0x0004
SE_DACL_AUTO_INHERITED = 0x0400
SE_DACL_PROTECTED = 0x1000
SE_SELF_RELATIVE = 0x8000

OWNER_SECURITY_INFORMATION = 0x1
GROUP_SECURITY_INFORMATION = 0x2
DACL_SECURITY_INFORMATION = 0x4

READ_CONTROL = 0x00020000
WRITE_DAC = 0x00040000
WRITE_OWNER = 0x00080000
MAXIMUM_ALLOWED = 0x02000000

_SHARE_ALL = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE

RawAce = tuple[int, str, int, int]
"""``(type, sid, mask, flags)``: type 0 ALLOW / 1 DENY (ACE_HEADER.AceType), a SID string, the
access mask, ACE_HEADER.AceFlags."""


def _sid(text: str) -> ldaptypes.LDAP_SID:
    sid = ldaptypes.LDAP_SID()
    sid.fromCanonical(text)
    return sid


def encode_sd(owner: str | None, group: str | None, aces: Sequence[RawAce] | None, control: int = 0) -> bytes:
    """A self-relative SECURITY_DESCRIPTOR: ``owner``/``group`` SIDs (``None``: absent), the DACL's
    ``aces`` in this order (``None``: a NULL DACL, SE_DACL_PRESENT with no ACL), ``control``
    bits added to SE_SELF_RELATIVE | SE_DACL_PRESENT (SE_DACL_PROTECTED, SE_DACL_AUTO_INHERITED)."""
    sd = ldaptypes.SR_SECURITY_DESCRIPTOR()
    sd["Revision"] = b"\x01"
    sd["Sbz1"] = b"\x00"
    sd["Control"] = SE_SELF_RELATIVE | SE_DACL_PRESENT | control
    sd["OwnerSid"] = _sid(owner) if owner else b""
    sd["GroupSid"] = _sid(group) if group else b""
    sd["Sacl"] = b""
    if aces is None:
        sd["Dacl"] = b""
        return bytes(sd.getData())
    acl = ldaptypes.ACL()
    acl["AclRevision"] = 2
    acl["Sbz1"] = 0
    acl["Sbz2"] = 0
    acl.aces = []
    for ace_type, sid, mask, flags in aces:
        ace = ldaptypes.ACE()
        ace["AceType"] = ace_type
        ace["AceFlags"] = flags
        body = ldaptypes.ACCESS_ALLOWED_ACE() if ace_type == 0 else ldaptypes.ACCESS_DENIED_ACE()
        body["Mask"] = ldaptypes.ACCESS_MASK()
        body["Mask"]["Mask"] = mask
        body["Sid"] = _sid(sid)
        ace["Ace"] = body
        acl.aces.append(ace)
    sd["Dacl"] = acl
    return bytes(sd.getData())


class RawTree:
    """One user's SMB2 session (NTLM, signed) and tree connect on ``\\\\host\\share``.

    ``username`` is ``DOMAIN\\user``. A context manager; :meth:`close` logs off and disconnects.
    Raises smbprotocol's exceptions (``SMBResponseException``: e.g. ACCESS_DENIED at tree connect,
    when the share permissions grant this user nothing)."""

    def __init__(self, host: str, share: str, username: str, password: str, port: int = 445) -> None:
        self.connection = Connection(uuid.uuid4(), host, port)
        self.connection.connect(timeout=10)
        try:
            self.session = Session(self.connection, username, password, require_encryption=False)
            self.session.connect()
            self.tree = TreeConnect(self.session, f"\\\\{host}\\{share}")
            self.tree.connect()
        except BaseException:
            self.connection.disconnect(close=True)
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Disconnect (the session and tree go with the connection)."""
        with contextlib.suppress(Exception):  # a dead connection may fail in any way
            self.connection.disconnect(close=True)

    def _open(self, path: str, access: int, *, directory: bool, disposition: int) -> Open:
        handle = Open(self.tree, path.replace("/", "\\"))
        handle.create(
            ImpersonationLevel.Impersonation, access,
            FileAttributes.FILE_ATTRIBUTE_DIRECTORY if directory else FileAttributes.FILE_ATTRIBUTE_NORMAL,
            _SHARE_ALL, disposition,
            CreateOptions.FILE_DIRECTORY_FILE if directory else CreateOptions.FILE_NON_DIRECTORY_FILE,
        )  # fmt: skip
        return handle

    def create(self, path: str, *, directory: bool = False, data: bytes = b"") -> None:
        """Create a file (with ``data``) or a folder at ``path`` (relative, ``/`` separators); the
        server gives it the ACEs it inherits."""
        handle = self._open(path, MAXIMUM_ALLOWED, directory=directory, disposition=CreateDisposition.FILE_CREATE)
        try:
            if data:
                handle.write(data, 0)
        finally:
            handle.close()

    def set_security(self, path: str, descriptor: bytes, *, directory: bool = False,
                     info: int = OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION) -> None:
        """SMB2 SET_INFO of the security descriptor ``descriptor`` (``info``: which parts)."""
        handle = self._open(path, READ_CONTROL | WRITE_DAC | WRITE_OWNER, directory=directory,
                            disposition=CreateDisposition.FILE_OPEN)
        try:
            request = SMB2SetInfoRequest()
            request["info_type"] = InfoType.SMB2_0_INFO_SECURITY
            request["file_info_class"] = 0
            request["additional_information"] = info
            request["file_id"] = handle.file_id
            request["buffer"] = descriptor
            sent = self.connection.send(request, sid=self.session.session_id, tid=self.tree.tree_connect_id)
            SMB2SetInfoResponse().unpack(self.connection.receive(sent)["data"].get_value())
        finally:
            handle.close()

    def can_open(self, path: str, access: int) -> bool:
        """Whether the server lets this user open the file ``path`` with ``access`` (SMB2 CREATE,
        FILE_OPEN): ``True`` on success, ``False`` on STATUS_ACCESS_DENIED; any other failure raises."""
        try:
            handle = self._open(path, access, directory=False, disposition=CreateDisposition.FILE_OPEN)
        except SMBResponseException as e:
            if e.status == NtStatus.STATUS_ACCESS_DENIED:
                return False
            raise
        handle.close()
        return True


__all__ = ["RawAce", "RawTree", "encode_sd"]
