"""Data model shared by the daemon and the query core (docs/ARCHITECTURE.md "Data model and the rights filter").

All values are frozen dataclasses: they cross process boundaries (extraction workers), go into
Qdrant payloads and into the SQLite state, and must never be mutated in place.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import unicodedata
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NewType, Self

Principal = NewType("Principal", str)
"""A prefixed principal string: ``sid:S-1-5-21-…`` (Windows/AD), ``aad:<object-id>`` (Entra ID),
``sp:<site-id>:<group-id>`` (SharePoint site group), ``unix-user:<name>``, ``unix-group:<name>``."""

EVERYONE = Principal("sid:S-1-1-0")
AUTHENTICATED_USERS = Principal("sid:S-1-5-11")
NETWORK = Principal("sid:S-1-5-2")
"""NETWORK: in the token of every network logon (an SMB session), so in every P(user)."""

POINT_NAMESPACE = uuid.UUID("5b0d6a57-8e0a-4c35-9a52-0a6f1d1c2e10")
"""Namespace of point ids: ``uuid5(POINT_NAMESPACE, f"{doc_id}:{chunk_index}")``."""

COLLECTIONS = ("documents", "documentation")
"""The two Qdrant collections of the seed: business documents and technical documentation."""


class Closing:
    """A resource for a ``with`` block: leaving it calls the subclass's :meth:`close`, as
    :func:`contextlib.closing` does for one object. Holds no state of its own."""

    def close(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sid_principal(sid: str) -> Principal:
    """``"S-1-5-11"`` → ``Principal("sid:S-1-5-11")``."""
    return Principal(f"sid:{sid}")


@dataclass(frozen=True)
class Grant:
    """One way to be allowed to read: a user holding ``P`` is admitted iff ``P ∩ allow ≠ ∅``,
    ``P ∩ a ≠ ∅`` for every set ``a`` of ``also``, and ``P ∩ deny = ∅``, and only strictly before
    ``expires`` (seconds since the epoch; ``None``: never expires). An ACL is the disjunction of its
    grants (:meth:`Acl.of`).

    Where grants come from: an ordered DACL walk (MS-DTYP 2.5.3.2) gives one grant per run of
    ALLOW ACEs, denied by the DENY ACEs placed before them; ``also`` holds what must be met
    besides — the share permissions on top of the NTFS ones, a bit of FILE_GENERIC_READ granted by
    another ACE (``ancre.acl.engine``); a SharePoint permission or sharing link with an
    ``expirationDateTime`` gives a grant that stops admitting at that instant."""

    allow: frozenset[str]
    deny: frozenset[str] = frozenset()
    expires: float | None = None
    also: frozenset[frozenset[str]] = frozenset()

    def admits(self, principals: frozenset[str], now: float) -> bool:
        """Whether ``principals`` may read through this grant at ``now`` (epoch seconds). An empty
        principal set is never admitted."""
        if not principals or (self.expires is not None and now >= self.expires):
            return False
        return (
            not self.allow.isdisjoint(principals)
            and self.deny.isdisjoint(principals)
            and all(not a.isdisjoint(principals) for a in self.also)
        )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form, ``{"allow": [...], "deny": [...], "expires": float | None}`` (sorted),
        with ``"also": [[...], ...]`` when ``also`` is not empty."""
        out: dict[str, object] = {"allow": sorted(self.allow), "deny": sorted(self.deny), "expires": self.expires}
        if self.also:
            out["also"] = sorted(sorted(a) for a in self.also)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Grant:
        """Inverse of :meth:`to_dict`. Raises ``KeyError``/``TypeError``/``ValueError`` on a
        malformed mapping."""
        expires = d.get("expires")
        also = d.get("also") or ()
        return cls(
            frozenset(str(p) for p in d["allow"]),
            frozenset(str(p) for p in d.get("deny") or ()),
            None if expires is None else float(expires),
            frozenset(frozenset(str(p) for p in a) for a in also),
        )

    def _key(self) -> tuple[tuple[str, ...], tuple[str, ...], float, tuple[tuple[str, ...], ...]]:
        return (
            tuple(sorted(self.allow)), tuple(sorted(self.deny)), math.inf if self.expires is None else self.expires,
            tuple(sorted(tuple(sorted(a)) for a in self.also)),
        )


@dataclass(frozen=True)
class Acl:
    """Who may *read* a document, already reduced to the read right.

    A plain ACL (``clauses == ()``) is one grant: readable by a user iff ``allow ∩ P(user) ≠ ∅``
    and ``deny ∩ P(user) = ∅``. An ACL built by :meth:`of` from several grants, or from one that
    expires, keeps them in ``clauses`` and is readable iff one of them admits the user *now*;
    ``allow`` (the union of the grants' allows) and ``deny`` (the intersection of their denies)
    are then only a necessary condition — the prefilter the store's engine and the BM25 mask
    apply before the exact evaluation (docs/ARCHITECTURE.md "Data model and the rights filter").
    An ACL that cannot be read or parsed is :meth:`nobody` (``allow = ∅``) with a ``reason``:
    fail closed.
    """

    allow: frozenset[str] = frozenset()
    deny: frozenset[str] = frozenset()
    reason: str | None = None
    """Why the ACL is empty/closed (e.g. ``"acl_unreadable: truncated descriptor"``); ``None`` if read normally."""
    clauses: tuple[Grant, ...] = ()
    """The grants when ``allow``/``deny`` alone don't decide (see the class note); ``()`` for a
    plain ACL. Build through :meth:`of`, which keeps them sorted and distinct."""

    @classmethod
    def nobody(cls, reason: str) -> Acl:
        """The fail-closed ACL: readable by no principal at all."""
        return cls(frozenset(), frozenset(), reason)

    @classmethod
    def of(cls, grants: Iterable[Grant], reason: str | None = None) -> Acl:
        """The ACL readable iff one of ``grants`` admits the user. Grants with an empty allow set
        are dropped, equal ones merged; no grant left gives an ACL readable by nobody (with
        ``reason``); a single grant without expiry (nor ``also``) gives a plain ``Acl(allow, deny)``."""
        distinct = {g._key(): g for g in grants if g.allow and all(g.also)}
        kept = tuple(distinct[k] for k in sorted(distinct))
        if not kept:
            return cls(frozenset(), frozenset(), reason)
        if len(kept) == 1 and kept[0].expires is None and not kept[0].also:
            return cls(kept[0].allow, kept[0].deny, reason)
        allow = frozenset().union(*(g.allow for g in kept))
        deny = frozenset.intersection(*(g.deny for g in kept))
        return cls(allow, deny, reason, kept)

    @property
    def exact_prefilter(self) -> bool:
        """Whether ``allow``/``deny`` alone decide (a plain ACL): no exact evaluation needed."""
        return not self.clauses

    def grants(self) -> tuple[Grant, ...]:
        """The effective grants: ``clauses``, or the single ``Grant(allow, deny)`` of a plain ACL,
        or ``()`` when nobody may read."""
        if self.clauses:
            return self.clauses
        return (Grant(self.allow, self.deny),) if self.allow else ()

    def readable_by(self, principals: frozenset[str], now: float | None = None) -> bool:
        """Whether a user holding ``principals`` may read at ``now`` (epoch seconds, default the
        current time). An empty set never reads anything."""
        if not principals:
            return False
        if not self.clauses:
            return not self.allow.isdisjoint(principals) and self.deny.isdisjoint(principals)
        at = time.time() if now is None else now
        return any(g.admits(principals, at) for g in self.clauses)

    def grants_payload(self) -> tuple[dict[str, object], ...]:
        """``clauses`` in the JSON form stored with every chunk (``acl_grants``); ``()`` for a plain ACL."""
        return tuple(g.to_dict() for g in self.clauses)

    def digest(self) -> str:
        """Stable hex SHA-256 of (allow, deny[, clauses]): equal digests ⇔ same rights. Used by the
        state DB to detect ACL-only changes and by the audit log. A plain ACL's digest is that of
        ``[allow, deny]``, as it always was."""
        parts: list[object] = [sorted(self.allow), sorted(self.deny)]
        if self.clauses:
            parts.append([g.to_dict() for g in self.clauses])
        blob = json.dumps(parts, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class SourceItem:
    """One entry of a source listing (content and ACL are fetched lazily by the connector).

    ``native_id`` is the source's stable id for the item (SMB file id, driveItem id, relative path
    for a local folder); ``path`` is the POSIX-style relative path (``CLIENTS/x.docx``), NFC;
    ``size`` in bytes; ``mtime`` in seconds since the epoch; ``etag`` optional change token.
    """

    source: str
    native_id: str
    path: str
    size: int
    mtime: float
    etag: str | None = None
    skip: str | None = None
    """Set when the entry is listed only to be reported, never read: the reason recorded with
    status ``skipped`` (``symlink``: a symbolic link, junction or reparse point not followed)."""

    @property
    def filename(self) -> str:
        """Last path component."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def doc_id(self) -> str:
        """Stable document id: ``<source>:<native_id>``."""
        return f"{self.source}:{self.native_id}"


class ItemStatus(StrEnum):
    """The status of one source item in the sync state DB (``items.status``); the values are
    the strings stored there and printed by ``ancre status --json``."""

    INDEXED = "indexed"
    """In the store; an ``indexed`` row with an ``acl_problem`` has an ACL that could not be read
    (readable by nobody)."""
    PENDING = "pending"
    """Written before the store is touched: a crash between the two writes leaves a row the next
    pass reconciles."""
    FAILED = "failed"
    """Extraction or reading failed (``reason_code`` and ``detail`` say why); retried with backoff."""
    SKIPPED = "skipped"
    """Never indexed, by a property of the file (encrypted, empty, too large, unsupported, a
    symbolic link…); ``reason_code`` and ``detail`` say which."""


class ReasonCode(StrEnum):
    """Why a document is ``failed`` or ``skipped`` (``items.reason_code`` in the state DB), or why
    a pass could not read it; the per-file prose goes to ``detail``. The extraction codes are
    those of :class:`~ancre.errors.ExtractionError`."""

    CORRUPT = "corrupt"
    ENCRYPTED = "encrypted"
    EMPTY = "empty"
    TOO_LARGE = "too_large"
    """Over ``sources.<id>.max_size_mb`` or ``extraction.max_chunks``."""
    UNSUPPORTED = "unsupported"
    NO_TEXT_LAYER = "no_text_layer"
    """A PDF of scanned pages without text, OCR off."""
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    """The extraction worker died, or indexing stopped half-way ``sync.max_attempts`` times."""
    ERROR = "error"
    """An unexpected exception while syncing this one document."""
    UNREADABLE = "unreadable"
    """The source refused to give the bytes (an ``OSError``); reported, never stored."""
    NOT_READ = "not_read"
    """The source listed the item without reading it (``SourceItem.skip``: a symbolic link,
    junction, DFS link not followed, a OneNote notebook…); ``detail`` is the source's words."""

    @property
    def is_skip(self) -> bool:
        """Whether it is a property of the file (status ``skipped``), not an error (``failed``)."""
        return self in _SKIP_CODES

    @property
    def is_retryable(self) -> bool:
        """Whether the failure may be transient (a busy machine, a worker killed by the OOM
        killer, a bug hit by a rare path): retried with backoff up to ``sync.max_attempts``."""
        return self in _RETRYABLE_CODES

    def text(self, detail: str | None) -> str:
        """The human-readable reason: ``"corrupt: bad xref"``; ``"corrupt"`` without detail;
        ``"timeout (try 1 of 3)"`` for a detail that is only a parenthesised note; for
        :attr:`NOT_READ`, the source's own words."""
        if self is ReasonCode.NOT_READ:
            return detail or "not read"
        if not detail:
            return self.value
        return f"{self.value} {detail}" if detail.startswith("(") else f"{self.value}: {detail}"


_SKIP_CODES = frozenset({
    ReasonCode.ENCRYPTED, ReasonCode.EMPTY, ReasonCode.TOO_LARGE, ReasonCode.UNSUPPORTED, ReasonCode.NO_TEXT_LAYER,
    ReasonCode.NOT_READ,
})
_RETRYABLE_CODES = frozenset({ReasonCode.TIMEOUT, ReasonCode.CRASHED, ReasonCode.ERROR})


class PassOutcome(StrEnum):
    """How a sync pass ended (``passes.outcome`` in the state DB, ``outcome`` in reports)."""

    OK = "ok"
    PARTIAL = "partial"
    """Done except under subtrees the source reported unreachable (nothing purged under them)."""
    SUSPECT = "suspect"
    """Root unreachable or mass deletion: nothing purged."""
    INTERRUPTED = "interrupted"
    """A stop was requested: nothing purged."""
    ERROR = "error"
    """An exception stopped the pass (store or embedder down); what was committed stays."""
    CRASHED = "crashed"
    """The process running the pass ended before it did (closed on the next open)."""
    DISK_FULL = "disk_full"
    """The data folder's file system had no room for the next writes: the pass stopped before
    them, what was committed stays, nothing purged; the daemon resumes once there is room."""


class PassScope(StrEnum):
    """What a sync pass covered."""

    FULL = "full"
    """Every item of the source."""
    PATHS = "paths"
    """The paths named by change events."""
    ACL = "acl"
    """Only the rights of indexed documents."""


class ChangeKind(StrEnum):
    """The kind of a change reported by a source's watcher (``ChangeEvent.kind``)."""

    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"
    MOVED = "moved"
    """Renamed or moved: ``dest_path`` is the new path."""
    ACL = "acl"
    """The rights changed (without a path: possibly every document's)."""
    RESCAN = "rescan"
    """The watcher lost track: a full reconciliation is needed."""


def nfc(text: str) -> str:
    """``text`` in Unicode NFC (composed) form: paths, file names and account names are stored
    and compared NFC, whatever form the source spells them in (macOS and some tools write NFD).
    Pure normalisation: no separator, case or whitespace change."""
    return unicodedata.normalize("NFC", text)


_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""What :func:`visible` writes out: the C0 and C1 control characters and DEL (ECMA-48: ESC starts
CSI and OSC sequences, BEL ends an OSC, U+009B is CSI itself), the bidirectional controls (Unicode
UAX #9, "Explicit Directional Formatting Characters" and the implicit marks: U+061C, U+200E,
U+200F, U+202A–U+202E, U+2066–U+2069), the line and paragraph separators (U+2028, U+2029) and lone
surrogates (which can't even be encoded)."""


def _shown(m: re.Match[str]) -> str:
    c = m.group()
    return f"\\x{ord(c):02x}" if ord(c) <= 0x9F else f"<U+{ord(c):04X}>"


def visible(text: str, *, newlines: bool = False) -> str:
    """``text`` as an admin's terminal may show it: every character of :data:`_HIDDEN` written
    out — a control character as ``\\x1b`` (ESC), ``\\x07`` (BEL), ``\\x9b`` (CSI), ``\\x0a``
    (a newline, unless ``newlines``), a bidirectional control or separator as ``<U+202E>`` — so
    text from a request, a document or a directory can neither move the cursor, clear the screen,
    set the title, hide a hyperlink, nor reorder what is shown. Everything else is unchanged.
    The one helper of every admin output (the CLI's tables and lines, the logs)."""
    if newlines:
        return "\n".join(_HIDDEN.sub(_shown, part) for part in text.split("\n"))
    return _HIDDEN.sub(_shown, text)


def json_visible(text: str) -> str:
    """A JSON text (``json.dumps(..., ensure_ascii=False)``, pydantic's ``model_dump_json()``)
    with every character of :data:`_HIDDEN` written as a JSON ``\\uXXXX`` escape — but the tab,
    newline and carriage return, which outside strings are the text's layout (inside them a JSON
    encoder escapes every C0 character already): the same JSON value, safe on a terminal. Valid
    because outside strings a JSON text holds only ASCII."""
    return _HIDDEN.sub(lambda m: m.group() if m.group() in "\t\n\r" else f"\\u{ord(m.group()):04x}", text)


class BlockKind(StrEnum):
    """Kinds of extracted text blocks, used by the structure-aware chunker."""

    HEADING = "heading"
    PARAGRAPH = "paragraph"
    TABLE_ROW = "table_row"
    PAGE_BREAK = "page_break"


@dataclass(frozen=True)
class Block:
    """A unit of extracted text in reading order. ``level`` is the heading level (1 = top) for
    headings, 0 otherwise; ``page`` is the 1-based PDF page, 0 when not paginated; ``ocr`` is true
    when the text was read by OCR from an image (a scanned page) rather than from a text layer."""

    kind: BlockKind
    text: str
    level: int = 0
    page: int = 0
    ocr: bool = False


CHUNK_FORMAT = "subject-1"
"""What a chunk is embedded and keyword-indexed with, as a version recorded on each indexed
document's state row: ``"subject-1"`` — its text after its document's contextual header
(:attr:`Chunk.header`). A document indexed under another format (``None``: before subjects) is
re-indexed by the next sync pass (docs/ARCHITECTURE.md "Data flow of indexing")."""


@dataclass(frozen=True)
class Subject:
    """Whose document it is, as found at indexing (:func:`ancre.ingest.subject.document_subject`,
    docs/ARCHITECTURE.md "Data flow of indexing"): ``title`` its title (its first heading, ``""``
    when it has none); ``parties`` the parties it names (a contract's « entre X … et Y », a letter's
    or an offer's « Client : X », « Locataire : X », « Madame X »…), as written; ``file_words`` its
    file name split into words (``Contrat_Maintenance_GarageDubois.docx`` → « Contrat Maintenance
    Garage Dubois »: ``_``, ``-``, ``.``, CamelCase and digit runs split, accents kept); ``folder``
    its folder in its source (POSIX, ``""`` at the root)."""

    title: str = ""
    parties: tuple[str, ...] = ()
    file_words: str = ""
    folder: str = ""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict (the payload's ``subject``)."""
        return {"title": self.title, "parties": list(self.parties), "file_words": self.file_words, "folder": self.folder}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Subject:
        """Inverse of :meth:`to_dict`; missing keys are empty."""
        return cls(
            str(d.get("title") or ""), tuple(str(p) for p in d.get("parties") or ()),
            str(d.get("file_words") or ""), str(d.get("folder") or ""),
        )


def embedded_text(header: str, text: str) -> str:
    """What a chunk is embedded as: its document's contextual ``header`` (see :attr:`Chunk.header`)
    then its ``text``, a blank line between; the ``text`` alone without a header. The vector of a
    stored point is always that of this string (:meth:`~ancre.index.store.Store.vectors_of`)."""
    return f"{header}\n\n{text}" if header else text


@dataclass(frozen=True)
class Chunk:
    """A piece of a document's text as indexed: ``chunk_index`` is 0…n-1 in reading order,
    ``heading_path`` the headings above it (outermost first), ``text`` at most about the configured
    target size in characters (a single oversized table row or sentence may exceed it); ``ocr``:
    some of its text was read by OCR (see :attr:`Block.ocr`); ``header``: its document's short
    contextual header (whose document it is, and the section), embedded and keyword-indexed with
    ``text`` but never quoted as part of it (:func:`ancre.ingest.subject.chunk_header`)."""

    doc_id: str
    chunk_index: int
    text: str
    heading_path: tuple[str, ...] = ()
    ocr: bool = False
    header: str = ""

    @property
    def embedded(self) -> str:
        """The string embedded for this chunk (:func:`embedded_text`)."""
        return embedded_text(self.header, self.text)

    @property
    def point_id(self) -> str:
        """``uuid5(POINT_NAMESPACE, "doc_id:chunk_index")`` as a string: re-indexing is idempotent."""
        return point_id(self.doc_id, self.chunk_index)


def point_id(doc_id: str, chunk_index: int) -> str:
    """The Qdrant point id of chunk ``chunk_index`` of ``doc_id`` (a UUID string)."""
    return str(uuid.uuid5(POINT_NAMESPACE, f"{doc_id}:{chunk_index}"))


@dataclass(frozen=True, kw_only=True)
class ChunkPayload:
    """The Qdrant payload of one point (docs/ARCHITECTURE.md "Data model and the rights filter"),
    built by keyword only. ``location`` is the UNC folder
    (``\\\\SRV\\Partage\\Dossier\\``) or SharePoint folder URL; ``indexed_at`` in epoch seconds;
    ``ocr``: the chunk's text was (partly) read by OCR from a scanned page."""

    source: str
    doc_id: str
    path: str
    filename: str
    location: str
    chunk_index: int
    text: str
    acl_allow: tuple[str, ...]
    acl_deny: tuple[str, ...]
    content_hash: str
    indexed_at: float
    heading_path: tuple[str, ...] = ()
    collection: str = "documents"
    ocr: bool = False
    acl_grants: tuple[dict[str, object], ...] = ()
    """The ACL's grants when ``acl_allow``/``acl_deny`` are only its prefilter
    (:meth:`Acl.grants_payload`); ``()`` for a plain ACL."""
    modified_at: float = 0.0
    """The source file's modification time when its content was indexed (SMB LastWriteTime,
    SharePoint lastModifiedDateTime, local mtime), epoch seconds; ``0.0``: unknown."""
    subject: Subject | None = None
    """Whose document it is (:class:`Subject`); ``None`` on a point indexed before subjects
    (:data:`CHUNK_FORMAT`)."""
    header: str = ""
    """The chunk's contextual header (:attr:`Chunk.header`): embedded and keyword-indexed with
    ``text``, never quoted."""

    @property
    def embedded(self) -> str:
        """The string this point's vector is the embedding of (:func:`embedded_text`)."""
        return embedded_text(self.header, self.text)

    @classmethod
    def acl_fields(cls, acl: Acl) -> dict[str, object]:
        """The payload keys that carry ``acl`` (``acl_allow``, ``acl_deny``, ``acl_grants``), as
        stored on every chunk of its document; for :meth:`~ancre.index.store.Store.set_acl`."""
        return {
            "acl_allow": sorted(acl.allow),
            "acl_deny": sorted(acl.deny),
            "acl_grants": list(acl.grants_payload()),
        }

    def acl(self) -> Acl:
        """The document's ACL as stored on this chunk. A malformed ``acl_grants`` entry gives an
        ACL readable by nobody (fail closed)."""
        if not self.acl_grants:
            return Acl(frozenset(self.acl_allow), frozenset(self.acl_deny))
        try:
            grants = [Grant.from_dict(g) for g in self.acl_grants]
        except (KeyError, TypeError, ValueError, AttributeError):
            return Acl.nobody("malformed acl_grants in the index")
        return Acl.of(grants) if grants else Acl.nobody("malformed acl_grants in the index")

    def readable_by(self, principals: frozenset[str], now: float | None = None) -> bool:
        """Whether ``principals`` may read this chunk per its stored ACL, evaluated exactly at
        ``now`` (default the current time): the check every read path applies on top of the
        engine's prefilter."""
        return self.acl().readable_by(principals, now)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready payload dict (tuples become lists)."""
        return {
            "source": self.source,
            "doc_id": self.doc_id,
            "path": self.path,
            "filename": self.filename,
            "location": self.location,
            "chunk_index": self.chunk_index,
            "text": self.text,
            "acl_allow": list(self.acl_allow),
            "acl_deny": list(self.acl_deny),
            "content_hash": self.content_hash,
            "indexed_at": self.indexed_at,
            "heading_path": list(self.heading_path),
            "collection": self.collection,
            "ocr": self.ocr,
            "acl_grants": list(self.acl_grants),
            "modified_at": self.modified_at,
            "subject": self.subject.to_dict() if self.subject is not None else None,
            "header": self.header,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ChunkPayload:
        """Inverse of :meth:`to_dict` (``d``: the payload's JSON values); raises ``KeyError`` on a
        payload missing a field."""
        return cls(
            source=str(d["source"]),
            doc_id=str(d["doc_id"]),
            path=str(d["path"]),
            filename=str(d["filename"]),
            location=str(d.get("location", "")),
            chunk_index=int(d["chunk_index"]),
            text=str(d["text"]),
            acl_allow=tuple(d.get("acl_allow") or ()),
            acl_deny=tuple(d.get("acl_deny") or ()),
            content_hash=str(d.get("content_hash", "")),
            indexed_at=float(d.get("indexed_at", 0.0)),
            heading_path=tuple(d.get("heading_path") or ()),
            collection=str(d.get("collection", "documents")),
            ocr=bool(d.get("ocr", False)),
            acl_grants=tuple(dict(g) for g in d.get("acl_grants") or ()),
            modified_at=float(d.get("modified_at", 0.0)),
            subject=Subject.from_dict(d["subject"]) if isinstance(d.get("subject"), Mapping) else None,
            header=str(d.get("header") or ""),
        )


@dataclass(frozen=True)
class StoredPoint:
    """A point as read back from the store: id, payload, and the search score when it came from a
    vector search (cosine similarity, higher is better), else ``None``."""

    id: str
    payload: ChunkPayload
    score: float | None = None


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """One fused retrieval result (query core output). ``score`` is the RRF score in [0, ~0.033];
    ``found_by`` lists which candidate lists had it (``"vector"``, ``"bm25"``)."""

    point_id: str
    doc_id: str
    filename: str
    path: str
    location: str
    chunk_index: int
    score: float
    found_by: tuple[str, ...]
    text: str = ""
    collection: str = "documents"
    ranks: dict[str, int] = field(default_factory=dict, compare=False, hash=False)
    subject: Subject | None = None
    """Whose document it is (:attr:`ChunkPayload.subject`; ``None``: indexed before subjects)."""
    heading_path: tuple[str, ...] = ()
    """The headings above the chunk (:attr:`Chunk.heading_path`)."""


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold_name(name: str) -> str:
    """The form account and group names are compared in: NFC, surrounding spaces removed, and
    only ASCII ``A``–``Z`` lowercased. Never Unicode case folding: ``str.casefold`` turns
    ``jeß.rossi`` and ``jeſs.rossi`` into ``jess.rossi``, two accounts that Open WebUI (and AD's
    sign-in) keep apart; exact matching after this fold cannot merge them."""  # noqa: RUF002 - the long s is the example
    return fold_identity(name.strip())


def fold_identity(name: str) -> str:
    """:func:`fold_name` without removing anything: NFC and ASCII-only lowercasing. The key of
    ``api.user_map``'s e-mails, so that an entry written with a stray space or NBSP stays
    distinct (and is reported by ``ancre check``) instead of silently matching the clean address."""
    return nfc(name).translate(_ASCII_LOWER)


WHITE_SPACE: frozenset[str] = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
"""The 25 code points with Unicode's ``White_Space`` property (PropList.txt, unchanged since
Unicode 6.3): what :func:`identity_defect` refuses besides the ``C*`` categories."""

_DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)
"""Unicode's ``Default_Ignorable_Code_Point`` ranges (DerivedCoreProperties.txt, Unicode 15.1):
characters a renderer shows as nothing — the Hangul fillers and variation selectors among them,
which are neither ``White_Space`` nor ``Cf``."""


def _invisible(c: str) -> bool:
    """Whether ``c`` is a character an identity may never carry (see :func:`identity_defect`)."""
    if c in WHITE_SPACE or unicodedata.category(c)[0] == "C":
        return True
    cp = ord(c)
    return any(lo <= cp <= hi for lo, hi in _DEFAULT_IGNORABLE)


def code_point_name(c: str) -> str:
    """``U+00A0 (NO-BREAK SPACE)``: a character named so that an admin reading a log or a
    terminal sees which one it is (the character itself is never printed)."""
    name = unicodedata.name(c, "") or {"\t": "CHARACTER TABULATION", "\n": "LINE FEED", "\r": "CARRIAGE RETURN"}.get(c, "")
    return f"U+{ord(c):04X}" + (f" ({name})" if name else "")


def visible_identity(text: str, brackets: str = "<>") -> str:
    """``text`` with every character :func:`identity_defect` refuses replaced by ``<U+XXXX>``
    (``brackets``: the two characters around it): ``"alice@axonix.ch<U+00A0>"`` — how a refused
    identity is shown in logs and by ``ancre check``; staff read ``[U+00A0]`` (Open WebUI shows
    an error as plain text)."""
    return "".join(f"{brackets[0]}U+{ord(c):04X}{brackets[1]}" if _invisible(c) else c for c in text)


def identity_defect(text: str, *, inner_space: bool = False) -> str | None:
    """Why ``text`` can't be taken as an identity as it is — ``None`` when it can.

    Identities (the e-mail Open WebUI forwards, ``api.user_map``'s entries, the account a caller
    names) are matched exactly after :func:`fold_name`'s NFC and ASCII lowercasing; nothing is
    stripped into another account. So refused are: any character with Unicode's ``White_Space``
    property (:data:`WHITE_SPACE`: spaces, tabs, line breaks, NBSP…), any control, format,
    surrogate, private-use or unassigned character (categories ``Cc``, ``Cf``, ``Cs``, ``Co``,
    ``Cn``: zero-width characters, bidi marks…) and any ``Default_Ignorable_Code_Point`` —
    anywhere in the text. With ``inner_space`` (a directory account name: ``sAMAccountName``
    may hold a space), a plain U+0020 strictly inside is allowed; never at either end.

    Returns e.g. ``"U+00A0 (NO-BREAK SPACE) at position 23"`` (1-based) or ``"empty"``."""
    if not text:
        return "empty"
    for i, c in enumerate(text):
        if c == " " and inner_space and 0 < i < len(text) - 1:
            continue
        if _invisible(c):
            return f"{code_point_name(c)} at position {i + 1}"
    return None
