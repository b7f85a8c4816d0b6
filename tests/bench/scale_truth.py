"""The scale bench's ground truth: a NumPy brute force over exactly the chunks each user may read
(:class:`Truth`), the reference the store's vector search is measured against (recall@30), with
no code of ancre's rights filter or of the engine in it.

Every chunk written to the store is recorded (:meth:`Truth.record`; after a :meth:`Truth.freeze`
or :meth:`Truth.load`, :meth:`Truth.reopen` records more): its vector in a
float32 file (memory-mapped: a million chunks are 1.5 GB on disk, read in blocks), its document,
and the document's ACL as two bit sets over the principals that ACLs name. A user may read a chunk
when one of its allowed principals is his and none of its denied ones — the ACL rule of
docs/ARCHITECTURE.md, written again here from its statement. Not a test: a module of the bench.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

DIM = 384
BLOCK = 65_536
"""Rows per block of the brute force."""
CLASSES = ((0.0, 0.05, "< 5 %"), (0.05, 0.20, "5–20 %"), (0.20, 0.60, "20–60 %"), (0.60, 1.01, "> 60 %"))
"""Reader classes by the share of the corpus's chunks a user may read: ``(low, high, label)``."""


def reader_class(share: float) -> str:
    """The label of the class of a user who may read ``share`` (0–1) of the chunks."""
    return next(label for low, high, label in CLASSES if low <= share < high)


class Truth:
    """The recorded corpus under ``folder`` (created): vectors, documents, ACL bit sets."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._vectors = open(self.folder / "vectors.f32", "ab")  # noqa: SIM115 - closed by freeze()
        self._doc_rows: list[int] = []
        self.doc_start: dict[str, int] = {}
        self.bits: dict[str, int] = {}
        self._allow: list[int] = []
        self._deny: list[int] = []
        self.rows = 0
        self._x: np.ndarray | None = None
        self._row_doc: np.ndarray | None = None

    def _mask(self, principals: Iterable[str]) -> int:
        out = 0
        for p in principals:
            if p not in self.bits:
                if len(self.bits) >= 64:
                    raise ValueError("the truth keeps at most 64 distinct principals in ACLs")
                self.bits[p] = len(self.bits)
            out |= 1 << self.bits[p]
        return out

    def record(self, pairs: Sequence[tuple[str, object]]) -> None:
        """Record ``(collection, PointWrite)`` pairs of whole documents, in order."""
        vecs = []
        for _, p in pairs:
            pl = p.payload  # type: ignore[attr-defined]
            if pl.chunk_index == 0:
                self.doc_start[pl.doc_id] = self.rows
                self._allow.append(self._mask(pl.acl_allow))
                self._deny.append(self._mask(pl.acl_deny))
            self._doc_rows.append(len(self._allow) - 1)
            vecs.append(p.vector)  # type: ignore[attr-defined]
            self.rows += 1
        self._vectors.write(np.asarray(vecs, dtype=np.float32).tobytes())

    def freeze(self) -> None:
        """End the recording; write what :meth:`load` reads back."""
        self._vectors.close()
        np.save(self.folder / "row_doc.npy", np.asarray(self._doc_rows, dtype=np.int32))
        np.save(self.folder / "acl.npy", np.asarray([self._allow, self._deny], dtype=np.uint64))
        (self.folder / "truth.json").write_text(json.dumps({"bits": self.bits, "doc_start": self.doc_start}), encoding="utf-8")
        self._open()

    @classmethod
    def load(cls, folder: Path) -> Truth:
        """A frozen truth read back (a kept store's ``--remeasure``)."""
        t = cls.__new__(cls)
        t.folder = Path(folder)
        meta = json.loads((t.folder / "truth.json").read_text(encoding="utf-8"))
        t.bits, t.doc_start = meta["bits"], meta["doc_start"]
        t._open()
        return t

    def reopen(self) -> None:
        """Record more chunks after :meth:`freeze` or :meth:`load` (the chunks a bench writes after
        the ingest, so that a later ``--remeasure`` compares with the store as it is); until the
        next :meth:`freeze` the truth answers for what it held before."""
        assert self._row_doc is not None
        self._vectors = open(self.folder / "vectors.f32", "ab")  # noqa: SIM115 - closed by freeze()
        self._doc_rows = [int(r) for r in self._row_doc]
        self._allow = [int(a) for a in self._allow_bits]
        self._deny = [int(d) for d in self._deny_bits]

    def next_doc(self) -> int:
        """One more than the highest recorded ``bench:<number>`` document (0 if none): the number
        of a document no recorded one has."""
        return 1 + max((int(d.split(":", 1)[1]) for d in self.doc_start), default=-1)

    def _open(self) -> None:
        self._row_doc = np.load(self.folder / "row_doc.npy")
        self.rows = len(self._row_doc)
        acl = np.load(self.folder / "acl.npy")
        self._allow_bits, self._deny_bits = acl[0], acl[1]
        self._x = np.memmap(self.folder / "vectors.f32", dtype=np.float32, mode="r", shape=(self.rows, DIM))

    def readable(self, principals: frozenset[str]) -> np.ndarray:
        """``(rows,)`` bool: the chunks ``principals`` may read (allow ∩ P ≠ ∅, deny ∩ P = ∅)."""
        assert self._row_doc is not None
        m = np.uint64(sum(1 << b for p, b in self.bits.items() if p in principals))
        docs = ((self._allow_bits & m) != 0) & ((self._deny_bits & m) == 0)
        return docs[self._row_doc]

    def share(self, principals: frozenset[str]) -> float:
        """The share (0–1) of the recorded chunks ``principals`` may read."""
        return float(self.readable(principals).mean())

    def row_of(self, doc_id: str, chunk_index: int) -> int:
        """The recorded row of a chunk (``-1``: not recorded, e.g. written after the ingest)."""
        start = self.doc_start.get(doc_id)
        return -1 if start is None else start + chunk_index

    def top(self, queries: np.ndarray, users: Sequence[frozenset[str]], k: int) -> list[np.ndarray]:
        """For each query ``(d,)`` of ``queries`` and its user: the rows of the ``k`` chunks of
        highest cosine among those he may read, best first (fewer when he reads fewer)."""
        assert self._x is not None
        masks = [self.readable(u) for u in users]
        best_s = np.full((len(users), 0), -np.inf, dtype=np.float32)
        best_r = np.zeros((len(users), 0), dtype=np.int64)
        q = np.asarray(queries, dtype=np.float32)
        for lo in range(0, self.rows, BLOCK):
            hi = min(lo + BLOCK, self.rows)
            s = q @ np.asarray(self._x[lo:hi]).T
            for i, m in enumerate(masks):
                s[i, ~m[lo:hi]] = -np.inf
            rows = np.broadcast_to(np.arange(lo, hi), s.shape)
            cs = np.concatenate([best_s, s], axis=1)
            cr = np.concatenate([best_r, rows], axis=1)
            keep = np.argsort(-cs, axis=1, kind="stable")[:, :k]
            best_s, best_r = np.take_along_axis(cs, keep, 1), np.take_along_axis(cr, keep, 1)
        return [r[np.isfinite(s)] for s, r in zip(best_s, best_r, strict=True)]
