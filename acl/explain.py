"""``ancre acl explain --as USER PATH``: may this user read this path, and which ACE or rule decided.

Builds on :func:`ancre.acl.engine.explain_read` (the same evaluation as the indexed ACLs) and adds
the names an administrator recognises: the group of the deciding ACE, the entry it is written on,
and how the user comes to be in that group.
"""

from __future__ import annotations

import ntpath
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ancre.acl.directory import Directory, MembershipTracer
from ancre.acl.engine import Ace, SecurityDescriptor, describe_ace, explain_read
from ancre.acl.manifest import AclManifest, path_parts
from ancre.errors import AclError, AncreError

SdGetter = Callable[[str], "SecurityDescriptor | None"]
"""``rel_path → SecurityDescriptor`` (``None`` if unreadable; may raise ``AclError``)."""


class PathOutsideSourceError(AncreError):
    """A path given to ``acl explain`` is not inside the source: it climbs above the root with
    ``..``, or is an absolute, UNC or URL path that is not under the source's root / ``unc_root``."""


def _resolve_dots(parts: list[str], given: str) -> list[str]:
    """Lexical resolution of ``.`` and ``..`` (as Windows resolves a path on a share: ``..``
    never climbs above the share root). Raises :class:`PathOutsideSourceError` when it would."""
    out: list[str] = []
    for part in parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not out:
                raise PathOutsideSourceError(f"{given}: the path climbs above the source root ('..'): it is outside the source")
            out.pop()
        else:
            out.append(part)
    return out


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _under(prefix: str, path: str) -> str | None:
    """The rest of ``path`` after ``prefix`` (both NFC, ``/`` or ``\\`` separators, ASCII letters
    compared case-insensitively as server and share names are), ``None`` when ``path`` is not
    under it. The fold keeps lengths (no ``ß`` → ``ss``), so the rest is cut at the right place."""
    norm_prefix = unicodedata.normalize("NFC", prefix).replace("\\", "/").rstrip("/")
    norm_path = unicodedata.normalize("NFC", path).replace("\\", "/")
    folded_prefix, folded_path = norm_prefix.translate(_ASCII_LOWER), norm_path.translate(_ASCII_LOWER)
    if folded_path == folded_prefix:
        return ""
    if folded_path.startswith(folded_prefix + "/"):
        return norm_path[len(norm_prefix) + 1 :]
    return None


def canonical_path(path: str, *, unc_root: str | None = None, root: Path | None = None) -> str:
    """``path`` as the relative POSIX path (NFC, ``/``-separated, no ``.``/``..``/empty segment)
    that sync gives the same file: ``CLIENTS/../RH/x.docx`` → ``RH/x.docx``.

    ``path`` may be relative to the source root (``/`` or ``\\`` separators), a UNC path or URL
    under ``unc_root`` (``\\\\SRV\\Partage\\RH\\x.docx``), or — for a folder source whose
    tree is ``root`` — an absolute local path under it. ``..`` is resolved lexically and may not
    climb above the root. Raises :class:`PathOutsideSourceError` for a path outside the source:
    climbing above it, a UNC path or URL not under ``unc_root``, an absolute path (POSIX or
    ``C:\\…``) not under ``root``. ``""`` is the share root."""
    given = path
    if path.startswith(("\\\\", "//")) or "://" in path:
        rest = _under(unc_root, path) if unc_root else None
        if rest is None:
            raise PathOutsideSourceError(
                f"{given}: not under the unc_root of the source ({unc_root or 'none set'}); give a path relative to the "
                "source root or a path under one of the sources' unc_root"
            )
        return "/".join(_resolve_dots(rest.split("/"), given))
    if path.startswith(("/", "\\")) or ntpath.splitdrive(path)[0]:
        rest = None
        if root is not None and path.startswith("/"):
            for base in dict.fromkeys((str(root), str(root.resolve()))):
                rest = _under(base, str(PurePosixPath(path)))
                if rest is not None:
                    break
        if rest is None:
            where = f"the source root {root}" if root is not None else "the source"
            raise PathOutsideSourceError(
                f"{given}: an absolute path outside {where}; give a path relative to the source root (CLIENTS/x.docx)"
            )
        return "/".join(_resolve_dots(rest.split("/"), given))
    return "/".join(_resolve_dots(list(path_parts(path)), given))


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
    such (not readable). An unknown user reads nothing. ``rel_path`` is canonicalised first
    (:func:`canonical_path`: ``CLIENTS/../RH/x`` is answered as ``RH/x``). Raises
    :class:`PathOutsideSourceError` for a path outside the source (``../x``, absolute),
    :class:`~ancre.errors.DirectoryError` when the directory can't be read.
    """
    path = canonical_path(rel_path)
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
