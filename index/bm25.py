"""BM25 keyword index over the chunks of both collections (docs/ARCHITECTURE.md "Data flow of indexing" and "Query" step 2).

The daemon rebuilds a :class:`Bm25Index` from Qdrant (the truth) after each pass that changed the
index and publishes it through :class:`Bm25Manager`, which writes a numbered generation folder and
swaps a ``CURRENT`` pointer atomically; query processes call :meth:`Bm25Manager.get`, which reloads
when the generation moved. The index is a snapshot: rights never come from it, every hit is re-read
from Qdrant with the rights filter.

Scoring is ``bm25s`` (sparse precomputed scores, numpy), fed with ids from our own French tokenizer
(:func:`ancre.index.tokenize.tokenize`). Method ``"lucene"`` (k1 = 1.2, b = 0.75): its IDF
``ln(1 + (N - df + 0.5) / (df + 0.5))`` is > 0 for every df ≤ N, so a term found in half or all
of the chunks still scores > 0 — classic Robertson IDF is ≤ 0 there (Kamphuis et al., ECIR 2020,
"Which BM25 do you mean?"). BM25+/BM25L were not chosen: they add a score to *every* document
for each query term, so "only score > 0" would no longer mean "matched".
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from ancre.errors import StoreError
from ancre.index.durable import fsync_dir
from ancre.index.keywords import chunk_terms
from ancre.index.tokenize import TOKENIZER_VERSION, tokenize
from ancre.models import Acl, Grant

log = logging.getLogger(__name__)
# bm25s sets its own logger to DEBUG at import; keep its chatter out of our logs.
logging.getLogger("bm25s").setLevel(logging.WARNING)

K1 = 1.2
B = 0.75
METHOD = "lucene"
FORMAT = 3
"""3: each distinct ACL is ``[allow, deny, grants]``; a format-2 snapshot (``[allow, deny]``, no
grants) still loads; older ones are not loaded and the daemon rebuilds them."""
_LOADABLE_FORMATS = (2, 3)
_META = "entries.json"
_CURRENT = "CURRENT"
_GEN = re.compile(r"^gen-(\d+)$")
_TMP_PREFIX = ".tmp-gen-"


_AclKey = tuple[tuple[str, ...], tuple[str, ...], str]
"""A distinct ACL of a snapshot: sorted allow, sorted deny, canonical JSON of its grants (``""``:
a plain ACL)."""


def _acl_key(entry: Sequence[Any]) -> _AclKey:
    """A saved ``[allow, deny]`` (format 2) or ``[allow, deny, grants]`` entry as an ACL key."""
    allow, deny = entry[0], entry[1]
    grants = str(entry[2]) if len(entry) > 2 else ""
    return (tuple(map(str, allow)), tuple(map(str, deny)), grants)


def _grants_acl(grants: str) -> Acl:
    """The ACL of a snapshot's canonical grants JSON; readable by nobody if it can't be read."""
    try:
        parsed = [Grant.from_dict(g) for g in json.loads(grants)]
    except (ValueError, TypeError, KeyError, AttributeError):
        return Acl.nobody("malformed acl_grants in the BM25 snapshot")
    return Acl.of(parsed)


class Bm25IndexError(StoreError):
    """A saved BM25 index is missing, incomplete, unreadable, or was built by another tokenizer
    version or file format (the daemon's next rebuild replaces it)."""


@dataclass(frozen=True)
class Bm25Entry:
    """One chunk to index: its Qdrant point id (UUID string), collection (``documents`` or
    ``documentation``), text, the document's file name (indexed too), and its ACL as read from the
    store (``acl_allow`` / ``acl_deny`` principals; an empty allow set: readable by nobody; and
    ``acl_grants``, the payload's grants when allow/deny are only the ACL's prefilter)."""

    point_id: str
    collection: str
    text: str
    filename: str
    acl_allow: tuple[str, ...] = ()
    acl_deny: tuple[str, ...] = ()
    acl_grants: tuple[Mapping[str, object], ...] = ()
    header: str = ""
    """The chunk's contextual header (:attr:`~ancre.models.Chunk.header`), indexed too."""


@dataclass(frozen=True)
class Bm25Hit:
    """One BM25 result: point id, collection, and the BM25 score (> 0, higher is better; not
    comparable across index builds)."""

    point_id: str
    collection: str
    score: float


class Bm25Index:
    """An immutable in-memory BM25 index. Build with :meth:`build`, or :meth:`load` a saved one.

    Safe to search from several threads at once.
    """

    def __init__(
        self,
        point_ids: list[str],
        collections: list[str],
        vocab: dict[str, int],
        retriever: bm25s.BM25 | None,
        acls: list[_AclKey] | None = None,
        acl_ids: np.ndarray | None = None,
    ) -> None:
        """Internal: use :meth:`build`, :meth:`empty` or :meth:`load`. ``acls``: the distinct
        ``(allow, deny, grants)`` triples (``grants``: canonical JSON of the payload's
        ``acl_grants``, ``""`` for a plain ACL); ``acl_ids``: ``(n,)`` int32, each chunk's
        triple number."""
        self._point_ids = point_ids
        self._collections = collections
        self._vocab = vocab
        self._retriever = retriever
        self._acls = acls if acls is not None else [((), (), "")]
        self._acl_ids = (
            np.asarray(acl_ids, dtype=np.int32)
            if acl_ids is not None
            else np.zeros(len(point_ids), dtype=np.int32)
        )
        allow_of: dict[str, list[int]] = {}
        deny_of: dict[str, list[int]] = {}
        exact: list[tuple[int, Acl]] = []
        for n, (allow, deny, grants) in enumerate(self._acls):
            if grants:
                exact.append((n, _grants_acl(grants)))
            for p in allow:
                allow_of.setdefault(p, []).append(n)
            for p in deny:
                deny_of.setdefault(p, []).append(n)
        self._allow_of = {p: np.asarray(v, dtype=np.int32) for p, v in allow_of.items()}
        self._deny_of = {p: np.asarray(v, dtype=np.int32) for p, v in deny_of.items()}
        self._exact = exact
        """ACL numbers whose grants decide beyond the allow/deny prefilter, with their ACL."""

    @classmethod
    def empty(cls) -> Bm25Index:
        """An index of no chunks: every search returns ``[]``."""
        return cls([], [], {}, None)

    def readable_mask(self, principals: frozenset[str]) -> np.ndarray:
        """``(n,)`` bool: which chunks a user holding ``principals`` may read according to the
        ACLs recorded in this snapshot (``allow ∩ P ≠ ∅`` and ``deny ∩ P = ∅``, then, for an ACL with
        grants, their exact evaluation at the current time; docs/ARCHITECTURE.md "Data model and
        the rights filter"). All ``False`` for an empty set. Cost: O(|P| + distinct ACLs + n)."""
        acl_ok = np.zeros(len(self._acls), dtype=bool)
        if principals:
            for p in principals:
                hit = self._allow_of.get(p)
                if hit is not None:
                    acl_ok[hit] = True
            for p in principals:
                hit = self._deny_of.get(p)
                if hit is not None:
                    acl_ok[hit] = False
            now = time.time()
            for n, acl in self._exact:
                if acl_ok[n]:
                    acl_ok[n] = acl.readable_by(principals, now)
        return acl_ok[self._acl_ids]

    def term_stats(
        self, terms: Sequence[str], principals: frozenset[str] | None = None
    ) -> tuple[int, dict[str, int]]:
        """Document frequencies: ``(chunks, {term: chunks containing it})`` over the whole
        snapshot (``principals`` ``None``), or over the chunks ``principals`` may read per the
        snapshot (what the extractive gate uses). ``terms`` are index terms
        (:func:`~ancre.index.tokenize.tokenize` output); unknown ones count 0."""
        mask = None if principals is None else self.readable_mask(principals)
        n = len(self) if mask is None else int(mask.sum())
        out = dict.fromkeys(terms, 0)
        if self._retriever is None:
            return n, out
        indptr, indices = self._retriever.scores["indptr"], self._retriever.scores["indices"]
        for t in out:
            tid = self._vocab.get(t)
            if tid is not None:
                docs = indices[indptr[tid] : indptr[tid + 1]]
                out[t] = len(docs) if mask is None else int(mask[docs].sum())
        return n, out

    @classmethod
    def build(cls, entries: Sequence[Bm25Entry]) -> Bm25Index:
        """Tokenize ``entries`` (file name, header, text: :func:`~ancre.index.keywords.chunk_terms`)
        and build the index. CPU-bound, single-threaded:
        about 0.3 ms per chunk of ~1 000 characters, 30–40 s for 100 000 chunks on a busy 2-core
        machine, two thirds of it tokenizing (see ``tests/bench/bench_bm25.py``).

        Raises ``ValueError`` if two entries share a point id.
        """
        point_ids = [e.point_id for e in entries]
        if len(set(point_ids)) != len(point_ids):
            raise ValueError("Bm25Index.build: duplicate point ids")
        vocab: dict[str, int] = {}
        corpus_ids: list[list[int]] = []
        acl_numbers: dict[_AclKey, int] = {}
        acl_ids = np.empty(len(entries), dtype=np.int32)
        for i, e in enumerate(entries):
            tokens = chunk_terms(e.filename, e.text, e.header)
            for new in sorted(set(tokens).difference(vocab)):
                vocab[new] = len(vocab)
            corpus_ids.append(list(map(vocab.__getitem__, tokens)))
            grants = json.dumps(list(e.acl_grants), sort_keys=True, separators=(",", ":")) if e.acl_grants else ""
            acl = (tuple(sorted(set(e.acl_allow))), tuple(sorted(set(e.acl_deny))), grants)
            acl_ids[i] = acl_numbers.setdefault(acl, len(acl_numbers))
        collections = [e.collection for e in entries]
        acls = list(acl_numbers) or [((), (), "")]
        if not vocab:  # no entries, or nothing but stop words: nothing can ever match
            return cls(point_ids, collections, {}, None, acls, acl_ids)
        retriever = bm25s.BM25(k1=K1, b=B, method=METHOD)
        retriever.index((corpus_ids, vocab), create_empty_token=False, show_progress=False)
        return cls(point_ids, collections, vocab, retriever, acls, acl_ids)

    def __len__(self) -> int:
        """Number of chunks indexed."""
        return len(self._point_ids)

    def search(self, query: str, k: int, principals: frozenset[str] | None = None) -> list[Bm25Hit]:
        """The ``k`` best chunks for ``query``, best first, only those scoring > 0 (sharing at
        least one term with the query). Ties are broken by insertion order. Returns ``[]`` for an
        empty index, ``k <= 0``, or a query made only of stop words or terms the index lacks.

        ``principals``: score only the chunks this user may read according to the snapshot's ACLs
        (:meth:`readable_mask`); an empty set returns ``[]`` (fail closed). ``None`` searches the
        whole snapshot (index maintenance and benchmarks only: the query core always passes the
        user's principals). IDF stays that of the whole snapshot either way.
        """
        if self._retriever is None or k <= 0:
            return []
        if principals is not None and not principals:
            return []
        ids = [self._vocab[t] for t in dict.fromkeys(tokenize(query)) if t in self._vocab]
        if not ids:
            return []
        mask = None if principals is None else self.readable_mask(principals)
        scores = self._retriever.get_scores_from_ids(ids, weight_mask=mask)
        candidates = np.flatnonzero(scores > 0)
        if len(candidates) > k:
            # keep every candidate tied with the k-th score, then order and cut
            kth = np.partition(scores[candidates], len(candidates) - k)[len(candidates) - k]
            candidates = candidates[scores[candidates] >= kth]
        order = np.lexsort((candidates, -scores[candidates]))[:k]
        return [
            Bm25Hit(self._point_ids[i], self._collections[i], float(scores[i]))
            for i in candidates[order].tolist()
        ]

    def save(self, directory: Path) -> None:
        """Write the index into ``directory`` (created if needed; existing files of the same names
        are overwritten). Not atomic by itself: :class:`Bm25Manager` makes publishing atomic."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if self._retriever is not None:
            self._retriever.save(str(directory), show_progress=False)
        meta = {
            "format": FORMAT,
            "tokenizer": TOKENIZER_VERSION,
            "has_scores": self._retriever is not None,
            "point_ids": self._point_ids,
            "collections": self._collections,
            "acls": [[list(a), list(d), g] for a, d, g in self._acls],
            "acl_ids": self._acl_ids.tolist(),
        }
        (directory / _META).write_text(json.dumps(meta, separators=(",", ":")), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> Bm25Index:
        """Read an index written by :meth:`save`. Raises :class:`Bm25IndexError` if files are
        missing or unreadable, or the index was built with another tokenizer or file format."""
        directory = Path(directory)
        try:
            meta = json.loads((directory / _META).read_text(encoding="utf-8"))
            if meta.get("format") not in _LOADABLE_FORMATS or meta.get("tokenizer") != TOKENIZER_VERSION:
                raise Bm25IndexError(
                    f"{directory}: built with format {meta.get('format')!r} / tokenizer "
                    f"{meta.get('tokenizer')!r}, expected {FORMAT} / {TOKENIZER_VERSION!r}"
                )
            point_ids = [str(p) for p in meta["point_ids"]]
            collections = [str(c) for c in meta["collections"]]
            acls = [_acl_key(entry) for entry in meta["acls"]]
            acl_ids = np.asarray(meta["acl_ids"], dtype=np.int32)
            if (
                len(point_ids) != len(collections)
                or len(acl_ids) != len(point_ids)
                or not acls
                or (len(acl_ids) and not 0 <= int(acl_ids.min()) <= int(acl_ids.max()) < len(acls))
            ):
                raise Bm25IndexError(f"{directory}: {_META} is inconsistent")
            if not meta["has_scores"]:
                return cls(point_ids, collections, {}, None, acls, acl_ids)
            retriever = bm25s.BM25.load(str(directory), show_progress=False)
        except Bm25IndexError:
            raise
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise Bm25IndexError(f"{directory}: cannot load BM25 index: {e}") from e
        if retriever.scores["num_docs"] != len(point_ids):
            raise Bm25IndexError(
                f"{directory}: scores cover {retriever.scores['num_docs']} chunks, "
                f"{_META} lists {len(point_ids)}"
            )
        return cls(point_ids, collections, dict(retriever.vocab_dict), retriever, acls, acl_ids)


def _fsync_tree(directory: Path) -> None:
    for p in directory.iterdir():
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())
    fsync_dir(directory)


class Bm25Manager:
    """Generations of the BM25 index on disk under ``index_dir``, and the in-memory copy.

    Layout: ``index_dir/gen-<n>/`` (one saved index each) and ``index_dir/CURRENT`` (the text
    ``<n>``). One publisher at a time (the daemon); any number of readers, in any process. A crash
    (even ``kill -9``) at any point of :meth:`publish` leaves the previous generation current and
    loadable; folders of interrupted publishes are ignored and removed by the next publish.
    """

    def __init__(self, index_dir: Path) -> None:
        """``index_dir`` is created on first publish; it may not exist yet."""
        self.index_dir = Path(index_dir)
        self._lock = threading.Lock()
        self._index = Bm25Index.empty()
        self._loaded_gen = 0
        self._failed_gen = 0

    def current_generation(self) -> int:
        """The generation ``CURRENT`` points to; 0 when nothing was ever published. Raises
        :class:`Bm25IndexError` if ``CURRENT`` exists but cannot be read or parsed."""
        try:
            text = (self.index_dir / _CURRENT).read_text(encoding="ascii")
        except FileNotFoundError:
            return 0
        except (OSError, UnicodeDecodeError) as e:
            raise Bm25IndexError(f"{self.index_dir / _CURRENT}: unreadable: {e}") from e
        if not text.strip().isdigit():
            raise Bm25IndexError(f"{self.index_dir / _CURRENT}: not a generation: {text[:40]!r}")
        return int(text)

    def publish(self, index: Bm25Index) -> int:
        """Save ``index`` as a new generation and make it current; returns its number (≥ 1).

        Steps: write ``.tmp-gen-<n>/``, fsync its files, rename it to ``gen-<n>``, fsync the
        folder, write ``CURRENT.tmp`` + fsync + ``os.replace`` onto ``CURRENT``, fsync the folder;
        then remove every generation but this one and the previous one (readers still loading the
        previous one finish), and leftovers of interrupted publishes. Also makes ``index`` this
        manager's in-memory index. Raises ``OSError`` on I/O failure (``CURRENT`` then still names
        the previous generation).
        """
        self.index_dir.mkdir(parents=True, exist_ok=True)
        try:
            previous = self.current_generation()
        except Bm25IndexError:
            previous = 0
        gen = max([previous, *self._numbered_dirs().values()]) + 1
        tmp = self.index_dir / f"{_TMP_PREFIX}{gen}"
        if tmp.exists():
            shutil.rmtree(tmp)
        index.save(tmp)
        _fsync_tree(tmp)
        final = self.index_dir / f"gen-{gen}"
        os.replace(tmp, final)
        fsync_dir(self.index_dir)
        pointer_tmp = self.index_dir / f"{_CURRENT}.tmp"
        with open(pointer_tmp, "w", encoding="ascii") as f:
            f.write(f"{gen}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(pointer_tmp, self.index_dir / _CURRENT)
        fsync_dir(self.index_dir)
        with self._lock:
            self._index, self._loaded_gen, self._failed_gen = index, gen, 0
        self._clean(keep={gen, previous})
        return gen

    def get(self) -> Bm25Index:
        """The index of the current generation, reloaded from disk when ``CURRENT`` moved since
        the last load (one small file read per call). Before any publish: an empty index.

        Never raises for a bad snapshot: if the current generation cannot be loaded, the last good
        index stays in use (empty if none), a warning is logged once per generation, and loading is
        retried when ``CURRENT`` moves again.
        """
        with self._lock:
            for _ in range(3):
                try:
                    gen = self.current_generation()
                except Bm25IndexError as e:
                    log.warning("BM25 index: %s; keeping generation %d", e, self._loaded_gen)
                    return self._index
                if gen in (self._loaded_gen, self._failed_gen) or gen == 0:
                    return self._index
                try:
                    index = Bm25Index.load(self.index_dir / f"gen-{gen}")
                except Bm25IndexError as e:
                    try:
                        moved = self.current_generation() != gen
                    except Bm25IndexError:
                        moved = False
                    if moved:  # a publish removed it while we read: try the newer one
                        continue
                    log.warning("BM25 index: %s; keeping generation %d", e, self._loaded_gen)
                    self._failed_gen = gen
                    return self._index
                self._index, self._loaded_gen = index, gen
                return index
            return self._index

    def is_current(self) -> bool:
        """Whether a published generation exists and is the one loaded in memory (``False`` when
        nothing was published, or the current snapshot can't be loaded — e.g. written by another
        tokenizer version — so the publisher knows to rebuild)."""
        self.get()
        try:
            gen = self.current_generation()
        except Bm25IndexError:
            return False
        with self._lock:
            return gen != 0 and gen == self._loaded_gen

    def _numbered_dirs(self) -> dict[Path, int]:
        found: dict[Path, int] = {}
        if not self.index_dir.is_dir():
            return found
        for p in self.index_dir.iterdir():
            m = _GEN.match(p.name)
            if m:
                found[p] = int(m.group(1))
            elif p.name.startswith(_TMP_PREFIX) and p.name[len(_TMP_PREFIX) :].isdigit():
                found[p] = int(p.name[len(_TMP_PREFIX) :])
        return found

    def _clean(self, keep: set[int]) -> None:
        for p, n in self._numbered_dirs().items():
            if p.name.startswith(_TMP_PREFIX) or n not in keep:
                shutil.rmtree(p, ignore_errors=True)


__all__ = ["Bm25Entry", "Bm25Hit", "Bm25Index", "Bm25IndexError", "Bm25Manager"]
