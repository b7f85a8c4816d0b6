"""Share-level permissions ∩ NTFS permissions, as one :class:`~ancre.models.Acl`.

A user opening a file over SMB passes two checks: the share's own permissions (the "Share
Permissions" tab, stored by the server apart from the file system) and the file's NTFS DACL; the
effective right is the more restrictive of the two ("Share and NTFS permissions", Windows Server
docs). ancre stores one ``Acl`` per document, so the intersection is folded into it here — for any
source that has share-level permissions (SMB ``share_allow`` / ``share_deny`` today).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ancre.acl.directory import CachedDirectory, Directory
from ancre.acl.engine import SHARE_ADMITS_NONE_RULE
from ancre.models import AUTHENTICATED_USERS, EVERYONE, Acl

Nesting = Callable[[str, str], bool]
"""``nested(member, group)``: whether the ``sid:`` principal ``member`` is transitively a member of
the group ``group``. May raise :class:`~ancre.errors.DirectoryError`."""


@runtime_checkable
class NestingDirectory(Protocol):
    """Optional capability of a directory: group nesting between two SIDs (LDAP
    :meth:`~ancre.acl.ldap_directory.LdapDirectory.is_nested`)."""

    def is_nested(self, member_sid: str, group_sid: str) -> bool:
        """Whether every holder of ``member_sid`` holds ``group_sid`` through membership (SIDs bare
        or ``sid:``-prefixed). Raises :class:`~ancre.errors.DirectoryError`."""
        ...


def nesting_of(directory: Directory | None) -> Nesting | None:
    """The nesting check :func:`intersect_share` can use from ``directory`` (looking through a
    :class:`~ancre.acl.directory.CachedDirectory`), ``None`` when it offers none (a JSON file
    directory: only the exact rules then apply)."""
    inner = directory.inner if isinstance(directory, CachedDirectory) else directory
    return inner.is_nested if isinstance(inner, NestingDirectory) else None


def intersect_share(
    ntfs: Acl,
    share_allow: frozenset[str] | None,
    share_deny: frozenset[str],
    nested: Nesting | None = None,
) -> Acl:
    """Share permissions ∩ NTFS permissions as one ``Acl``: a user needs both.

    Exact semantics: ``(ntfs.allow ∩ P ≠ ∅) ∧ (share_allow ∩ P ≠ ∅) ∧ P ∩ (ntfs.deny ∪ share_deny) = ∅``.
    The deny part is exact (union). ``share_allow`` ``None`` means no share-level allow restriction
    (Windows' default share permission, Everyone); so does a ``share_allow`` holding Everyone or
    Authenticated Users (every resolved P(user) holds both).

    Otherwise the allow set is the union, over pairs (NTFS principal ``a``, share principal ``s``),
    of a principal whose holders provably hold both:

    - ``a`` is Everyone/Authenticated Users → ``s``;  ``a == s`` → ``a``;
    - ``nested(a, s)`` (``a`` is transitively a member of ``s``) → ``a``;
      ``nested(s, a)`` → ``s``.

    Any other pair contributes nothing: a user who holds ``a`` and ``s`` by unrelated routes is
    refused (fail closed). ``nested(member, group)`` takes ``sid:`` principals; ``None`` = only the
    exact rules. An NTFS result that is already *nobody* stays as it is. Raises only what
    ``nested`` raises.
    """
    if not ntfs.allow:
        return Acl(ntfs.allow, ntfs.deny | share_deny, ntfs.reason)
    deny = ntfs.deny | share_deny
    if share_allow is None or share_allow & {EVERYONE, AUTHENTICATED_USERS}:
        return Acl(ntfs.allow, deny, ntfs.reason)
    allow: set[str] = set()
    for a in ntfs.allow:
        if a in (EVERYONE, AUTHENTICATED_USERS):
            allow |= share_allow
            continue
        for s in share_allow:
            if a == s or (nested is not None and nested(a, s)):
                allow.add(a)
            elif nested is not None and nested(s, a):
                allow.add(s)
    if not allow:
        return Acl.nobody(SHARE_ADMITS_NONE_RULE)
    return Acl(frozenset(allow), deny, ntfs.reason)


__all__ = ["Nesting", "NestingDirectory", "intersect_share", "nesting_of"]
