"""Calibration of the scale bench's clustered vectors on the e5 model's own (``scale_clustered``).

The bench cannot embed a million chunks with e5 on 2 cores (~45 h), so its vectors are
synthetic; this module makes their geometry the model's. Once per machine, the generated French
business documents of :mod:`scale_french` (≈3,000 chunks in 200 documents of 12 kinds) and their
questions are embedded with ``e5-local`` (passages and queries with the model's prefixes) and cached
(``$ANCRE_BENCH_CACHE`` or ``~/.cache/ancre/bench``). From them:

- the **levels**: the mean cosine of two chunks of one document, of two documents of one kind
  (a cluster), of two kinds, and of a question to the chunk it asks about; a synthetic vector is
  ``√common·m + √cluster·c + √doc·d + √chunk·e`` (``m`` shared by all, ``c`` its cluster's, ``d``
  its document's, ``e`` its own), which gives these cosines in expectation, and a question is its
  document's centre (the vector without ``e``) plus noise of its own, scaled to give e5's cosine
  of a question to its chunk — so, as with e5, a question is about as close to every chunk of its
  document, and its nearest chunks are a few hundredths of cosine apart;
- the **spectrum**: the eigenvalues of the e5 chunks' covariance around their mean — real
  embeddings spread over a few dozen directions, not 384 alike — so ``c``, ``d``, ``e`` and a
  question's noise are drawn with that spectrum (in a random rotation), not isotropically.

:func:`stats` measures the same figures on any set of vectors (plus each question's nearest
chunks: the cosine of the 1st and 30th, and the share of its top 30 in its own cluster), and the
bench prints e5's beside the synthetic corpus's (:func:`compare`). Not a test: a module of the
bench.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DIM = 384
K = 30
CALIBRATION_DOCS = 200
CALIBRATION_SEED = 23
MODEL = "multilingual-e5-small"


def cache_dir() -> Path:
    """Where the e5 vectors are kept between runs: ``$ANCRE_BENCH_CACHE`` or ``~/.cache/ancre/bench``."""
    return Path(os.environ.get("ANCRE_BENCH_CACHE", Path.home() / ".cache" / "ancre" / "bench"))


@dataclass(frozen=True)
class Embedded:
    """The calibration corpus embedded: ``chunks`` ``(n, 384)``, ``doc_of`` / ``cluster_of``
    ``(n,)`` (a document's cluster is its kind), ``questions`` ``(q, 384)``, ``question_row``
    ``(q,)``: the chunk each question asks about."""

    chunks: np.ndarray
    doc_of: np.ndarray
    cluster_of: np.ndarray
    questions: np.ndarray
    question_row: np.ndarray


def e5_vectors() -> Embedded:
    """The calibration corpus embedded with e5-local, from the cache when the generator's source
    and the model are the ones cached (else embedded now: several minutes on 2 cores, once)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import scale_french

    digest = hashlib.sha256((HERE / "scale_french.py").read_bytes()).hexdigest()[:12]
    path = cache_dir() / f"e5-{MODEL}-french-{CALIBRATION_DOCS}-{CALIBRATION_SEED}-{digest}.npz"
    docs, questions = scale_french.corpus(CALIBRATION_DOCS, CALIBRATION_SEED)
    starts = np.cumsum([0] + [len(d.chunks) for d in docs])
    kinds = sorted({d.kind for d in docs})
    doc_of = np.repeat(np.arange(len(docs)), [len(d.chunks) for d in docs])
    cluster_of = np.asarray([kinds.index(docs[d].kind) for d in doc_of])
    rows = np.asarray([starts[q.doc] + q.chunk for q in questions])
    if path.exists():
        cached = np.load(path)
        return Embedded(cached["chunks"], doc_of, cluster_of, cached["questions"], rows)
    from ancre.index.e5_local import E5LocalEmbedder

    t0 = time.perf_counter()
    e5 = E5LocalEmbedder(MODEL)
    chunks = np.asarray(e5.embed_documents([c for d in docs for c in d.chunks]), dtype=np.float32)
    qv = np.stack([e5.embed_query(q.text) for q in questions]).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, chunks=chunks, questions=qv)
    print(f"calibration: {len(chunks)} chunks embedded with e5 in {time.perf_counter() - t0:.0f} s, cached in {path}",
          file=sys.stderr, flush=True)
    return Embedded(chunks, doc_of, cluster_of, qv, rows)


@dataclass(frozen=True)
class Stats:
    """Cosine figures of a set of vectors (means): two chunks of one document, of one cluster
    (other documents), of two clusters; a question to its chunk, to its nearest and 30th nearest
    chunk; the share of its top 30 in its own cluster; the effective dimension of the chunks
    (participation ratio of their covariance's eigenvalues)."""

    same_doc: float
    same_cluster: float
    other_cluster: float
    question_to_chunk: float
    question_top1: float
    question_top30: float
    top30_in_cluster: float
    effective_dim: float

    def rounded(self) -> dict[str, float]:
        """The figures rounded to 3 decimals (1 for the dimension)."""
        return {k: round(v, 1 if k == "effective_dim" else 3) for k, v in asdict(self).items()}


def _pair_means(x: np.ndarray, doc_of: np.ndarray, cluster_of: np.ndarray, rng: np.random.Generator) -> tuple[float, float, float]:
    n = len(x)
    a, b = rng.integers(n, size=200_000), rng.integers(n, size=200_000)
    keep = a != b
    a, b = a[keep], b[keep]
    cos = np.einsum("ij,ij->i", x[a], x[b])
    same_doc = doc_of[a] == doc_of[b]
    same_cl = (cluster_of[a] == cluster_of[b]) & ~same_doc
    other = cluster_of[a] != cluster_of[b]
    within = []  # pairs inside documents are rare among random pairs: take them directly
    for d in np.unique(doc_of)[:400]:
        rows = np.flatnonzero(doc_of == d)
        g = x[rows] @ x[rows].T
        within.append(g[np.triu_indices(len(rows), 1)])
    doc_mean = float(np.mean(np.concatenate(within))) if within else float(np.mean(cos[same_doc]))
    return doc_mean, float(np.mean(cos[same_cl])), float(np.mean(cos[other]))


def stats(chunks: np.ndarray, doc_of: np.ndarray, cluster_of: np.ndarray, questions: np.ndarray, question_row: np.ndarray) -> Stats:
    """:class:`Stats` of ``chunks`` (unit rows) and ``questions`` (unit rows, each about chunk
    ``question_row[i]``)."""
    rng = np.random.default_rng(1)
    same_doc, same_cluster, other = _pair_means(chunks, doc_of, cluster_of, rng)
    sims = questions @ chunks.T
    order = np.argsort(-sims, axis=1)[:, :K]
    top = np.take_along_axis(sims, order, axis=1)
    own = cluster_of[question_row][:, None] == cluster_of[order]
    centred = chunks - chunks.mean(axis=0)
    ev = np.linalg.eigvalsh(np.cov(centred, rowvar=False))
    return Stats(
        same_doc=same_doc, same_cluster=same_cluster, other_cluster=other,
        question_to_chunk=float(np.mean(sims[np.arange(len(questions)), question_row])),
        question_top1=float(np.mean(top[:, 0])), question_top30=float(np.mean(top[:, K - 1])),
        top30_in_cluster=float(np.mean(own)), effective_dim=float(ev.sum() ** 2 / np.square(ev).sum()),
    )


@dataclass(frozen=True)
class Calibration:
    """What the clustered corpus is drawn with (see the module doc): the squared weights of the
    four levels (``common + cluster + doc + chunk = 1``), a question's noise scale
    ``question_noise`` (added to its document's centre), the ``spectrum`` (``(384,)`` eigenvalues,
    summing to 1, largest first), and e5's :class:`Stats` they were fitted on."""

    common: float
    cluster: float
    doc: float
    chunk: float
    question_noise: float
    spectrum: np.ndarray
    e5: Stats


def calibrate() -> Calibration:
    """Fit the levels and the spectrum on e5's vectors (:func:`e5_vectors`)."""
    e = e5_vectors()
    s = stats(e.chunks, e.doc_of, e.cluster_of, e.questions, e.question_row)
    common = max(s.other_cluster, 0.0)
    cluster = max(s.same_cluster - s.other_cluster, 0.0)
    doc = max(s.same_doc - s.same_cluster, 0.0)
    chunk = max(1.0 - s.same_doc, 1e-3)
    total = common + cluster + doc + chunk
    # a question is its document's centre (all but the chunk level: |centre|² = 1 - chunk) plus
    # noise of its own: cos(q, a chunk of the document) = centre² / sqrt(centre² + noise²)
    centre = (common + cluster + doc) / total
    noise = float(np.sqrt(max(centre**2 / max(s.question_to_chunk, 1e-3) ** 2 - centre, 0.0)))
    centred = e.chunks - e.chunks.mean(axis=0)
    ev = np.sort(np.clip(np.linalg.eigvalsh(np.cov(centred, rowvar=False)), 0.0, None))[::-1]
    return Calibration(common / total, cluster / total, doc / total, chunk / total, noise, ev / ev.sum(), s)
