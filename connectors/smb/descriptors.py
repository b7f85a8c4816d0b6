"""Who may read a file of an SMB share (:class:`FileRights`): its security descriptor read over SMB2
(one compound CREATE(READ_CONTROL) + QUERY_INFO(OWNER|GROUP|DACL) + CLOSE, [MS-SMB2] 2.2.37),
parsed (:mod:`ancre.acl.sd_parse`), walked for FILE_GENERIC_READ with the file server's token
rules — and with the parent folder's descriptor when FILE_READ_ATTRIBUTES depends on it (MS-FSA)
— joined with the share's own permissions (:class:`~ancre.connectors.smb.rights.ServerRights`).
Unreadable or malformed: ``Acl.nobody(reason)``. The module doc of
:mod:`ancre.connectors.smb.connector` states the rules.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from smbprotocol.exceptions import SMBOSError

from ancre.acl.engine import FILE_READ_ATTRIBUTES, READ_ACCESS, ReadRights, SecurityDescriptor, compile_read
from ancre.acl.explain import AclTrace, ShareLayer
from ancre.acl.sd_parse import parse_security_descriptor
from ancre.acl.token import TokenRules
from ancre.connectors.smb import wire as smb_wire
from ancre.connectors.smb.names import ServerNames
from ancre.connectors.smb.rights import ServerRights, ShareLayerInfo
from ancre.connectors.smb.session import Blocked, Gone, SmbSession, is_access_denied, is_not_found
from ancre.errors import AclError, SourceUnavailableError
from ancre.models import Acl, nfc

Guard = Callable[[str, dict[str, Any], bool], None]
"""``(rel, smbclient arguments, listed) -> None``: raises :class:`Blocked` when ``rel`` is at or
under a DFS link that is not followed (:meth:`ancre.connectors.smb.listing.ShareListing.guard`)."""


@dataclass(kw_only=True)
class FileRights:
    """The rights side of one SMB source: descriptors read on the pooled ``session`` at the server
    spellings of ``names``, DFS links checked by ``guard``, the server's token rules and share
    permissions from ``rights``; ``source_id`` and ``unc_root`` (``\\\\SRV\\Partage``) for
    messages. A parent folder's descriptor is reused :attr:`PARENT_TTL_S` seconds. Thread-safe."""

    PARENT_TTL_S: ClassVar[float] = 5.0
    """A parent folder's descriptor (for FILE_READ_ATTRIBUTES) is reused this many seconds."""

    source_id: str
    unc_root: str
    session: SmbSession
    names: ServerNames
    rights: ServerRights
    guard: Guard
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _parents: dict[str, tuple[float, SecurityDescriptor | None]] = field(default_factory=dict, init=False, repr=False)

    def forget(self) -> None:
        """Forget the share permissions, the token rules and the parents' descriptors: read again
        at next use."""
        self.rights.forget()
        with self._lock:
            self._parents = {}

    def _read(self, rel: str, kw: dict[str, Any], *, listed: bool) -> bytes:
        self.guard(rel, kw, listed)
        return smb_wire.read_security_descriptor(self.names.unc_of(self.names.wire_of(rel, kw)), **kw)

    def security_descriptor(self, rel_path: str) -> SecurityDescriptor:
        """The parsed security descriptor of a file or folder (``""``: the share root), for
        ``ancre acl explain``. Raises :class:`AclError` when unreadable or malformed, or at or
        under a DFS link that is not followed, :class:`SourceUnavailableError` when the share
        can't be reached."""
        rel = nfc(rel_path.strip("/"))
        try:
            raw = self.session.call(f"read the security of {rel!r}", lambda kw: self._read(rel, kw, listed=False))
        except Blocked as e:
            raise AclError(f"{e} on {self.unc_root}") from None
        except SMBOSError as e:
            if is_not_found(e):
                raise AclError(f"{rel!r} does not exist on {self.unc_root}") from None
            if is_access_denied(e):
                raise AclError(f"access denied on READ_CONTROL for {rel!r} (the service account can't read its ACL)") from None
            raise AclError(f"{rel!r}: {e}") from None
        return parse_security_descriptor(raw)

    def descriptor_at(self, rel: str, *, listed: bool = False) -> tuple[SecurityDescriptor | None, str | None]:
        """The parsed descriptor of ``rel``, or ``(None, why)`` when it can't be read or parsed
        (``listed``: see :meth:`~ancre.connectors.smb.listing.ShareListing.guard`). Raises
        :class:`Gone` and :class:`SourceUnavailableError`."""
        try:
            raw = self.session.call(
                f"read the security of {rel!r}", lambda kw: self._read(rel, kw, listed=listed), fail_fast=True
            )
        except (SourceUnavailableError, Gone):
            raise
        except SMBOSError as e:
            if is_access_denied(e):
                return None, "access denied on READ_CONTROL"
            if is_not_found(e):
                raise Gone(str(e)) from None
            return None, str(e)
        except Exception as e:  # whatever went wrong, fail closed
            return None, f"{type(e).__name__}: {e}"
        try:
            return parse_security_descriptor(raw), None
        except AclError as e:
            return None, str(e)

    def parent_descriptor(self, rel: str) -> SecurityDescriptor | None:
        """The descriptor of ``rel``'s parent folder, ``None`` when it can't be read (then it
        grants nothing: the safe side)."""
        parent = rel.rpartition("/")[0]
        now = time.monotonic()
        with self._lock:
            hit = self._parents.get(parent)
        if hit is not None and now - hit[0] < self.PARENT_TTL_S:
            return hit[1]
        try:
            sd, _ = self.descriptor_at(parent)
        except Gone:
            sd = None
        with self._lock:
            if len(self._parents) > 4096:
                self._parents.clear()
            self._parents[parent] = (now, sd)
        return sd

    def read_rights(self, rel: str, *, listed: bool = False) -> ReadRights:
        """The compiled read rights of a relative path (``""``: the share root): its descriptor
        (and its parent's, when FILE_READ_ATTRIBUTES depends on it) walked with the token rules,
        joined with the share permissions. Raises :class:`Gone` (absent, or under a DFS link
        that is not followed) and :class:`SourceUnavailableError`."""
        sd, reason = self.descriptor_at(rel, listed=listed)
        if sd is None:
            return ReadRights.nobody(f"acl_unreadable: {reason}")
        rules = self.rights.token_rules()
        rights = compile_read(sd, rules=rules)
        if rel and rights.clauses and (
            compile_read(sd, rules=rules, desired=READ_ACCESS & ~FILE_READ_ATTRIBUTES).clauses != rights.clauses
        ):
            rights = compile_read(sd, rules=rules, parent=self.parent_descriptor(rel))
        return rights.both(self.rights.share_layer()[3])

    def acl_at(self, rel: str, *, listed: bool = False) -> Acl:
        """:meth:`read_rights` as an :class:`~ancre.models.Acl`; raises :class:`Gone`."""
        return self.read_rights(rel, listed=listed).acl()

    def acl_of_descriptor(
        self, sd: SecurityDescriptor | None, reason: str | None = None, parent: SecurityDescriptor | None = None
    ) -> Acl:
        """``sd`` walked with the server's token ∩ the share permissions (what a file's ACL is,
        given the parent's descriptor)."""
        rules = self.rights.token_rules()
        return compile_read(sd, rules=rules, parent=parent, unreadable_reason=reason).both(self.rights.share_layer()[3]).acl()

    def explain(self, path: str) -> AclTrace:
        """The rights trace of ``path`` for ``ancre acl explain``: its descriptor read now
        (``unreadable`` when absent, denied or malformed), its parent's, the token rules and the
        share permissions. Raises :class:`SourceUnavailableError`."""
        description, share_sd, share_problem, _ = self.rights.share_layer()
        share = ShareLayer(description, share_sd, share_problem)
        rules: TokenRules = self.rights.token_rules()
        try:
            sd = self.security_descriptor(path)
        except AclError as e:
            return AclTrace(self.source_id, path, unreadable=str(e), share=share, rules=rules)
        parent = self.parent_descriptor(path) if path else None
        return AclTrace(self.source_id, path, descriptor=sd, share=share, rules=rules, parent=parent)

    def share_layer(self) -> ShareLayerInfo:
        """See :meth:`ancre.connectors.smb.rights.ServerRights.share_layer`."""
        return self.rights.share_layer()


__all__ = ["FileRights", "Guard"]
