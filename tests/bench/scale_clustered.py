"""The scale bench's second workload, ``clustered`` (:class:`ClusteredCorpus`): the one that does
not flatter the graph (issue 44). Texts and payloads as the ``structured`` one
(:mod:`scale_corpus`); what differs:

- **Vectors** around ``n / 400`` cluster centres (a cluster: one kind of business text — the
  maintenance contracts, the HR notes…), each the sum of a common direction, its cluster's, its
  document's and its own, with the levels and the spectrum of e5's embeddings of generated French
  business documents (:mod:`scale_calibration`): two unrelated chunks are as close as e5 makes two
  French business texts, and a question's true top 30 lies among the hundreds of chunks of its
  cluster, a few hundredths of cosine apart.
- **Groups**: 60 AD groups of Zipf(1.2) popularity (a long tail). A document allows 1–3 of them,
  the first its cluster's group with probability ``acl_cluster_correlation`` (a folder's rights
  follow its content: whole neighbourhoods are unreadable to a user); 7 % of the documents deny a
  group; 4 % allow Authenticated Users — short notices of 2–4 chunks (≈ 0.7 % of the chunks), the
  rest 10–20 chunks.
- **Users**: 40, whose memberships are chosen so that they may read from ~1 % to ~60 % of the
  chunks (targets spaced evenly on a log scale), the narrow ones in the tail's groups.
- **Questions**: 200, five per user; half about a document the asker may read, half about any
  document (a question about what he may not read must find his nearest readable chunks,
  wherever they are). A question is its document's centre plus noise, with e5's cosine of a
  question to its chunk (:mod:`scale_calibration`).

Not a test: a module of the bench.
"""

from __future__ import annotations

import numpy as np
from scale_calibration import Calibration, Embedded, Stats, stats
from scale_corpus import AUTH_USERS, DIM, DOMAIN, EVERYONE, N_QUERIES, Corpus

N_GROUPS = 60
ZIPF = 1.2
N_USERS = 40
SHARES = (0.01, 0.60)
DENY_SHARE = 0.07
AUTH_USERS_DOCS = 0.04
CANDIDATES = 4_000
"""Chunks kept as possible sources of questions (a reservoir over the whole ingest)."""


def _rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((DIM, DIM)))
    return (q * np.sign(np.diag(r))).astype(np.float32)


class ClusteredCorpus(Corpus):
    """The ``clustered`` workload (module doc) for a corpus of about ``n_total`` chunks."""

    NAME = "clustered"

    def __init__(
        self, n_total: int, calibration: Calibration, *, seed: int = 13, chunks_per_cluster: int = 400,
        readable_questions: float = 0.5, acl_cluster_correlation: float = 0.6,
    ) -> None:
        self.cal = calibration
        self.n_clusters = max(1, n_total // chunks_per_cluster)
        self.readable_questions = readable_questions
        self.correlation = acl_cluster_correlation
        self._candidates: list[tuple[np.ndarray, tuple[str, ...], tuple[str, ...]]] = []
        self._seen = 0
        super().__init__(seed)

    def noise(self, k: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """``(k, 384)`` draws with e5's spectrum (in this corpus's rotation), ``E|x|² = 1``."""
        z = (rng or self.rng).standard_normal((k, DIM)).astype(np.float32)
        return z @ self._basis

    def make_users(self) -> list[frozenset[str]]:
        rng = self.rng
        self._basis = (np.sqrt(self.cal.spectrum)[:, None] * _rotation(rng)).astype(np.float32)
        self.mean = rng.standard_normal(DIM).astype(np.float32)
        self.mean /= np.linalg.norm(self.mean)
        self.centres = self.noise(self.n_clusters)
        self.groups = [f"{DOMAIN}-{2100 + g}" for g in range(N_GROUPS)]
        gp = 1.0 / np.arange(1, N_GROUPS + 1) ** ZIPF
        self.gprobs = gp / gp.sum()
        self.primary = rng.choice(N_GROUPS, self.n_clusters, p=self.gprobs)
        self._doc_cluster: list[int] = []
        self._doc_au: list[bool] = []
        return self._fit_users(np.random.default_rng(rng.integers(2**32)))

    def _sample_acls(self, rng: np.random.Generator, n_docs: int = 30_000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """ACLs of ``n_docs`` documents drawn as the corpus draws them: ``(allow, deny)`` as
        ``(n_docs, groups)`` bools and the documents' chunk counts (AU documents allow all)."""
        allow = np.zeros((n_docs, N_GROUPS), dtype=bool)
        deny = np.zeros((n_docs, N_GROUPS), dtype=bool)
        sizes = np.zeros(n_docs)
        for d in range(n_docs):
            au = rng.random() < AUTH_USERS_DOCS
            sizes[d] = rng.integers(2, 5) if au else rng.integers(10, 21)
            a, dn = self._acl_for(int(rng.integers(self.n_clusters)), au, rng)
            if au:
                allow[d, :] = True
            for g in a:
                allow[d, g] = True
            for g in dn:
                deny[d, g] = True
        return allow, deny, sizes

    def _acl_for(self, cluster: int, au: bool, rng: np.random.Generator) -> tuple[list[int], list[int]]:
        """Group indexes allowed and denied for a document of ``cluster``."""
        k = int(rng.integers(1, 4))
        first = int(self.primary[cluster]) if rng.random() < self.correlation else int(rng.choice(N_GROUPS, p=self.gprobs))
        allow = {first, *(int(g) for g in rng.choice(N_GROUPS, k - 1, p=self.gprobs))}
        deny: list[int] = []
        if rng.random() < DENY_SHARE:
            g = int(rng.choice(N_GROUPS, p=self.gprobs))
            if g not in allow:
                deny.append(g)
        return sorted(allow), deny

    def _fit_users(self, rng: np.random.Generator) -> list[frozenset[str]]:
        """40 users whose readable shares (on a sample of the corpus's ACLs) come closest to
        targets from 1 % to 60 %: groups added greedily, each time the one that brings the share
        closest to the target without passing it by more than 10 %."""
        allow, deny, sizes = self._sample_acls(rng)
        total = sizes.sum()
        users = []
        for u, target in enumerate(np.geomspace(*SHARES, N_USERS)):
            member = np.zeros(N_GROUPS, dtype=bool)

            def share(m: np.ndarray) -> float:
                ok = allow[:, m].any(axis=1) | allow.all(axis=1)  # AU documents: everyone
                ok &= ~deny[:, m].any(axis=1)
                return float(sizes[ok].sum() / total)

            current = share(member)
            for _ in range(N_GROUPS):
                if current >= 0.9 * target:
                    break
                options = []
                for g in rng.permutation(N_GROUPS):
                    if not member[g]:
                        trial = member.copy()
                        trial[g] = True
                        s = share(trial)
                        if current < s <= 1.1 * target:
                            options.append((abs(target - s), g, s))
                if not options:
                    break
                _, g, current = min(options)
                member[g] = True
            users.append(frozenset({self.groups[g] for g in np.flatnonzero(member)} | {f"{DOMAIN}-{7000 + u}", EVERYONE, AUTH_USERS}))
        return users

    # ---------------------------------------------------------------- hooks

    def _doc_sizes(self, n: int) -> list[int]:
        sizes: list[int] = []
        self._doc_cluster, self._doc_au = [], []
        while sum(sizes) < n:
            au = bool(self.rng.random() < AUTH_USERS_DOCS)
            sizes.append(int(self.rng.integers(2, 5)) if au else int(self.rng.integers(10, 21)))
            self._doc_au.append(au)
            self._doc_cluster.append(int(self.rng.integers(self.n_clusters)))
        return sizes

    def _doc_acl(self, k: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        allow, deny = self._acl_for(self._doc_cluster[k], self._doc_au[k], self.rng)
        names = {self.groups[g] for g in allow} | ({AUTH_USERS} if self._doc_au[k] else set())
        self._cluster = self._doc_cluster[k]
        return tuple(sorted(names)), tuple(self.groups[g] for g in deny)

    def _doc_vectors(self, size: int) -> np.ndarray:
        c = self.cal
        base = np.sqrt(c.common) * self.mean + np.sqrt(c.cluster) * self.centres[self._cluster] + np.sqrt(c.doc) * self.noise(1)[0]
        self._base = base
        vecs = base + np.sqrt(c.chunk) * self.noise(size)
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)

    def _keep(self, vecs: np.ndarray, allow: tuple[str, ...], deny: tuple[str, ...]) -> None:
        """Reservoir sampling of documents (each equally likely) as the subjects of questions:
        their centre (the vector of their chunks without the chunk level)."""
        self._seen += 1
        pick = self._base
        if len(self._candidates) < CANDIDATES:
            self._candidates.append((pick, allow, deny))
        else:
            j = int(self.rng.integers(self._seen))
            if j < CANDIDATES:
                self._candidates[j] = (pick, allow, deny)

    def askers(self, n: int) -> list[frozenset[str]]:
        """Five questions per user, in turn."""
        return [self.users[i % len(self.users)] for i in range(n)]

    def query_vectors(self, n: int, users: list[frozenset[str]]) -> np.ndarray:
        rng = np.random.default_rng(9)
        out = np.zeros((n, DIM), dtype=np.float32)
        for i, user in enumerate(users[:n]):
            pool = self._candidates
            if rng.random() < self.readable_questions:
                mine = [c for c in pool if set(c[1]) & user and not set(c[2]) & user]
                pool = mine or pool
            src = pool[int(rng.integers(len(pool)))][0]
            q = src + self.cal.question_noise * self.noise(1, rng)[0]
            out[i] = q / np.linalg.norm(q)
        return out


def synthetic_like(cal: Calibration, e: Embedded, seed: int = 5) -> Stats:
    """:class:`~scale_calibration.Stats` of synthetic vectors with exactly the calibration
    corpus's structure (its documents, clusters and questions), drawn as
    :class:`ClusteredCorpus` draws them: what the bench prints beside e5's."""
    rng = np.random.default_rng(seed)
    basis = (np.sqrt(cal.spectrum)[:, None] * _rotation(rng)).astype(np.float32)

    def noise(k: int) -> np.ndarray:
        return rng.standard_normal((k, DIM)).astype(np.float32) @ basis

    mean = rng.standard_normal(DIM).astype(np.float32)
    mean /= np.linalg.norm(mean)
    centres = noise(int(e.cluster_of.max()) + 1)
    docs = noise(int(e.doc_of.max()) + 1)
    x = (np.sqrt(cal.common) * mean + np.sqrt(cal.cluster) * centres[e.cluster_of] + np.sqrt(cal.doc) * docs[e.doc_of]
         + np.sqrt(cal.chunk) * noise(len(e.doc_of)))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    centre = np.sqrt(cal.common) * mean + np.sqrt(cal.cluster) * centres[e.cluster_of] + np.sqrt(cal.doc) * docs[e.doc_of]
    q = centre[e.question_row] + cal.question_noise * noise(len(e.question_row))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return stats(x, e.doc_of, e.cluster_of, q, e.question_row)


__all__ = ["N_QUERIES", "ClusteredCorpus", "synthetic_like"]
