"""``ancre acl explain --as USER PATH``: may this user read this path, and which ACE or rule decided.

A connector that can explain (``AclExplainable`` in :mod:`ancre.connectors.base`) traces the rights
on a path as an :class:`AclTrace` (the security descriptor from the server or an ACL manifest, its
parent's, the server's token rules, or the principals a source grants, plus share-level
permissions); :func:`explain_trace` evaluates it with :func:`ancre.acl.engine.explain_read` (the
same walk as the indexed ACLs, for the file and for the share) and headlines the *effective*
result (file ∩ share), naming what an administrator recognises: the group of the deciding ACE, the
entry it is written on, how the user comes to be in that group, the token SID that decided when the
server adds it (NETWORK, OWNER RIGHTS, a local group of the file server), the bits of
FILE_GENERIC_READ when they were decided apart, and the principal provider that gave the user the
principal that decided (:mod:`ancre.acl.providers`).
"""

from __future__ import annotations

import ntpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from ancre.acl.directory import Directory, MembershipTracer
from ancre.acl.engine import Ace, BitVerdict, Decision, SecurityDescriptor, describe_ace, explain_read
from ancre.acl.manifest import AclManifest, path_parts
from ancre.acl.providers import PrincipalResolver, directory_resolver
from ancre.acl.share import explain_share
from ancre.acl.token import DIRECTORY_RULES, TokenRules, well_known_name
from ancre.errors import AclError, AncreError
from ancre.models import Acl, nfc

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
    norm_prefix = nfc(prefix).replace("\\", "/").rstrip("/")
    norm_path = nfc(path).replace("\\", "/")
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
class ShareLayer:
    """Share-level permissions a source checks on top of a path's descriptor (SMB): ``description``
    says where they come from (``"share permissions of \\\\srv\\Partage (NetShareGetInfo)"``,
    ``"share permissions configured (share_allow=['GG_RH'] share_deny=[])"``), ``descriptor`` the
    share's security descriptor (read from the server, or stated by the configuration), ``problem``
    why it could not be read (nobody passes then)."""

    description: str
    descriptor: SecurityDescriptor | None = None
    problem: str | None = None


@dataclass(frozen=True)
class AclTrace:
    """The rights on one path as its connector states them (``AclExplainable.explain_acl``), the
    input of :func:`explain_trace`.

    ``source``: the source id; ``path``: the canonical relative path (``""`` = share root). The
    rights come in one of two forms:

    - ``descriptor``: the path's security descriptor, read from the server (SMB) or computed from
      an ACL manifest; ``None`` when it could not be read, ``unreadable`` then says why (nobody
      reads: fail closed);
    - ``grants``: an ACL already reduced to principals (a folder source's configured
      ``principals``); its ``reason`` says why it is *nobody* when it is.

    ``origins``: ACE of ``descriptor`` → key of the manifest entry that states it explicitly
    (``""`` = the share root), for the ACEs whose origin is known; ``protected_at``: the deepest
    manifest entry on the path with inheritance disabled (``None``: none, or not a manifest);
    ``share``: share-level permissions on top (``None``: the source has none); ``indexable``:
    whether the path is an indexable file of the source (``None``: not checked); ``grant_via``: for
    the ``grants`` form, principal → what granted it at the source (``"permission 7 (read)"``,
    ``"link users (view)"``, ``"role Members: Read"`` for SharePoint); ``rules``: how the server's
    token holds each SID (default: the directory's principals are the token); ``parent``: the
    parent folder's descriptor (its FILE_LIST_DIRECTORY grants FILE_READ_ATTRIBUTES), ``None``
    when not read.
    """

    source: str
    path: str
    descriptor: SecurityDescriptor | None = None
    unreadable: str | None = None
    grants: Acl | None = None
    origins: Mapping[Ace, str] = field(default_factory=dict)
    protected_at: str | None = None
    share: ShareLayer | None = None
    indexable: bool | None = None
    grant_via: Mapping[str, str] = field(default_factory=dict)
    rules: TokenRules = DIRECTORY_RULES
    parent: SecurityDescriptor | None = None


def trace_manifest(
    manifest: AclManifest, path: str, *, source: str = "", is_dir: bool = False, indexable: bool | None = None
) -> AclTrace:
    """The :class:`AclTrace` of ``path`` (canonical, relative) under an ACL manifest: its computed
    descriptor with the entry stating each ACE, or ``unreadable`` when the path or an ancestor has
    a broken entry. Raises :class:`~ancre.errors.DirectoryError` when the directory can't be read."""
    try:
        sd = manifest.security_descriptor(path, is_dir)
    except AclError as e:
        return AclTrace(source, path, unreadable=str(e), indexable=indexable)
    origins: dict[Ace, str] = {}
    for ace in sd.dacl or ():
        origin = manifest.origin_of(path, ace)
        if origin is not None:
            origins[ace] = origin
    return AclTrace(
        source, path, descriptor=sd, origins=origins, protected_at=_protected_at(manifest, path), indexable=indexable
    )


def trace_descriptor(sd_getter: SdGetter, path: str, *, source: str = "") -> AclTrace:
    """The :class:`AclTrace` of ``path`` from a function reading its security descriptor; an
    ``AclError`` from it (or ``None``) makes the trace ``unreadable``. Raises what ``sd_getter``
    raises otherwise (``SourceUnavailableError``)."""
    try:
        sd = sd_getter(path)
    except AclError as e:
        return AclTrace(source, path, unreadable=str(e))
    return AclTrace(source, path, descriptor=sd, unreadable=None if sd is not None else "not available")


@dataclass(frozen=True)
class NamedPrincipal:
    """A principal string (``sid:S-…``), its directory name (``None`` if the directory has none)
    and the name of the principal provider it comes from (``None``: unknown)."""

    principal: str
    name: str | None
    provider: str | None = None


@dataclass(frozen=True)
class Explanation:
    """The answer of :func:`explain` / :func:`explain_trace`.

    ``summary`` is the one-line verdict (``"denied by explicit DENY ACE on CLIENTS/x.docx for
    AXONIX\\GG_Stagiaires (S-…-1103); chloe is a member via GG_Stagiaires"``); ``rule`` the engine's
    rule (``"explicit deny ACE for S-…"``); ``deciding_ace`` and ``deciding_name`` the ACE that
    decided and its principal's name; ``origin`` the manifest entry stating that ACE (``None`` when
    unknown); ``via`` the group route from the user to the ACE's principal (``()`` = the user's own
    SID, ``None`` = unknown); ``principals`` the user's P(user) with names, sorted.
    ``decided_by``: the user's principal that decided (``"sid:S-…-1103"``; ``None`` when no
    principal of the user did, e.g. nothing grants read); ``provider``: the principal provider that
    gave it (``"directory"``); ``source``: the source id (``""``: not given). ``readable`` is the
    *effective* result: the file's permissions and, when the source has them, the share's; the
    summary, rule and ACE are those of the layer that decided (the file's, unless only the share
    refuses). ``files``: the line on the file permissions' own verdict (``None`` without a share
    layer); ``share``: the line on the share permissions (``None``: none); ``token``: how the
    user's token holds the deciding ACE's SID when the server adds it (``"NETWORK (S-1-5-2): in
    every network logon"``, a local group of the file server, OWNER RIGHTS), ``None`` for a plain
    principal; ``bits``: one line per bit of FILE_GENERIC_READ when they were not all decided by
    the same ACE; ``notes``: SIDs ancre could not decide (their deny closed the document).
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
    decided_by: str | None = None
    provider: str | None = None
    source: str = ""
    share: str | None = None
    files: str | None = None
    token: str | None = None
    bits: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def render(self) -> str:
        """Plain text for the terminal, several lines, no trailing newline."""
        return "\n".join(self.render_lines())

    def render_lines(self) -> list[str]:
        """:meth:`render`'s lines, one string each (a name holding a newline stays in its line)."""
        where = f" (source {self.source})" if self.source else ""
        lines = [
            f"user: {self.user}",
            f"path: {self.path or '(share root)'}{where}",
            f"result: {'READABLE' if self.readable else 'NOT READABLE'}",
            self.summary,
        ]
        if self.decided_by is not None:
            named = next((p.name for p in self.principals if p.principal == self.decided_by), None)
            who = f"{self.decided_by} ({named})" if named else self.decided_by
            origin = f", from provider {self.provider!r}" if self.provider else ""
            lines.append(f"decided by: principal {who}{origin}")
        if self.token is not None:
            lines.append(f"token: {self.token}")
        lines.append(f"rule: {self.rule}")
        if self.deciding_ace is not None:
            lines.append(f"ace: {describe_ace(self.deciding_ace)}")
        if self.files is not None:
            lines.append(self.files)
        if self.share is not None:
            lines.append(self.share)
        if self.bits:
            lines.append("FILE_GENERIC_READ, bit by bit:")
            lines.extend(f"  {b}" for b in self.bits)
        lines.extend(f"note: {n}" for n in self.notes)
        lines.append(f"principals of {self.user} ({len(self.principals)}):")
        width = max((len(p.principal) for p in self.principals), default=0)
        several = len({p.provider for p in self.principals}) > 1
        for p in self.principals:
            line = f"  {p.principal.ljust(width)}  {p.name or '(no name)'}"
            lines.append(f"{line}  [{p.provider}]" if several and p.provider else line)
        return lines


def explain(
    directory: Directory,
    manifest_or_sd_getter: AclManifest | SdGetter,
    user: str,
    rel_path: str,
    *,
    is_dir: bool = False,
    resolver: PrincipalResolver | None = None,
) -> Explanation:
    """Explain whether ``user`` may read ``rel_path``.

    ``manifest_or_sd_getter``: an :class:`AclManifest`, or a function giving the path's security
    descriptor (for SMB sources). A broken manifest entry or unreadable descriptor is explained as
    such (not readable). An unknown user reads nothing. ``rel_path`` is canonicalised first
    (:func:`canonical_path`: ``CLIENTS/../RH/x`` is answered as ``RH/x``). ``resolver``: where the
    user's principals come from (default: ``directory`` alone). Raises
    :class:`PathOutsideSourceError` for a path outside the source (``../x``, absolute),
    :class:`~ancre.errors.DirectoryError` when the directory (or a provider) can't be read.
    """
    path = canonical_path(rel_path)
    if isinstance(manifest_or_sd_getter, AclManifest):
        trace = trace_manifest(manifest_or_sd_getter, path, is_dir=is_dir)
    else:
        trace = trace_descriptor(manifest_or_sd_getter, path)
    return explain_trace(trace, user, directory=directory, resolver=resolver)


def explain_trace(
    trace: AclTrace, user: str, *, directory: Directory, resolver: PrincipalResolver | None = None
) -> Explanation:
    """Explain whether ``user`` may read ``trace.path``, from the rights its connector traced.

    ``resolver`` gives the user's principals and the provider of each (default: ``directory``
    alone, :func:`~ancre.acl.providers.directory_resolver`); ``directory`` names ``sid:``
    principals and, when it can (:class:`MembershipTracer`), the group route to the deciding one.
    The verdicts are the engine's (:func:`~ancre.acl.engine.explain_read`, the walk sync indexes,
    with the trace's token rules), for the file and, when the trace has them, for the share; the
    headline is the effective result (see :class:`Explanation`). An unknown user (no principal)
    reads nothing. Raises
    :class:`~ancre.errors.DirectoryError` when the directory or a provider can't be read.
    """
    resolver = resolver if resolver is not None else directory_resolver(directory)
    origins = resolver.origins(user)
    principals = frozenset(origins)
    if not principals:
        unknown = "the directory does not know" if len(resolver.providers) == 1 else "no principal provider knows"
        rule = f"unknown identity: {unknown} {user!r}; it reads nothing"
        return Explanation(user, trace.path, False, rule, f"not readable: {rule}", source=trace.source)
    via = (lambda sid: directory.membership_path(user, sid)) if isinstance(directory, MembershipTracer) else None
    return _explain(trace, user, principals, origins, directory, via)


def explain_principals(trace: AclTrace, subject: str, principals: frozenset[str], *, directory: Directory) -> Explanation:
    """:func:`explain_trace` for a set of principals rather than a user: whether a token holding
    ``principals`` reads ``trace.path`` and the ACE, permission or rule that decided, named as
    ``acl explain`` names it. ``subject`` is how the lines call that token (``"Everyone"``,
    ``"AXONIX\\GG_Personnel"``). Used by the exposure report to say what opened a document to a
    broad principal. Raises :class:`~ancre.errors.DirectoryError` when the directory can't be read."""
    if not principals:
        rule = f"{subject} holds no principal; it reads nothing"
        return Explanation(subject, trace.path, False, rule, f"not readable: {rule}", source=trace.source)
    return _explain(trace, subject, principals, {}, directory, None)


def _explain(
    trace: AclTrace,
    user: str,
    principals: frozenset[str],
    origins: Mapping[str, str],
    directory: Directory,
    via_of: Callable[[str], tuple[str, ...] | None] | None,
) -> Explanation:
    """The verdict on ``trace`` for ``user`` holding ``principals`` (``origins``: principal →
    provider; ``via_of``: the group route to a SID, ``None``: unknown)."""

    def name_of(p: str) -> str | None:
        return directory.name_of(p) if p.startswith("sid:") else None

    named = tuple(NamedPrincipal(p, name_of(p), origins.get(p)) for p in sorted(principals))
    if trace.grants is not None:
        return replace(_explain_grants(trace.grants, user, trace.path, principals, name_of, origins, trace.grant_via),
                       principals=named, source=trace.source)

    decision = explain_read(trace.descriptor, principals, unreadable_reason=trace.unreadable,
                            rules=trace.rules, parent=trace.parent)
    share = None if trace.share is None else explain_share(
        trace.share.descriptor, principals, trace.rules,
        unreadable_reason=f"share permissions: {trace.share.problem}" if trace.share.problem else None,
    )
    ntfs = _layer(decision, trace, user, directory, origins, trace.origins, trace.protected_at, "file", via_of)
    if share is None:
        return replace(ntfs, principals=named, source=trace.source)
    share_ex = _layer(share, trace, user, directory, origins, {}, None, "share", via_of)
    ntfs_line = f"file permissions (NTFS): {_word(decision.readable)} — {ntfs.summary}"
    share_line = f"{trace.share.description}: {_word(share.readable)} — {share_ex.summary}"  # type: ignore[union-attr]  # a share decision implies trace.share
    effective = decision.readable and share.readable
    head = share_ex if decision.readable and not share.readable else ntfs
    return replace(
        head, readable=effective, principals=named, source=trace.source, files=ntfs_line,
        share=f"{share_line} — effective result (file ∩ share): {_word(effective)}",
        notes=tuple(dict.fromkeys(ntfs.notes + share_ex.notes)),
    )


def _word(readable: bool) -> str:
    return "READABLE" if readable else "NOT READABLE"


def _bit_line(v: BitVerdict, directory: Directory) -> str:
    mark = "granted" if v.granted else "refused"
    if v.source == "owner":
        how = "the owner's implicit READ_CONTROL"
    elif v.source == "null":
        how = "a NULL DACL"
    elif v.source == "none":
        how = "no ACE grants it"
    else:
        assert v.ace is not None
        kind = "DENY" if v.ace.is_deny else "ALLOW"
        where = " on the parent folder (FILE_LIST_DIRECTORY)" if v.source == "parent" else ""
        how = f"{kind} ACE {(v.index or 0) + 1}{where} for {_sid_name(v.ace.sid, directory)}"
    return f"{v.name}: {mark} by {how}"


def _sid_name(sid: str, directory: Directory) -> str:
    name = directory.name_of(sid) or well_known_name(sid)
    return f"{name} ({sid})" if name else sid


def _token_line(decision: Decision, decided: str | None, user: str, directory: Directory) -> str | None:
    """How the deciding ACE's SID (or the owner) is in ``user``'s token, ``None`` without a route."""
    if decision.route is None:
        return None
    ace = decision.deciding_ace
    through = ""
    if decided and ace is not None and decided[4:] != ace.sid:
        through = f", through {decided} ({directory.name_of(decided) or decided})"
    return f"{_sid_name(ace.sid, directory) if ace is not None else 'owner'} in {user}'s token: {decision.route}{through}"


def _ace_where(decision: Decision, ace: Ace, layer: str, origin: str | None, path: str) -> str:
    """Where the deciding ``ace`` is written: the share permissions, the parent folder, inherited
    from ``origin`` (``""``: the share root), or explicit on the file."""
    word = "DENY" if ace.is_deny else "ALLOW"
    if layer == "share":
        return f"{word} ACE of the share permissions"
    if decision.rule.endswith(")") and "on the parent folder" in decision.rule:
        return f"{word} ACE on the parent folder"
    if ace.inherited:
        if origin == "":
            return f"{word} ACE inherited from the share root"
        return f"{word} ACE inherited from {origin if origin is not None else 'a parent folder'}"
    return f"explicit {word} ACE on {origin or path or 'the share root'}"


def _layer(
    decision: Decision,
    trace: AclTrace,
    user: str,
    directory: Directory,
    origins: Mapping[str, str],
    ace_origins: Mapping[Ace, str],
    protected_at: str | None,
    layer: str,
    via_of: Callable[[str], tuple[str, ...] | None] | None,
) -> Explanation:
    """One layer's (the file's or the share's) verdict as an :class:`Explanation`."""
    bits: tuple[str, ...] = ()
    deciders = {(v.source, v.index, v.granted) for v in decision.bits}
    if len(deciders) > 1:
        bits = tuple(f"{layer}: {_bit_line(v, directory)}" for v in decision.bits)
    ace = decision.deciding_ace
    decided = min(decision.decided_by) if decision.decided_by else None
    token = _token_line(decision, decided, user, directory)
    if ace is None:
        verdict = _word(decision.readable).lower().replace("_", " ")
        rule = decision.rule
        if rule == "no ACE grants read":
            rule = f"no ACE grants read to any of {user}'s principals"
            if protected_at:
                rule += f" (inheritance is disabled at {protected_at}: protected)"
        summary = f"{'the share permissions: ' if layer == 'share' else ''}{verdict}: {rule}"
        return Explanation(
            user, trace.path, decision.readable, decision.rule, summary,
            decided_by=decided, provider=origins.get(decided) if decided else None,
            token=token, bits=bits, notes=decision.notes,
        )  # fmt: skip
    path = trace.path
    name = directory.name_of(ace.sid) or well_known_name(ace.sid)
    origin = ace_origins.get(ace)
    via = via_of(ace.sid) if via_of is not None else None
    where = _ace_where(decision, ace, layer, origin, path)
    who = f"{name} ({ace.sid})" if name else ace.sid
    summary = f"{'allowed' if decision.readable else 'denied'} by {where} for {who}"
    if not decision.readable and ace.is_deny and "(" in decision.rule.rsplit(" for ", 1)[-1]:
        summary += f" ({next(v.name for v in decision.bits if not v.granted)})"
    if via == ():
        summary += f"; this is {user}'s own account"
    elif via:
        summary += f"; {user} is a member via {' → '.join(via)}"
    return Explanation(
        user, path, decision.readable, decision.rule, summary,
        deciding_ace=ace, deciding_name=name, origin=origin, via=via,
        decided_by=decided or ace.principal, provider=origins.get(decided or ace.principal),
        token=token, bits=bits, notes=decision.notes,
    )  # fmt: skip


def _explain_grants(
    acl: Acl,
    user: str,
    path: str,
    principals: frozenset[str],
    name_of: Callable[[str], str | None],
    origins: Mapping[str, str],
    grant_via: Mapping[str, str] | None = None,
) -> Explanation:
    """:func:`explain_trace` for rights given as principals (a folder source's ``principals``, a
    SharePoint item's permissions), without the principal list and the source; ``grant_via``:
    principal → what granted it (see :class:`AclTrace`)."""

    def names(ps: frozenset[str]) -> list[str]:
        return sorted(name_of(p) or p for p in ps)

    if acl.reason:
        return Explanation(user, path, False, acl.reason, f"not readable: {acl.reason}")
    denied = sorted(acl.deny & principals, key=lambda p: name_of(p) or p)
    if denied:
        rule = f"the source denies read to {', '.join(names(frozenset(denied)))}, which {user} holds"
        return Explanation(user, path, False, rule, "denied by the source's configured principals",
                           decided_by=denied[0], provider=origins.get(denied[0]))
    granted = sorted(acl.allow & principals, key=lambda p: name_of(p) or p)
    if granted:
        rule = f"the source grants read to {', '.join(names(frozenset(granted)))}, which {user} holds"
        via = (grant_via or {}).get(granted[0])
        summary = (f"allowed by {via} to {name_of(granted[0]) or granted[0]}" if via
                   else "allowed by the source's configured principals")
        return Explanation(user, path, True, rule, summary,
                           decided_by=granted[0], provider=origins.get(granted[0]))
    rule = f"the source grants read only to {', '.join(names(acl.allow)) or 'nobody'}"
    return Explanation(user, path, False, rule, f"not readable: none of {user}'s principals is granted read by the source")


def _protected_at(manifest: AclManifest, path: str) -> str | None:
    """The deepest protected manifest entry on ``path`` below the share root, or ``None``."""
    parts = path_parts(path)
    for depth in range(len(parts), 0, -1):
        entry = manifest.entry("/".join(parts[:depth]))
        if entry is not None and entry.protected:
            return entry.key
    return None
