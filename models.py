"""Data model shared by the daemon and the query core (docs/ARCHITECTURE.md "Data model and the rights filter").

All values are frozen dataclasses: they cross process boundaries (extraction workers), go into
Qdrant payloads and into the SQLite state, and must never be mutated in place.
"""

from __future__ import annotations

import unicodedata

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import NewType

Principal = NewType("Principal", str)
"""A prefixed principal string: ``sid:S-1-5-21-…`` (Windows/AD), ``aad:<object-id>`` (Entra ID),
``sp:<site>/<group-id>`` (SharePoint site group), ``unix-user:<name>``, ``unix-group:<name>``."""

EVERYONE = Principal("sid:S-1-1-0")
AUTHENTICATED_USERS = Principal("sid:S-1-5-11")
NETWORK = Principal("sid:S-1-5-2")
"""NETWORK: in the token of every network logon (an SMB session), so in every P(user)."""

POINT_NAMESPACE = uuid.UUID("5b0d6a57-8e0a-4c35-9a52-0a6f1d1c2e10")
"""Namespace of point ids: ``uuid5(POINT_NAMESPACE, f"{doc_id}:{chunk_index}")``."""

COLLECTIONS = ("documents", "documentation")
"""The two Qdrant collections of the seed: business documents and technical documentation."""


def sid_principal(sid: str) -> Principal:
    """``"S-1-5-11"`` → ``Principal("sid:S-1-5-11")``."""
    return Principal(f"sid:{sid}")


@dataclass(frozen=True)
class Acl:
    """Who may *read* a document, already reduced to the read right.

    Readable by a user iff ``allow ∩ P(user) ≠ ∅`` and ``deny ∩ P(user) = ∅``. An ACL that cannot
    be read or parsed is :meth:`nobody` (``allow = ∅``) with a ``reason``: fail closed.
    """

    allow: frozenset[str] = frozenset()
    deny: frozenset[str] = frozenset()
    reason: str | None = None
    """Why the ACL is empty/closed (e.g. ``"acl_unreadable: truncated descriptor"``); ``None`` if read normally."""

    @classmethod
    def nobody(cls, reason: str) -> "Acl":
        """The fail-closed ACL: readable by no principal at all."""
        return cls(frozenset(), frozenset(), reason)

    def readable_by(self, principals: frozenset[str]) -> bool:
        """Whether a user holding ``principals`` may read. An empty set never reads anything."""
        if not principals:
            return False
        return bool(self.allow & principals) and not (self.deny & principals)

    def digest(self) -> str:
        """Stable hex SHA-256 of (allow, deny): equal digests ⇔ same rights. Used by the state DB
        to detect ACL-only changes and by the audit log."""
        blob = json.dumps([sorted(self.allow), sorted(self.deny)], separators=(",", ":"))
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


class BlockKind(str, Enum):
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


@dataclass(frozen=True)
class Chunk:
    """A piece of a document's text as indexed: ``chunk_index`` is 0…n-1 in reading order,
    ``heading_path`` the headings above it (outermost first), ``text`` at most about the configured
    target size in characters (a single oversized table row or sentence may exceed it); ``ocr``:
    some of its text was read by OCR (see :attr:`Block.ocr`)."""

    doc_id: str
    chunk_index: int
    text: str
    heading_path: tuple[str, ...] = ()
    ocr: bool = False

    @property
    def point_id(self) -> str:
        """``uuid5(POINT_NAMESPACE, "doc_id:chunk_index")`` as a string: re-indexing is idempotent."""
        return point_id(self.doc_id, self.chunk_index)


def point_id(doc_id: str, chunk_index: int) -> str:
    """The Qdrant point id of chunk ``chunk_index`` of ``doc_id`` (a UUID string)."""
    return str(uuid.uuid5(POINT_NAMESPACE, f"{doc_id}:{chunk_index}"))


@dataclass(frozen=True)
class ChunkPayload:
    """The Qdrant payload of one point (docs/ARCHITECTURE.md "Data model and the rights filter"). ``location`` is the UNC folder
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
        }

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> "ChunkPayload":
        """Inverse of :meth:`to_dict`; raises ``KeyError`` on a payload missing a field."""
        return cls(
            source=str(d["source"]),
            doc_id=str(d["doc_id"]),
            path=str(d["path"]),
            filename=str(d["filename"]),
            location=str(d.get("location", "")),
            chunk_index=int(d["chunk_index"]),  # type: ignore[arg-type]
            text=str(d["text"]),
            acl_allow=tuple(d.get("acl_allow") or ()),  # type: ignore[arg-type]
            acl_deny=tuple(d.get("acl_deny") or ()),  # type: ignore[arg-type]
            content_hash=str(d.get("content_hash", "")),
            indexed_at=float(d.get("indexed_at", 0.0)),  # type: ignore[arg-type]
            heading_path=tuple(d.get("heading_path") or ()),  # type: ignore[arg-type]
            collection=str(d.get("collection", "documents")),
            ocr=bool(d.get("ocr", False)),
        )


@dataclass(frozen=True)
class StoredPoint:
    """A point as read back from the store: id, payload, and the search score when it came from a
    vector search (cosine similarity, higher is better), else ``None``."""

    id: str
    payload: ChunkPayload
    score: float | None = None


@dataclass(frozen=True)
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


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold_name(name: str) -> str:
    """The form account and group names are compared in: NFC, surrounding spaces removed, and
    only ASCII ``A``–``Z`` lowercased. Never Unicode case folding: ``str.casefold`` turns
    ``jeß.rossi`` and ``jeſs.rossi`` into ``jess.rossi``, two accounts that Open WebUI (and AD's
    sign-in) keep apart; exact matching after this fold cannot merge them."""
    return unicodedata.normalize("NFC", name).strip().translate(_ASCII_LOWER)
