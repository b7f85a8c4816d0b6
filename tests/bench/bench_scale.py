"""Scale benchmark: the embedded store at 100k, 300k (and, with ``--scale-1m``, 1M) chunks on this
machine's cores — retrieval latency sequential and with 2 threads, during an index build, the
recall of the fast path against exact search, keyword freshness after a one-file change, the
memory of the build process and of a query process, and 20 concurrent users.

Run: ``.venv/bin/python tests/bench/run.py --only scale [--scale-1m]`` or
``.venv/bin/python tests/bench/bench_scale.py [--sizes 100000,300000] [--scale-1m]`` (a command,
not a test). Each size runs in its own child process (its peak memory is its own), and the query
process is another fresh child. With ``ANCRE_BENCH_SCALE_KEEP=1`` the store of a size is kept
(its folder printed on stderr, a stage per line as it ends), and
``bench_scale.py --remeasure <folder>`` runs every measure after the ingest again on it — a
million chunks take ~50 minutes to ingest and build on 2 cores, the measures ~10.

**Data.** Chunk texts are ``bench_bm25``'s synthetic French (Zipfian words, codes, amounts, file
names), generated in batches so that a million chunks never sit in memory. Documents of 10–20
chunks, 80 % in ``documents``, 20 % in ``documentation``, with ``bench_retrieval``'s ACLs (40
AD-like groups of Zipfian size, 1–3 allowed per document, 10 % also Authenticated Users, 8 % deny
one group; 300 users in 2–6 groups). **Vectors** are not e5's (embedding a million chunks on 2
cores takes ~45 h) but have the structure of real embeddings, which uniform random vectors lack
(there, all points are equally far and no index can tell the nearest): each is the sum of a common
direction, its document's domain (40), topic (2,000) and own direction, plus noise — cosine ≈ 0.93
inside a document, ≈ 0.44 between unrelated chunks. A query is a random chunk's vector plus noise,
asked by a random user with his rights filter, with a synthetic French question for BM25.

**Measured**, per size:

- *ingest*: bulk upserts of 2,048 points (the payload with its index terms), and the index builds
  the store runs after them (:meth:`EdgeStore.maintain`: a separate process on a copy; one build
  per 250,000 points, the store's largest segment) — seconds, and the build process's peak RSS;
- *retrieval* (``Retriever.retrieve``: vector top 30 in both collections with the rights filter,
  BM25 top 30 in the store under the same filter, RRF; no LLM, query vectors precomputed):
  p50/p95/p99 sequential over the workload once (the first pass: pages of the memory-mapped
  store read from disk as the questions need them), then the same questions again (the steady
  state, the row the targets apply to), then from 2 threads (throughput too);
- *recall@30* of the vector search against exact search (``exact=True``: a full scan of the
  filtered points) on the same queries and rights, both collections merged;
- *maintenance*: new chunks until a collection has 20,000 not yet built (``build_after_points``:
  searched exactly until then) and a build started as the daemon does; meanwhile open-loop
  retrievals at half the sequential throughput just measured (at most 5/s; latency from the
  scheduled time, so a stall counts) and a writer adding a document every 0.5 s (journaled,
  replayed at the swap): latency p50/p95/p99/max through the build and its swap;
- *keyword freshness*: a one-file change synced by the real sync engine (``SyncEngine.sync_paths``:
  extraction worker, e5-local embedding, upsert) into the store of that size, from the file's
  write to the first keyword search that finds the new term (the daemon adds its debounce,
  0.75 s by default, on top);
- *query process*: a fresh process opens the store, loads e5-local and answers the workload with the
  real e5 query embedding: its RSS (anonymous + file-backed), then 20 concurrent users asking short
  questions (p50/p95 of each question's retrieval with its embedding).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DIM = 384
K = 30
SIZES = (100_000, 300_000)
BIG = 1_000_000
BATCH = 2_048
DELTA = 20_000
"""New chunks before the measured maintenance build (the store's default ``build_after_points``)."""
DURING_INTERVAL_S = 0.2
WRITE_EVERY_S = 0.5
N_QUERIES = 200
CONCURRENT_USERS = 20
QUESTIONS_PER_USER = 5
EMBEDDER_NAME = "e5-local:multilingual-e5-small"
DOMAIN = "sid:S-1-5-21-3623811015-3361044348-30300820"
N_GROUPS, N_USERS = 40, 300
N_DOMAINS, TOPICS_PER_DOMAIN = 40, 50
SHORT_QUESTIONS = (
    "Quel est le forfait mensuel de maintenance ?",
    "Qui gère les accès au partage RH ?",
    "Comment configurer le VPN ?",
    "Quel est le délai d'intervention ?",
    "Où est la procédure de sauvegarde ?",
    "Quelle est la politique de mots de passe ?",
    "Quand a eu lieu le dernier audit ?",
    "Combien de postes sont couverts ?",
    "Que dit la règle WD-EXCL-042 ?",
    "Quelles sont les conditions de résiliation ?",
)


def _status_kib(*keys: str) -> dict[str, float]:
    """Fields of ``/proc/self/status`` in MiB (``VmRSS``, ``VmHWM``, ``RssAnon``, ``RssFile``)."""
    out: dict[str, float] = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            name = line.split(":", 1)[0]
            if name in keys:
                out[name] = round(int(line.split()[1]) / 1024, 1)
    return out


def _pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 1) if values else float("nan")


def _lat(values: list[float]) -> dict[str, float]:
    return {"p50_ms": _pct(values, 50), "p95_ms": _pct(values, 95), "p99_ms": _pct(values, 99),
            "max_ms": round(max(values, default=float("nan")), 1), "n": len(values)}


class Corpus:
    """Synthetic chunks in batches (see the module doc): texts, clustered vectors, ACLs, users."""

    def __init__(self, seed: int = 11) -> None:
        if str(HERE) not in sys.path:
            sys.path.insert(0, str(HERE))
        import bench_bm25

        self._b = bench_bm25
        self.rng = np.random.default_rng(seed)
        self.vocab = bench_bm25._vocabulary(np.random.default_rng(7))
        self.probs = bench_bm25._zipf_probs(len(self.vocab))
        self.groups = [f"{DOMAIN}-{1100 + g}" for g in range(N_GROUPS)]
        gp = 1.0 / np.arange(1, N_GROUPS + 1)
        self.gprobs = gp / gp.sum()
        self.users = []
        for u in range(N_USERS):
            member = {self.groups[g] for g in self.rng.choice(N_GROUPS, int(self.rng.integers(2, 7)), p=self.gprobs)}
            self.users.append(frozenset(member | {f"{DOMAIN}-{5000 + u}", "sid:S-1-1-0", "sid:S-1-5-11"}))
        self.mean = self._unit(1)[0]
        self.domains = self._unit(N_DOMAINS)
        self.topics = self._unit(N_DOMAINS * TOPICS_PER_DOMAIN)
        self.docs = 0
        self.samples: list[np.ndarray] = []

    def _unit(self, k: int) -> np.ndarray:
        x = self.rng.standard_normal((k, DIM)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

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
        sizes = []
        while sum(sizes) < n:
            sizes.append(int(rng.integers(10, 21)))
        total = sum(sizes)
        draws = rng.choice(len(self.vocab), size=(total, 150), p=self.probs)
        extras = rng.random((total, 3))
        out: list[tuple[str, object]] = []
        row = 0
        for size in sizes:
            d = self.docs
            self.docs += 1
            coll = "documentation" if rng.random() < 0.2 else "documents"
            allow = {self.groups[g] for g in rng.choice(N_GROUPS, int(rng.integers(1, 4)), p=self.gprobs)}
            if rng.random() < 0.10:
                allow.add("sid:S-1-5-11")
            deny = (self.groups[int(rng.integers(N_GROUPS))],) if rng.random() < 0.08 else ()
            topic = int(rng.integers(len(self.topics)))
            base = 0.9 * self.mean + 0.6 * self.domains[topic // TOPICS_PER_DOMAIN] + 0.6 * self.topics[topic] + 0.45 * self._unit(1)[0]
            vecs = base + rng.standard_normal((size, DIM)).astype(np.float32) * (0.35 / np.sqrt(DIM))
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            if rng.random() < 0.05 and len(self.samples) < 2 * N_QUERIES:
                self.samples.append(vecs[0])
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
                    acl_allow=tuple(sorted(allow)), acl_deny=deny, content_hash=f"{d:064x}", indexed_at=1.7e9,
                    heading_path=("Archives",), collection=coll,
                )
                out.append((coll, PointWrite(point_id(doc_id, j), vecs[j], payload)))
                row += 1
        return out

    def query_vectors(self, n: int) -> np.ndarray:
        """``n`` query vectors: sampled chunk vectors plus noise (cosine ≈ 0.9 to their chunk)."""
        rng = np.random.default_rng(9)
        base = np.asarray([self.samples[i % len(self.samples)] for i in range(n)])
        q = base + rng.standard_normal((n, DIM)).astype(np.float32) * (0.5 / np.sqrt(DIM))
        return q / np.linalg.norm(q, axis=1, keepdims=True)


def _write(store: object, pairs: list[tuple[str, object]]) -> None:
    by: dict[str, list] = {}
    for coll, p in pairs:
        by.setdefault(coll, []).append(p)
    for coll, pts in by.items():
        store.upsert(coll, pts)  # type: ignore[attr-defined]


class Precomputed:
    """An embedder returning precomputed query vectors (``vectors[text]``)."""

    name = EMBEDDER_NAME
    dim = DIM

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self._v = vectors

    def embed_query(self, text: str) -> np.ndarray:
        return self._v[text]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError


@dataclass(frozen=True)
class Workload:
    items: list[tuple[str, frozenset[str]]]
    vectors: dict[str, np.ndarray]


def _workload(c: Corpus) -> Workload:
    questions = c.questions(N_QUERIES)
    qv = c.query_vectors(N_QUERIES)
    rng = np.random.default_rng(3)
    items = [(q, c.users[int(rng.integers(len(c.users)))]) for q in questions]
    return Workload(items, dict(zip(questions, qv, strict=False)))


def _retriever(store: object, embedder: object):
    from ancre.index.bm25 import Bm25Manager
    from ancre.query.retrieval import Retriever
    from ancre.settings import QueryConfig

    tmp = Path(tempfile.mkdtemp(prefix="ancre-bench-bm25-"))
    return Retriever(store, embedder, Bm25Manager(tmp), QueryConfig(), keyword_in_store=True)  # type: ignore[arg-type]


def _sequential(retriever, items) -> dict:
    """Latency of each retrieval (ms), and the p50 of its vector and keyword steps (ms, both
    collections each: ``RetrievalTimings``)."""
    lat, vec, kw = [], [], []
    t0 = time.perf_counter()
    for q, p in items:
        t = time.perf_counter()
        r = retriever.retrieve(q, p)
        lat.append((time.perf_counter() - t) * 1000)
        vec.append(r.timings.vector_ms)
        kw.append(r.timings.bm25_ms)
    return {**_lat(lat), "qps": round(len(items) / (time.perf_counter() - t0), 1),
            "vector_p50_ms": round(_pct(vec, 50), 1), "keyword_p50_ms": round(_pct(kw, 50), 1)}


def _threads(retriever, items, n: int = 2) -> dict:
    lat: list[float] = []
    mu = threading.Lock()

    def run(part) -> None:
        for q, p in part:
            t = time.perf_counter()
            retriever.retrieve(q, p)
            with mu:
                lat.append((time.perf_counter() - t) * 1000)

    parts = [items[i::n] for i in range(n)]
    t0 = time.perf_counter()
    ths = [threading.Thread(target=run, args=(part,)) for part in parts]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    return {**_lat(lat), "qps": round(len(items) / (time.perf_counter() - t0), 1)}


def _recall(store: object, w: Workload) -> dict:
    from ancre.models import COLLECTIONS

    rec = []
    for q, p in w.items:
        v = w.vectors[q]
        fast = sorted((h for c in COLLECTIONS for h in store.search(c, v, p, K)), key=lambda h: -(h.score or 0))[:K]  # type: ignore[attr-defined]
        exact = sorted((h for c in COLLECTIONS for h in store.search(c, v, p, K, exact=True)), key=lambda h: -(h.score or 0))[:K]  # type: ignore[attr-defined]
        if exact:
            rec.append(len({h.id for h in fast} & {h.id for h in exact}) / len(exact))
    return {"recall_at_30": round(float(np.mean(rec)), 4), "recall_min": round(float(min(rec)), 3), "queries": len(rec)}


def _during_build(store, retriever, c: Corpus, w: Workload, qps: float) -> dict:
    """``maintain()`` in a thread (a build as the daemon starts it), open-loop retrievals from
    this thread, a writer thread adding a document every ``WRITE_EVERY_S``. The questions come
    at half the sequential throughput ``qps`` measured before (at most one per
    ``DURING_INTERVAL_S``): a rate above what the machine serves makes every question wait for
    the ones before it, which measures the queue, not the build."""
    interval = max(DURING_INTERVAL_S, 2.0 / qps)
    done = threading.Event()
    out: dict = {}
    errors: list[BaseException] = []

    def build() -> None:
        try:
            out["reports"] = [r.to_dict() for r in store.maintain()]
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            errors.append(e)
        done.set()

    writes = [0]

    def writer() -> None:
        while not done.wait(WRITE_EVERY_S):
            _write(store, c.batch(1))
            writes[0] += 1

    t0 = time.perf_counter()
    ths = [threading.Thread(target=build), threading.Thread(target=writer)]
    for t in ths:
        t.start()
    lat = []
    k = 0
    while not done.is_set():
        planned = t0 + k * interval
        wait = planned - time.perf_counter()
        if wait > 0:
            done.wait(wait)
            continue
        q, p = w.items[k % len(w.items)]
        retriever.retrieve(q, p)
        lat.append((time.perf_counter() - planned) * 1000)
        k += 1
    for t in ths:
        t.join()
    if errors:
        raise errors[0]
    return {**_lat(lat), "seconds": round(time.perf_counter() - t0, 1), "writes": writes[0],
            "rate_qps": round(1.0 / interval, 2), "reports": out.get("reports", [])}


def _freshness(data: Path) -> dict:
    """A one-file change synced by the real sync engine into the store under ``data``."""
    from ancre.app.runtime import Runtime
    from ancre.config import load_settings

    share = data.parent / "share"
    share.mkdir(exist_ok=True)
    doc = share / "note.md"
    doc.write_text("# Note\n\nLe relais RX-1000 a été remplacé.\n", encoding="utf-8")
    cfg = data.parent / "ancre.toml"
    cfg.write_text(
        f'data_dir = "{data}"\n[embedder]\nkind = "e5-local"\n[store]\nkind = "edge"\n'
        f'[directory]\nkind = "file"\npath = "{REPO / "examples" / "axonix" / "directory.json"}"\n'
        f'[[sources]]\nid = "fresh"\nroot = "{share}"\nprincipals = ["sid:S-1-1-0"]\n', encoding="utf-8",
    )
    with Runtime(load_settings(cfg)) as rt:
        t_open = time.perf_counter()
        store = rt.store
        open_s = time.perf_counter() - t_open
        conn = rt.connector(rt.settings.sources[0])
        rt.engine.run_pass(conn)
        everyone = frozenset({"sid:S-1-1-0"})
        times = []
        for i in range(3):
            code = f"ZETA-{4471 + i}-FRESH"
            doc.write_text(f"# Note\n\nLe relais {code} remplace le RX-1000.\n", encoding="utf-8")
            t0 = time.perf_counter()
            rt.engine.sync_paths(conn, ["note.md"])
            while not store.keyword_search("documents", code, everyone, 5):  # type: ignore[attr-defined]
                time.sleep(0.01)
            times.append(time.perf_counter() - t0)
    return {"keyword_freshness_s": round(float(np.median(times)), 2), "freshness_max_s": round(max(times), 2),
            "runtime_open_s": round(open_s, 2)}


def _progress(stage: str, value: object) -> None:
    """One line per finished stage on stderr (a 1M run takes over an hour)."""
    print(f"{time.strftime('%H:%M:%S')} {stage}: {json.dumps(value)[:400]}", file=sys.stderr, flush=True)


def _measure(tmp: Path, store, c: Corpus, w: Workload, quick: bool) -> dict:
    """Every measure after the ingest, on the open ``store`` under ``tmp`` (closed on return):
    retrieval (first pass over the workload, then the same questions again: the steady state),
    2 threads, recall, the delta and its build, keyword freshness, then the query process."""
    (tmp / "workload.json").write_text(json.dumps({
        "items": [[q, sorted(p)] for q, p in w.items], "vectors": {q: v.tolist() for q, v in w.vectors.items()},
    }), encoding="utf-8")
    retriever = _retriever(store, Precomputed(w.vectors))
    items = w.items[:40] if quick else w.items
    first = _sequential(retriever, items)
    _progress("sequential, first pass", first)
    seq = _sequential(retriever, items)
    _progress("sequential", seq)
    two = _threads(retriever, items)
    _progress("2 threads", two)
    recall = _recall(store, Workload(items, w.vectors))
    _progress("recall", recall)
    t0 = time.perf_counter()
    delta = 0
    while not store.needs_build():  # until one collection has DELTA points searched exactly
        pairs = c.batch(BATCH)
        _write(store, pairs)
        delta += len(pairs)
    delta_s = time.perf_counter() - t0
    exact_part = _sequential(retriever, items[:50])  # the delta searched exactly, before its build
    _progress("delta unbuilt", exact_part)
    during = _during_build(store, retriever, c, Workload(items, w.vectors), seq["qps"])
    _progress("during build", {k: v for k, v in during.items() if k != "reports"})
    after = _sequential(retriever, items)
    _progress("after build", after)
    rss_bench = _status_kib("VmRSS", "VmHWM")
    store.close()
    fresh = _freshness(tmp / "data")
    _progress("freshness", fresh)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--serve-child", str(tmp)] + (["--quick"] if quick else [])
    serve = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1])
    disk = sum(p.stat().st_blocks * 512 for p in (tmp / "data" / "qdrant").rglob("*") if p.is_file()) / 2**20
    return {
        "retrieval_first_pass": first, "retrieval": seq, "retrieval_2_threads": two, "recall": recall,
        "delta_chunks": delta, "delta_write_s": round(delta_s, 1), "retrieval_with_delta_unbuilt": exact_part,
        "during_build": during, "retrieval_after_build": after, **fresh, "serve": serve,
        "bench_rss_mib": rss_bench, "store_disk_mib": round(disk), "loadavg_1m_end": round(os.getloadavg()[0], 2),
    }


def bench_one(n: int, quick: bool = False) -> dict:
    """One size in this process (see the module doc); the query process in a child. With
    ``ANCRE_BENCH_SCALE_KEEP`` set the store is kept (its folder on stderr) for :func:`remeasure`."""
    from ancre.index.edge_store import EdgeStore
    from ancre.models import COLLECTIONS

    tmp = Path(tempfile.mkdtemp(prefix="ancre-bench-scale-"))
    data = tmp / "data"
    keep = bool(os.environ.get("ANCRE_BENCH_SCALE_KEEP"))
    if keep:
        print(f"keeping the store in {tmp}", file=sys.stderr, flush=True)
    try:
        c = Corpus()
        store = EdgeStore(data)
        store.open(EMBEDDER_NAME, DIM)
        seg = store.tuning.max_segment_points
        ingest_s = 0.0
        builds = []
        written = 0
        while written < n:
            step = min(seg, n - written)
            t0 = time.perf_counter()
            done = 0
            while done < step:
                pairs = c.batch(min(BATCH, step - done))
                _write(store, pairs)
                done += len(pairs)
            ingest_s += time.perf_counter() - t0
            written += done
            builds += [r.to_dict() for r in store.maintain(force=True)]
            _progress("ingest", {"written": written, "ingest_s": round(ingest_s), "builds_s": [b["build_s"] for b in builds]})
        ingest = {"chunks": sum(store.count(coll) for coll in COLLECTIONS), "ingest_s": round(ingest_s, 1),
                  "ingest_chunks_per_s": round(written / ingest_s), "builds": builds}
        (tmp / "ingest.json").write_text(json.dumps(ingest), encoding="utf-8")
        return {**ingest, **_measure(tmp, store, c, _workload(c), quick)}
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def remeasure(tmp: Path, quick: bool = False) -> dict:
    """Every measure after the ingest again, on a store kept by :func:`bench_one` (its ingest
    figures from its ``ingest.json``): the same workload, new documents for the delta."""
    from ancre.index.edge_store import EdgeStore

    c = Corpus()
    c.docs = 10_000_000  # the delta's documents are new ones
    spec = json.loads((tmp / "workload.json").read_text(encoding="utf-8"))
    w = Workload([(q, frozenset(p)) for q, p in spec["items"]],
                 {q: np.asarray(v, dtype=np.float32) for q, v in spec["vectors"].items()})
    store = EdgeStore(tmp / "data")
    store.open(EMBEDDER_NAME, DIM)
    ingest = json.loads((tmp / "ingest.json").read_text(encoding="utf-8"))
    return {**ingest, **_measure(tmp, store, c, w, quick), "remeasured": True}


def serve_one(workdir: Path, quick: bool) -> dict:
    """A fresh query process: open the store, load e5-local, answer the workload (precomputed
    vectors, then the real e5 embedding), then 20 concurrent users; RSS after each stage."""
    from ancre.index.e5_local import E5LocalEmbedder
    from ancre.index.edge_store import EdgeStore

    spec = json.loads((workdir / "workload.json").read_text(encoding="utf-8"))
    items = [(q, frozenset(p)) for q, p in spec["items"]]
    vectors = {q: np.asarray(v, dtype=np.float32) for q, v in spec["vectors"].items()}
    mem0 = _status_kib("VmRSS")
    t0 = time.perf_counter()
    store = EdgeStore(workdir / "data")
    store.open(EMBEDDER_NAME, DIM)
    open_s = time.perf_counter() - t0
    try:
        fast = _retriever(store, Precomputed(vectors))
        first = _sequential(fast, items[:40] if quick else items)
        seq = _sequential(fast, items[:40] if quick else items)
        mem_open = _status_kib("VmRSS", "RssAnon", "RssFile")
        real = _retriever(store, E5LocalEmbedder())
        real.retrieve(SHORT_QUESTIONS[0], items[0][1])  # loads the model
        embed, total = [], []
        for q, p in items[:60]:
            t = time.perf_counter()
            r = real.retrieve(q, p)
            total.append((time.perf_counter() - t) * 1000)
            embed.append(r.timings.embed_ms)
        users = [items[i][1] for i in range(CONCURRENT_USERS)]
        lat: list[float] = []
        emb: list[float] = []
        mu = threading.Lock()
        start = threading.Barrier(CONCURRENT_USERS)

        def user(u: int) -> None:
            start.wait()
            for k in range(QUESTIONS_PER_USER):
                q = SHORT_QUESTIONS[(u + k) % len(SHORT_QUESTIONS)]
                t = time.perf_counter()
                r = real.retrieve(q, users[u])
                with mu:
                    lat.append((time.perf_counter() - t) * 1000)
                    emb.append(r.timings.embed_ms)

        t1 = time.perf_counter()
        ths = [threading.Thread(target=user, args=(u,)) for u in range(CONCURRENT_USERS)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        wall = time.perf_counter() - t1
        mem = _status_kib("VmRSS", "VmHWM", "RssAnon", "RssFile")
    finally:
        store.close()
    return {
        "open_s": round(open_s, 2), "retrieval_first_pass": first, "retrieval": seq, "rss_start_mib": mem0["VmRSS"], "rss_opened": mem_open,
        "e5_embed": _lat(embed), "e5_total": _lat(total), "concurrent": {**_lat(lat), "embed": _lat(emb),
        "questions": len(lat), "qps": round(len(lat) / wall, 1)}, "rss": mem,
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def run(sizes: tuple[int, ...] = SIZES, quick: bool = False, big: bool = False) -> list[dict]:
    """Each size in its own child process (``big`` adds 1M); one result dict per size."""
    rows = []
    for n in (*sizes, BIG) if big and BIG not in sizes else sizes:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(n)] + (["--quick"] if quick else [])
        load = os.getloadavg()[0]
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        row["loadavg_1m_start"] = round(load, 2)
        rows.append(row)
    return rows


TARGETS = {
    "p50": 50.0, "p99": 150.0, "maintenance_max": 1000.0, "freshness": 5.0, "rss_mib": 2048.0, "recall": 0.98,
}


def render(rows: list[dict]) -> None:
    """Print the scale table: one column per size, the 1M targets alongside."""
    from rich.console import Console
    from rich.table import Table

    def trio(d: dict) -> str:
        return f"{d['p50_ms']:.0f} / {d['p95_ms']:.0f} / {d['p99_ms']:.0f}"

    def biggest_build(r: dict) -> dict:
        return max(r["builds"], key=lambda b: b["child"]["peak_rss_mib"])

    lines = [
        ("ingest: bulk upserts (chunks/s), then builds (s)", "", lambda r: f"{r['ingest_chunks_per_s']:,}/s, {sum(b['build_s'] for b in r['builds']):.0f} s ({len(r['builds'])} builds)"),
        ("retrieval p50 / p95 / p99 ms, first pass (pages cold)", "", lambda r: trio(r["retrieval_first_pass"]) if "retrieval_first_pass" in r else "n/a"),
        ("retrieval p50 / p95 / p99 ms, sequential", "p50 ≤ 50, p99 ≤ 150", lambda r: trio(r["retrieval"])),
        ("  of which vector search / keyword search, p50 ms", "", lambda r: f"{r['retrieval'].get('vector_p50_ms', float('nan')):.0f} / {r['retrieval'].get('keyword_p50_ms', float('nan')):.0f}"),
        ("  throughput q/s: 1 thread / 2 threads", "", lambda r: f"{r['retrieval']['qps']} / {r['retrieval_2_threads']['qps']}"),
        ("retrieval p50 / p95 / p99 ms, 2 threads", "", lambda r: trio(r["retrieval_2_threads"])),
        ("recall@30 vs exact search, rights filter (mean / min)", "≥ 0.98", lambda r: f"{r['recall']['recall_at_30']:.4f} / {r['recall']['recall_min']:.2f}"),
        (f"with {DELTA:,} new chunks not yet built (exact), p50 / p95 / p99", "", lambda r: trio(r["retrieval_with_delta_unbuilt"])),
        ("during their build + swap: p50 / p95 / p99 / max ms (questions/s)", "max ≤ 1000", lambda r: f"{trio(r['during_build'])} / {r['during_build']['max_ms']:.0f} ({r['during_build'].get('rate_qps', 5)}/s)"),
        ("  that build: s (writes replayed) / writes paused s / shard load s", "", lambda r: "; ".join(f"{b['build_s']:.0f} ({b['replayed']}) / {b['freeze_s'] + b['swap_s']:.2f} / {b['load_s']:.2f}" for b in r["during_build"]["reports"]) or "none"),
        ("after it: p50 / p95 / p99 ms", "", lambda r: trio(r["retrieval_after_build"])),
        ("keyword freshness, one-file change (s, median of 3)", "≤ 5", lambda r: f"{r['keyword_freshness_s']:.2f} (max {r['freshness_max_s']:.2f})"),
        ("peak RSS of a build process, largest build (MiB)", "", lambda r: f"{biggest_build(r)['child']['peak_rss_mib']:,.0f} ({biggest_build(r)['child']['points']:,} points, {biggest_build(r)['child']['seconds']:.0f} s)"),
        ("query process RSS MiB (anon + file), with e5", "≤ 2048", lambda r: f"{r['serve']['rss']['VmRSS']:,.0f} ({r['serve']['rss']['RssAnon']:,.0f} + {r['serve']['rss']['RssFile']:,.0f})"),
        ("  opening the store (s)", "", lambda r: f"{r['serve']['open_s']:.2f}"),
        ("  retrieval with the real e5 embedding, p50 / p95 ms", "", lambda r: f"{r['serve']['e5_total']['p50_ms']:.0f} / {r['serve']['e5_total']['p95_ms']:.0f}"),
        (f"{CONCURRENT_USERS} concurrent users, short questions: p50 / p95 ms", "", lambda r: f"{r['serve']['concurrent']['p50_ms']:.0f} / {r['serve']['concurrent']['p95_ms']:.0f} ({r['serve']['concurrent']['qps']} q/s)"),
        ("  of which the query embedding p50 / p95 ms", "", lambda r: f"{r['serve']['concurrent']['embed']['p50_ms']:.0f} / {r['serve']['concurrent']['embed']['p95_ms']:.0f}"),
        ("store on disk (MiB)", "", lambda r: f"{r['store_disk_mib']:,}"),
        ("load average 1 min (start → query process → end)", "", lambda r: f"{r.get('loadavg_1m_start', float('nan')):.1f} → {r['serve']['loadavg_1m']:.1f} → {r['loadavg_1m_end']:.1f}"),
    ]
    t = Table(title=f"Scale: the embedded store on this machine ({cpu_model()}, {os.cpu_count()} cores; synthetic "
                    "chunks, structured 384-dim vectors)")
    t.add_column("measure")
    t.add_column("target at 1M")
    for r in rows:
        t.add_column(f"{r['chunks']:,} chunks", justify="right")
    for label, target, fmt in lines:
        t.add_row(label, target, *(fmt(r) for r in rows))
    Console(width=max(Console().width, 160)).print(t)


def cpu_model() -> str:
    """The CPU's name (``model name`` of ``/proc/cpuinfo``): figures of one machine kind differ
    by 3× between the CPUs it runs on, so a table names its own."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    """``(measure, value, target)`` lines at the largest size."""
    r = max(rows, key=lambda x: x["chunks"])
    n = f"{r['chunks']:,}"
    return [
        (f"retrieval p50 / p99 at {n}", f"{r['retrieval']['p50_ms']:.0f} / {r['retrieval']['p99_ms']:.0f} ms", "≤ 50 / ≤ 150 ms at 1M"),
        (f"recall@30 vs exact at {n}", f"{r['recall']['recall_at_30']:.4f}", "≥ 0.98"),
        ("max latency during a build + swap", f"{r['during_build']['max_ms']:.0f} ms", "≤ 1000 ms"),
        ("keyword freshness (one-file change)", f"{r['keyword_freshness_s']:.2f} s", "≤ 5 s"),
        ("query process RSS", f"{r['serve']['rss']['VmRSS']:,.0f} MiB", "≤ 2048 MiB"),
        (f"{CONCURRENT_USERS} concurrent users p95", f"{r['serve']['concurrent']['p95_ms']:.0f} ms", ""),
    ]


def main(argv: list[str]) -> None:
    known = {"--quick", "--scale-1m", "--sizes", "--child", "--remeasure", "--serve-child"}
    unknown = [a for a in argv if a.startswith("-") and a not in known]
    if unknown:
        print(f"unknown option {unknown[0]}\n{__doc__}", file=sys.stderr)
        raise SystemExit(2)
    quick = "--quick" in argv
    if argv and argv[0] == "--child":
        print(json.dumps(bench_one(int(argv[1]), quick=quick)))
        return
    if argv and argv[0] == "--remeasure":  # a kept store (ANCRE_BENCH_SCALE_KEEP): every measure after the ingest
        rows = [remeasure(Path(argv[1]), quick)]
        render(rows)
        print(json.dumps(rows[0]))
        return
    if argv and argv[0] == "--serve-child":
        print(json.dumps(serve_one(Path(argv[1]), quick)))
        return
    sizes = SIZES
    if "--sizes" in argv:
        sizes = tuple(int(s) for s in argv[argv.index("--sizes") + 1].split(","))
    rows = run(sizes, quick=quick, big="--scale-1m" in argv)
    render(rows)
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main(sys.argv[1:])
