"""``ancre acl explain --as USER PATH``: may this user read this path, and which ACE or rule decided.

Builds on :func:`ancre.acl.engine.explain_read` (the same evaluation as the indexed ACLs) and adds
the names an administrator recognises: the group of the deciding ACE, the entry it is written on,
and how the user comes to be in that group.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ancre.acl.directory import Directory, MembershipTracer
from ancre.acl.engine import Ace, SecurityDescriptor, describe_ace, explain_read
from ancre.acl.manifest import AclManifest, path_parts
from ancre.errors import AclError

SdGetter = Callable[[str], "SecurityDescriptor | None"]
"""``rel_path → SecurityDescriptor`` (``None`` if unreadable; may raise ``AclError``)."""


@dataclass(frozen=True)
class NamedPrincipal:
    """A principal string (``sid:S-…``) and its directory name (``None`` if the directory has none)."""

    principal: str
    name: str | None


@dataclass(frozen=True)
class Explanation:
    """The answer of :func:`explain`.

    ``summary`` is the one-line verdict (``"denied by explicit DENY ACE on CLIENTS/x.docx for
    AXONIX\\GG_Stagiaires (S-…-1103); chloe is a member via GG_Stagiaires"``); ``rule`` the engine's
    rule (``"explicit deny ACE for S-…"``); ``deciding_ace`` and ``deciding_name`` the ACE that
    decided and its principal's name; ``origin`` the manifest entry stating that ACE (``None`` when
    unknown); ``via`` the group route from the user to the ACE's principal (``()`` = the user's own
    SID, ``None`` = unknown); ``principals`` the user's P(user) with names, sorted.
    """

    user: str
    path: str
    readable: bool
    rule: str
    summary: str
    deciding_ace: Ace | None = None
    deciding_name: str | None = None
    origin: str | None = None
    via: tuple[str, ...] | None = None
    principals: tuple[NamedPrincipal, ...] = ()

    def render(self) -> str:
        """Plain text for the terminal, several lines, no trailing newline."""
        lines = [
            f"user: {self.user}",
            f"path: {self.path or '(share root)'}",
            f"result: {'READABLE' if self.readable else 'NOT READABLE'}",
            self.summary,
            f"rule: {self.rule}",
        ]
        if self.deciding_ace is not None:
            lines.append(f"ace: {describe_ace(self.deciding_ace)}")
        lines.append(f"principals of {self.user} ({len(self.principals)}):")
        width = max((len(p.principal) for p in self.principals), default=0)
        for p in self.principals:
            lines.append(f"  {p.principal.ljust(width)}  {p.name or '(no name)'}")
        return "\n".join(lines)


def explain(
    directory: Directory,
    manifest_or_sd_getter: AclManifest | SdGetter,
    user: str,
    rel_path: str,
    *,
    is_dir: bool = False,
) -> Explanation:
    """Explain whether ``user`` may read ``rel_path``.

    ``manifest_or_sd_getter``: an :class:`AclManifest`, or a function giving the path's security
    descriptor (for SMB sources). A broken manifest entry or unreadable descriptor is explained as
    such (not readable). An unknown user reads nothing. Raises
    :class:`~ancre.errors.DirectoryError` when the directory can't be read.
    """
    path = "/".join(path_parts(rel_path))
    principals = directory.principals(user)
    named = tuple(NamedPrincipal(p, directory.name_of(p)) for p in sorted(principals))
    if not principals:
        rule = f"unknown identity: the directory does not know {user!r}; it reads nothing"
        return Explanation(user, path, False, rule, f"not readable: {rule}")

    manifest = manifest_or_sd_getter if isinstance(manifest_or_sd_getter, AclManifest) else None
    sd: SecurityDescriptor | None
    reason: str | None = None
    try:
        if manifest is not None:
            sd = manifest.security_descriptor(path, is_dir)
        else:
            sd = manifest_or_sd_getter(path)  # type: ignore[operator]
    except AclError as e:
        sd, reason = None, str(e)
    decision = explain_read(sd, principals, is_container=is_dir, unreadable_reason=reason)

    ace = decision.deciding_ace
    if ace is None:
        verdict = "readable" if decision.readable else "not readable"
        rule = decision.rule
        if rule == "no ACE grants read":
            rule = f"no ACE grants read to any of {user}'s principals"
            blocked = _protected_at(manifest, path) if manifest is not None else None
            if blocked:
                rule += f" (inheritance is disabled at {blocked}: protected)"
        return Explanation(user, path, decision.readable, decision.rule, f"{verdict}: {rule}", principals=named)

    name = directory.name_of(ace.sid)
    origin = manifest.origin_of(path, ace) if manifest is not None else None
    via = directory.membership_path(user, ace.sid) if isinstance(directory, MembershipTracer) else None
    word = "DENY" if ace.is_deny else "ALLOW"
    if ace.inherited:
        where = f"{word} ACE inherited from {origin if origin is not None else 'a parent folder'}"
        if origin == "":
            where = f"{word} ACE inherited from the share root"
    else:
        where = f"explicit {word} ACE on {origin or path or 'the share root'}"
    who = f"{name} ({ace.sid})" if name else ace.sid
    summary = f"{'allowed' if decision.readable else 'denied'} by {where} for {who}"
    if via == ():
        summary += f"; this is {user}'s own account"
    elif via:
        summary += f"; {user} is a member via {' → '.join(via)}"
    return Explanation(
        user, path, decision.readable, decision.rule, summary,
        deciding_ace=ace, deciding_name=name, origin=origin, via=via, principals=named,
    )


def _protected_at(manifest: AclManifest, path: str) -> str | None:
    """The deepest protected manifest entry on ``path`` below the share root, or ``None``."""
    parts = path_parts(path)
    for depth in range(len(parts), 0, -1):
        entry = manifest.entry("/".join(parts[:depth]))
        if entry is not None and entry.protected:
            return entry.key
    return None
