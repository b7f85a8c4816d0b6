"""The scale bench's first workload, ``structured`` (:class:`Corpus`), and the base the second one
(``clustered``, :mod:`scale_clustered`) builds on: chunks in batches of whole documents with
their texts, vectors, ACLs and collection, the users, the questions and their vectors.

**Texts** are ``bench_bm25``'s synthetic French (Zipfian words, codes, amounts, file names),
generated in batches so that a million chunks never sit in memory; documents go 80 % to
``documents``, 20 % to ``documentation``. **Structured** (this class): documents of 10–20 chunks
with ``bench_retrieval``'s ACLs (40 AD-like groups of Zipfian size, 1–3 allowed per document, 10 %
also Authenticated Users, 8 % deny one group; 300 users in 2–6 groups); each vector is the sum of a
common direction, its document's domain (40), topic (2,000) and own direction, plus noise —
cosine ≈ 0.93 inside a document, ≈ 0.44 between unrelated chunks, so a question (a random
chunk's vector plus noise) has an obvious neighbourhood: the graph's job is easy.

A subclass changes the document sizes, ACLs, vectors, users and questions through the hooks
``_doc_sizes``, ``_doc_acl``, ``_doc_vectors``, ``_keep``, ``make_users`` and ``query_vectors``;
the texts and payloads stay the same. Not a test: a module of the bench.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DIM = 384
DOMAIN = "sid:S-1-5-21-3623811015-3361044348-30300820"
EVERYONE, AUTH_USERS = "sid:S-1-1-0", "sid:S-1-5-11"
N_QUERIES = 200
N_GROUPS, N_USERS = 40, 300
N_DOMAINS, TOPICS_PER_DOMAIN = 40, 50


class Corpus:
    """The ``structured`` workload (module doc): batches of synthetic chunks, users, questions."""

    NAME = "structured"

    def __init__(self, seed: int = 11) -> None:
        if str(HERE) not in sys.path:
            sys.path.insert(0, str(HERE))
        import bench_bm25

        self.rng = np.random.default_rng(seed)
        self.vocab = bench_bm25._vocabulary(np.random.default_rng(7))
        self.probs = bench_bm25._zipf_probs(len(self.vocab))
        self.docs = 0
        self.samples: list[np.ndarray] = []
        self.users = self.make_users()

    def make_users(self) -> list[frozenset[str]]:
        """The users (their principal sets), drawn once at construction."""
        self.groups = [f"{DOMAIN}-{1100 + g}" for g in range(N_GROUPS)]
        gp = 1.0 / np.arange(1, N_GROUPS + 1)
        self.gprobs = gp / gp.sum()
        users = []
        for u in range(N_USERS):
            member = {self.groups[g] for g in self.rng.choice(N_GROUPS, int(self.rng.integers(2, 7)), p=self.gprobs)}
            users.append(frozenset(member | {f"{DOMAIN}-{5000 + u}", EVERYONE, AUTH_USERS}))
        self.mean = self._unit(1)[0]
        self.domains = self._unit(N_DOMAINS)
        self.topics = self._unit(N_DOMAINS * TOPICS_PER_DOMAIN)
        return users

    def _unit(self, k: int) -> np.ndarray:
        x = self.rng.standard_normal((k, DIM)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    # ---------------------------------------------------------------- hooks

    def _doc_sizes(self, n: int) -> list[int]:
        """Chunk counts of the next documents, about ``n`` chunks in all."""
        sizes: list[int] = []
        while sum(sizes) < n:
            sizes.append(int(self.rng.integers(10, 21)))
        return sizes

    def _doc_acl(self, k: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(allow, deny)`` of the ``k``-th document of the batch."""
        rng = self.rng
        allow = {self.groups[g] for g in rng.choice(N_GROUPS, int(rng.integers(1, 4)), p=self.gprobs)}
        if rng.random() < 0.10:
            allow.add(AUTH_USERS)
        deny = (self.groups[int(rng.integers(N_GROUPS))],) if rng.random() < 0.08 else ()
        return tuple(sorted(allow)), deny

    def _doc_vectors(self, size: int) -> np.ndarray:
        """``(size, 384)`` unit vectors of one document's chunks."""
        rng = self.rng
        topic = int(rng.integers(len(self.topics)))
        base = 0.9 * self.mean + 0.6 * self.domains[topic // TOPICS_PER_DOMAIN] + 0.6 * self.topics[topic] + 0.45 * self._unit(1)[0]
        vecs = base + rng.standard_normal((size, DIM)).astype(np.float32) * (0.35 / np.sqrt(DIM))
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)

    def _keep(self, vecs: np.ndarray, allow: tuple[str, ...], deny: tuple[str, ...]) -> None:
        """Perhaps keep one of a document's vectors as the source of a question."""
        if self.rng.random() < 0.05 and len(self.samples) < 2 * N_QUERIES:
            self.samples.append(vecs[0])

    def query_vectors(self, n: int, users: list[frozenset[str]]) -> np.ndarray:
        """``n`` query vectors, the ``i``-th asked by ``users[i]``: sampled chunk vectors plus
        noise (cosine ≈ 0.9 to their chunk), whoever asks."""
        rng = np.random.default_rng(9)
        base = np.asarray([self.samples[i % len(self.samples)] for i in range(n)])
        q = base + rng.standard_normal((n, DIM)).astype(np.float32) * (0.5 / np.sqrt(DIM))
        return q / np.linalg.norm(q, axis=1, keepdims=True)

    def askers(self, n: int) -> list[frozenset[str]]:
        """Who asks each of ``n`` questions: random users."""
        rng = np.random.default_rng(3)
        return [self.users[int(rng.integers(len(self.users)))] for _ in range(n)]

    # ---------------------------------------------------------------- what the bench calls

    def questions(self, n: int) -> list[str]:
        """``n`` synthetic French questions over the corpus's content words (bench_bm25's way)."""
        content = np.arange(30, len(self.vocab))
        cp = self.probs[30:] / self.probs[30:].sum()
        rng = np.random.default_rng(5)
        out = []
        for q in range(n):
            picked = [self.vocab[j] for j in rng.choice(content, size=int(rng.integers(2, 6)), p=cp)]
            if q % 10 == 0:
                picked.append(f"WD-EXCL-{q % 1000:03d}")
            out.append(f"Quel est le {' '.join(picked)} ?")
        return out

    def batch(self, n: int) -> list[tuple[str, object]]:
        """About ``n`` chunks (whole documents): ``(collection, PointWrite)`` pairs."""
        from ancre.index.store import PointWrite
        from ancre.models import ChunkPayload, point_id

        rng = self.rng
        sizes = self._doc_sizes(n)
        total = sum(sizes)
        draws = rng.choice(len(self.vocab), size=(total, 150), p=self.probs)
        extras = rng.random((total, 3))
        out: list[tuple[str, object]] = []
        row = 0
        for k, size in enumerate(sizes):
            d = self.docs
            self.docs += 1
            coll = "documentation" if rng.random() < 0.2 else "documents"
            allow, deny = self._doc_acl(k)
            vecs = self._doc_vectors(size)
            self._keep(vecs, allow, deny)
            name = f"{d:07d}_{self.vocab[draws[row, 0]]}_{self.vocab[draws[row, 1]]}.docx"
            doc_id = f"bench:{d:07d}"
            for j in range(size):
                words = [self.vocab[w] for w in draws[row]]
                for pos in range(14, 150, 15):
                    words[pos] += "."
                if extras[row, 0] < 0.10:
                    words[int(extras[row, 1] * 140)] = f"WD-EXCL-{int(extras[row, 2] * 1000):03d}"
                if extras[row, 1] < 0.20:
                    words[int(extras[row, 2] * 140)] = f"CHF {int(extras[row, 0] * 100)} {int(extras[row, 2] * 900 + 100)} HT"
                payload = ChunkPayload(
                    source="bench", doc_id=doc_id, path=f"ARCHIVES/{name}", filename=name,
                    location="\\\\SRV-FICHIERS\\Partage\\ARCHIVES\\", chunk_index=j, text=" ".join(words),
                    acl_allow=allow, acl_deny=deny, content_hash=f"{d:064x}", indexed_at=1.7e9,
                    heading_path=("Archives",), collection=coll,
                )
                out.append((coll, PointWrite(point_id(doc_id, j), vecs[j], payload)))
                row += 1
        return out
