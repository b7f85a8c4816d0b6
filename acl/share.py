"""Share-level permissions ∩ NTFS permissions.

A user opening a file over SMB passes two checks with the same token and the same desired access:
the share's own security descriptor (the "Share Permissions" tab, kept by the server apart from
the file system: Windows checks the open's desired access against it, Samba against the rights it
grants at tree connect — the same walk) and the file's DACL; the effective right is the
intersection ("Share and NTFS permissions", Windows Server docs). Both are compiled by
:func:`ancre.acl.engine.compile_read` with the server's :class:`~ancre.acl.token.TokenRules` and
joined with :meth:`~ancre.acl.engine.ReadRights.both`; for one user, :func:`explain_share`.

The share's descriptor is read from the server (SRVSVC NetShareGetInfo, level 502); an SMB source's
``share_allow`` / ``share_deny`` state it instead (:func:`configured_share_descriptor`).
"""

from __future__ import annotations

from ancre.acl.engine import (
    FILE_ALL_ACCESS,
    Ace,
    AceType,
    Decision,
    ReadRights,
    SecurityDescriptor,
    compile_read,
    explain_read,
)
from ancre.acl.token import EVERYONE_SID, TokenRules


def configured_share_descriptor(allow: frozenset[str] | None, deny: frozenset[str]) -> SecurityDescriptor:
    """The share descriptor ``share_allow`` / ``share_deny`` state (``sid:`` principals or bare
    SIDs): a DENY of full control for each of ``deny``, then an ALLOW of full control for each of
    ``allow`` (``None``: Everyone, Windows' and Samba's default share permission)."""

    def bare(p: str) -> str:
        return p.removeprefix("sid:")

    aces = [Ace(AceType.ACCESS_DENIED, bare(p), FILE_ALL_ACCESS) for p in sorted(deny)]
    aces += [Ace(AceType.ACCESS_ALLOWED, bare(p), FILE_ALL_ACCESS) for p in sorted(allow or {EVERYONE_SID})]
    return SecurityDescriptor(dacl=tuple(aces))


def share_rights(sd: SecurityDescriptor | None, rules: TokenRules, *, unreadable_reason: str | None = None) -> ReadRights:
    """Who passes the share-level check for read: the walk of ``sd`` for FILE_GENERIC_READ (no
    attribute right from a parent: a share has none). ``sd is None``: nobody, with the reason."""
    return compile_read(sd, rules=rules, attributes_from_parent=False, unreadable_reason=unreadable_reason)


def explain_share(sd: SecurityDescriptor | None, principals: frozenset[str], rules: TokenRules,
                  *, unreadable_reason: str | None = None) -> Decision:
    """The share-level decision for one user (see :func:`ancre.acl.engine.explain_read`)."""
    return explain_read(sd, principals, rules=rules, attributes_from_parent=False, unreadable_reason=unreadable_reason)


__all__ = ["configured_share_descriptor", "explain_share", "share_rights"]
