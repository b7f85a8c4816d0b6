"""``ancre report exposure``: what a broad principal can read, and what sensitive data it holds
(docs/REPORTS.md).

From the index alone: every chunk is read once from the store (:meth:`Store.scroll
<ancre.index.store.Store.scroll>`, both collections, payloads only — the sources are not read
again), its document's ACL decides whether a *broad* principal reads it, and only then is its text
scanned (:func:`ancre.reports.detectors.scan`). Memory stays bounded by the documents exposed (a
digest per distinct value found), not by the index.

A document is **broadly readable** when its ACL (:meth:`ChunkPayload.acl
<ancre.models.ChunkPayload.acl>`, every grant evaluated at the report's instant, deny entries
included) admits a token holding only a broad principal and
what every holder of it also holds — tried from the broadest: Everyone (``sid:S-1-1-0``),
Authenticated Users (``S-1-5-11``), BUILTIN\\Users (``S-1-5-32-545``), a domain's Domain Users
(``S-1-5-21-…-513``, MS-DTYP 2.4.2.4), Entra's ``aad:everyone-internal`` (also what an
organisation-wide SharePoint link grants), the principals of ``[reports] broad_principals`` —
or when more than ``[reports] broad_share`` of the directory's users may read it (each user's
principals resolved as for a question): then the allowed principal most of them hold is named.
Every exposed document says how many of the directory's users may read it.

What opened it: the ACE or permission that admits the broad principal, named as ``acl explain``
names it (:func:`ancre.acl.explain.explain_principals` on the trace the document's connector gives,
:class:`~ancre.connectors.base.AclExplainable`: the ACL manifest or the file's security descriptor
on an SMB source, the item's permissions on SharePoint); one trace per folder and ACL. Without a
source to ask (``explain=False``, or the source unreachable) the principal is named from the index
and the report says why no ACE is.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from ancre.acl.directory import Directory
from ancre.acl.explain import explain_principals
from ancre.acl.providers import PrincipalResolver
from ancre.connectors.base import AclExplainable, Connector
from ancre.errors import AncreError, DirectoryError
from ancre.index.store import Store
from ancre.models import AUTHENTICATED_USERS, COLLECTIONS, EVERYONE, Acl, ChunkPayload
from ancre.reports.detectors import LABELS, Hit, Kind, scan
from ancre.settings.reports import ReportsConfig

BUILTIN_USERS = "sid:S-1-5-32-545"
EVERYONE_INTERNAL = "aad:everyone-internal"
_DOMAIN_USERS_RE = re.compile(r"^sid:S-1-5-21-\d+-\d+-\d+-513$")


class Basis(StrEnum):
    """Why a document counts as broadly readable."""

    PRINCIPAL = "principal"
    """A well-known or configured broad principal reads it."""
    SHARE = "share"
    """More than ``broad_share`` of the directory's users read it."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Reach(_Model):
    """Who reads an exposed document: the broad ``principal`` (prefixed) and its ``name``, the
    ``basis``, ``readers`` of the directory's ``users`` (``None``: could not be counted;
    ``unresolved`` users whose principals could not be resolved are not counted), and
    ``opened_by``: the ACE or permission that admits the principal (``None``: not asked of the
    source, ``why_not`` says why); ``until``: when the grants that admit it expire (ISO 8601 UTC;
    ``None``: they don't)."""

    principal: str
    name: str
    basis: Basis
    readers: int | None
    users: int | None
    unresolved: int = 0
    opened_by: str | None = None
    why_not: str | None = None
    until: str | None = None


class Finding(_Model):
    """What a document holds of one kind: distinct values (or mentions) ``count``, those the
    detector could not decide (``undecided``) and why (``reasons``). Never a value."""

    kind: Kind
    label: str
    count: int
    undecided: int = 0
    reasons: tuple[str, ...] = ()


class DocumentExposure(_Model):
    """One broadly readable document: where it is, how many chunks were scanned, who reads it,
    what was found (``[]``: nothing)."""

    source: str
    doc_id: str
    path: str
    filename: str
    location: str
    collection: str
    chunks: int
    reach: Reach
    findings: tuple[Finding, ...] = ()

    @property
    def sensitive(self) -> bool:
        """Something was found for sure."""
        return any(f.count for f in self.findings)

    @property
    def undecided(self) -> bool:
        """A detector could not decide on something."""
        return any(f.undecided for f in self.findings)


class FolderExposure(_Model):
    """One folder (``location``: UNC folder or URL) of a source: its broadly readable documents and
    how many of its documents are not (``restricted``; not scanned)."""

    source: str
    location: str
    documents: tuple[DocumentExposure, ...] = ()
    restricted: int = 0


class RestrictedFolder(_Model):
    """A folder none of whose documents is broadly readable (not scanned)."""

    source: str
    location: str
    documents: int


class ExposureReport(_Model):
    """The report: when, how long (seconds), chunks and documents read, the directory's users
    (``None``: unknown), the threshold, the broad principals tried, folders with an exposed
    document, folders without (``restricted``), and notes (what could not be decided)."""

    generated_at: str
    seconds: float
    chunks: int
    documents: int
    exposed: int
    sensitive: int
    undecided: int
    users: int | None
    broad_share: float
    broad_principals: tuple[str, ...]
    folders: tuple[FolderExposure, ...]
    restricted: tuple[RestrictedFolder, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Broad:
    principal: str
    name: str
    implied: frozenset[str]

    def token(self) -> frozenset[str]:
        return self.implied | {self.principal}


_WELL_KNOWN = (
    _Broad(EVERYONE, "Everyone", frozenset()),
    _Broad(AUTHENTICATED_USERS, "Authenticated Users", frozenset({EVERYONE})),
    _Broad(BUILTIN_USERS, "BUILTIN\\Users", frozenset({EVERYONE, AUTHENTICATED_USERS})),
)


@dataclass
class _Doc:
    payload: ChunkPayload
    acl_key: tuple[object, ...]
    chunks: int = 0
    found: dict[Kind, set[str]] = field(default_factory=dict)
    open_: dict[Kind, set[str]] = field(default_factory=dict)
    reasons: dict[Kind, set[str]] = field(default_factory=dict)

    def add(self, hits: Iterable[Hit]) -> None:
        for h in hits:
            if h.decided:
                self.found.setdefault(h.kind, set()).add(h.key)
            else:
                self.open_.setdefault(h.kind, set()).add(h.key)
                if h.reason:
                    self.reasons.setdefault(h.kind, set()).add(h.reason)

    def findings(self) -> tuple[Finding, ...]:
        out = []
        for kind in Kind:
            found, open_ = self.found.get(kind, set()), self.open_.get(kind, set()) - self.found.get(kind, set())
            if found or open_:
                out.append(Finding(kind=kind, label=LABELS[kind], count=len(found), undecided=len(open_),
                                   reasons=tuple(sorted(self.reasons.get(kind, ())))))
        return tuple(out)


def _acl_key(p: ChunkPayload) -> tuple[object, ...]:
    """One key per distinct stored ACL (allow, deny and its grants)."""
    return (p.acl_allow, p.acl_deny, json.dumps(list(p.acl_grants), sort_keys=True) if p.acl_grants else "")


def _until(acl: Acl, token: frozenset[str], now: float) -> float | None:
    """When the grants admitting ``token`` at ``now`` all expire (epoch seconds), ``None`` when one
    of them never does."""
    ends = [g.expires for g in acl.grants() if g.admits(token, now)]
    return None if not ends or any(e is None for e in ends) else max(e for e in ends if e is not None)


class _Readers:
    """The directory's users and their principals, resolved once; counts per ACL."""

    def __init__(self, directory: Directory, resolver: PrincipalResolver) -> None:
        self.tokens: list[frozenset[str]] | None = None
        self.unresolved = 0
        self.problem: str | None = None
        try:
            users = directory.users()
        except DirectoryError as e:
            self.problem = f"the directory's users could not be listed ({e}): the share of users is not counted"
            return
        tokens = []
        for u in users:
            try:
                tokens.append(resolver.principals(u))
            except DirectoryError:
                self.unresolved += 1
        self.tokens = tokens
        if self.unresolved:
            self.problem = f"{self.unresolved} user(s) whose principals could not be resolved are not counted"

    @property
    def total(self) -> int | None:
        return None if self.tokens is None else len(self.tokens) + self.unresolved

    def count(self, acl: Acl, now: float) -> tuple[int | None, str | None]:
        """Readers of ``acl`` at ``now`` and the principal of ``acl.allow`` most of them hold."""
        if self.tokens is None:
            return None, None
        readers = [t for t in self.tokens if acl.readable_by(t, now)]
        best, most = None, 0
        for p in sorted(acl.allow):
            held = sum(1 for t in readers if p in t)
            if held > most:
                best, most = p, held
        return len(readers), best


Explainer = Callable[[ChunkPayload, frozenset[str], str], "tuple[str | None, str | None]"]
"""``(payload, token, subject) -> (opened_by, why_not)`` for one exposed document."""


def source_explainer(connector: Callable[[str], Connector], directory: Directory) -> Explainer:
    """An :data:`Explainer` asking each document's connector (``connector(source_id)``, built once
    per source) for its rights trace, one per (source, folder, ACL, token)."""
    conns: dict[str, Connector | str] = {}
    memo: dict[tuple[object, ...], tuple[str | None, str | None]] = {}

    def explain(p: ChunkPayload, token: frozenset[str], subject: str) -> tuple[str | None, str | None]:
        folder = p.path.rsplit("/", 1)[0] if "/" in p.path else ""
        key = (p.source, folder, _acl_key(p), token)
        if key in memo:
            return memo[key]
        if p.source not in conns:
            try:
                conns[p.source] = connector(p.source)
            except AncreError as e:
                conns[p.source] = f"source {p.source!r} could not be opened: {e}"
        conn = conns[p.source]
        if isinstance(conn, str):
            out: tuple[str | None, str | None] = (None, conn)
        elif not isinstance(conn, AclExplainable):
            out = (None, f"source {p.source!r} cannot explain its rights")
        else:
            try:
                explained = explain_principals(conn.explain_acl(p.path), subject, token, directory=directory)
                out = (explained.summary, None) if explained.readable else (None, f"the source's rights now: {explained.summary}")
            except AncreError as err:
                out = (None, f"the source could not be asked: {err}")
        memo[key] = out
        return out

    return explain


def _iso(epoch: float | None) -> str | None:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds") if epoch is not None else None


def _broad_list(cfg: ReportsConfig, directory: Directory) -> tuple[list[_Broad], list[str]]:
    """The configured broad principals (resolved names) and the notes on names not found."""
    out, notes = [], []
    for name in cfg.broad_principals:
        principal: str | None
        if name.startswith(("sid:", "aad:", "sp:")):
            principal = name
        else:
            try:
                sid = directory.sid_of(name)
            except DirectoryError as e:
                notes.append(f"reports.broad_principals: {name!r} could not be looked up ({e})")
                continue
            principal = f"sid:{sid}" if sid else None
        if principal is None:
            notes.append(f"reports.broad_principals: {name!r} is not in the directory")
            continue
        out.append(_Broad(principal, name, frozenset({EVERYONE, AUTHENTICATED_USERS})))
    return out, notes


_Reached = tuple[Reach, frozenset[str]]
"""How far a document reaches, and the token (a broad principal and what it implies) that reads it."""


@dataclass(eq=False)
class _Reach:
    """The reach of each distinct stored ACL at ``now`` (computed once per ACL), and the names of
    the principals it names (looked up once each in the directory)."""

    directory: Directory
    readers: _Readers
    configured: list[_Broad]
    cfg: ReportsConfig
    now: float
    _names: dict[str, str] = field(default_factory=dict, init=False)
    _reach_of: dict[tuple[object, ...], _Reached | None] = field(default_factory=dict, init=False)

    def name_of(self, principal: str) -> str:
        """The directory's name of a ``sid:`` principal, else (or when it has none) the principal."""
        names = self._names
        if principal not in names:
            try:
                names[principal] = (self.directory.name_of(principal) if principal.startswith("sid:") else None) or principal
            except DirectoryError:
                names[principal] = principal
        return names[principal]

    def __call__(self, p: ChunkPayload) -> _Reached | None:
        """The reach of ``p``'s document: the broadest principal its ACL admits (tried from the
        broadest), else the principal most of its readers hold when they are more than
        ``broad_share`` of the users; ``None``: not broadly readable."""
        key = _acl_key(p)
        if key in self._reach_of:
            return self._reach_of[key]
        acl, now, readers = p.acl(), self.now, self.readers
        n, most = readers.count(acl, now)
        total = readers.total
        tried = list(_WELL_KNOWN)
        tried += [_Broad(a, "Domain Users", frozenset({EVERYONE, AUTHENTICATED_USERS}))
                  for a in sorted(acl.allow) if _DOMAIN_USERS_RE.match(a)]
        tried += [_Broad(EVERYONE_INTERNAL, "Entra: everyone except external users", frozenset())]
        tried += self.configured
        out: _Reached | None = None
        for b in tried:
            if acl.readable_by(b.token(), now):
                name = b.name if b.name != "Domain Users" else f"{self.name_of(b.principal)} (Domain Users)"
                out = (Reach(principal=b.principal, name=name, basis=Basis.PRINCIPAL, readers=n, users=total,
                             unresolved=readers.unresolved, until=_iso(_until(acl, b.token(), now))), b.token())
                break
        if out is None and n is not None and total and most is not None and n / total > self.cfg.broad_share:
            token = frozenset({most})
            out = (Reach(principal=most, name=self.name_of(most), basis=Basis.SHARE, readers=n, users=total,
                         unresolved=readers.unresolved, until=_iso(_until(acl, token, now))), token)
        self._reach_of[key] = out
        return out


@dataclass
class _Scanned:
    """What one pass over the index found: the exposed documents (by ``doc_id``, their text
    scanned), the documents of each ``(source, location)`` folder that are not, and the chunks read."""

    docs: dict[str, _Doc] = field(default_factory=dict)
    restricted: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    chunks: int = 0


def _scan_index(store: Store, reach: _Reach, sources: Sequence[str] | None) -> _Scanned:
    """Read every chunk of the index (only those of ``sources`` when given) once; scan the text of
    those whose document is broadly readable. Raises :class:`~ancre.errors.StoreError`."""
    out = _Scanned()
    wanted = set(sources) if sources else None
    for coll in COLLECTIONS:
        for point in store.scroll(coll):
            p = point.payload
            if wanted is not None and p.source not in wanted:
                continue
            out.chunks += 1
            r = reach(p)
            if r is None:
                out.restricted.setdefault((p.source, p.location), set()).add(p.doc_id)
                continue
            d = out.docs.get(p.doc_id)
            if d is None:
                d = out.docs[p.doc_id] = _Doc(p, _acl_key(p))
            d.chunks += 1
            d.add(scan(p.text, ocr=p.ocr))
    return out


def _exposure(d: _Doc, reach: _Reach, explainer: Explainer | None) -> DocumentExposure:
    """The :class:`DocumentExposure` of an exposed document, with what opened it per ``explainer``
    (or why that is not known)."""
    p = d.payload
    got = reach(p)
    assert got is not None
    reached, token = got
    if explainer is not None:
        opened, why = explainer(p, token, reached.name)
    else:
        opened, why = None, "not asked of the source (--no-explain)"
    if opened is None and why is not None:
        why = f"{why}; in the index it is granted to {reached.name}"
    reached = reached.model_copy(update={"opened_by": opened, "why_not": why})
    return DocumentExposure(
        source=p.source, doc_id=p.doc_id, path=p.path, filename=p.filename, location=p.location,
        collection=p.collection, chunks=d.chunks, reach=reached, findings=d.findings(),
    )


def exposure_report(
    store: Store,
    directory: Directory,
    resolver: PrincipalResolver,
    cfg: ReportsConfig,
    *,
    explainer: Explainer | None = None,
    sources: Sequence[str] | None = None,
) -> ExposureReport:
    """The exposure report over the whole index (see the module doc); ``explainer`` names what
    opened each exposed document (``None``: from the index only); ``sources``: only these source
    ids. Raises :class:`~ancre.errors.StoreError` when the store can't be read."""
    t0 = time.perf_counter()
    started = datetime.now(UTC)
    now = started.timestamp()  # every ACL evaluated at this one instant (grants may expire)
    readers = _Readers(directory, resolver)
    configured, notes = _broad_list(cfg, directory)
    if readers.problem:
        notes.append(readers.problem)
    reach = _Reach(directory, readers, configured, cfg, now)
    scanned = _scan_index(store, reach, sources)
    docs, restricted = scanned.docs, scanned.restricted

    folders: dict[tuple[str, str], list[DocumentExposure]] = {}
    for d in docs.values():
        p = d.payload
        folders.setdefault((p.source, p.location), []).append(_exposure(d, reach, explainer))
    out_folders = [
        FolderExposure(source=s, location=loc, documents=tuple(sorted(ds, key=lambda x: x.path)),
                       restricted=len(restricted.get((s, loc), ())))
        for (s, loc), ds in sorted(folders.items())
    ]
    exposed = [d for f in out_folders for d in f.documents]
    undecided = [d for d in exposed if d.undecided]
    if undecided:
        notes.append(f"{len(undecided)} exposed document(s) hold something a detector could not decide on "
                     "(see the undecided counts)")
    n_docs = len(docs) + sum(len(v) for v in restricted.values())
    return ExposureReport(
        generated_at=started.isoformat(timespec="seconds"), seconds=round(time.perf_counter() - t0, 2),
        chunks=scanned.chunks, documents=n_docs, exposed=len(exposed), sensitive=sum(1 for d in exposed if d.sensitive),
        undecided=len(undecided), users=readers.total, broad_share=cfg.broad_share,
        broad_principals=tuple([b.name for b in _WELL_KNOWN] + ["Domain Users", "Entra everyone-internal"]
                               + [b.name for b in configured]),
        folders=tuple(out_folders),
        restricted=tuple(RestrictedFolder(source=s, location=loc, documents=len(ids))
                         for (s, loc), ids in sorted(restricted.items()) if (s, loc) not in folders),
        notes=tuple(notes),
    )


__all__ = [
    "Basis", "DocumentExposure", "Explainer", "ExposureReport", "Finding", "FolderExposure", "Reach",
    "RestrictedFolder",
    "exposure_report", "source_explainer",
]
