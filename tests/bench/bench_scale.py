"""Scale benchmark: the embedded store at 100k, 300k (and, with ``--scale-1m``, 1M) chunks on this
machine's cores, on two workloads — retrieval latency sequential and with 2 threads, during an
index build, the recall of the fast path against a brute force over what each user may read (per
class of reader), keyword freshness after a one-file change, the memory of the build process and
of a query process, and 20 concurrent users.

Run: ``.venv/bin/python tests/bench/run.py --only scale [--scale-1m]`` or
``.venv/bin/python tests/bench/bench_scale.py [--sizes 100000,300000] [--scale-1m]
[--workloads structured,clustered]`` (a command, not a test; ``$ANCRE_BENCH_SCALE_WORKLOADS``
picks the workloads under ``run.py``). Each workload and size runs in its own child process (its
peak memory is its own), and the query process is another fresh child. With
``ANCRE_BENCH_SCALE_KEEP=1`` the store of a size is kept (its folder printed on stderr, a stage per
line as it ends), and ``bench_scale.py --remeasure <folder>`` runs every measure after the ingest
again on it (the recall against a truth that holds the chunks every earlier run wrote too) — a million chunks take 15–50 minutes to ingest and build on 2 cores, the measures ~10.
``ANCRE_BENCH_SCALE_TUNING='{"hnsw_ef": 64, "hnsw_ef_max": 256}'`` runs the store (ingest, measures
and query process) with those :class:`~ancre.index.edge_config.EdgeTuning` fields changed — with
``--remeasure``, to compare search settings on one kept store.

**Data.** Two workloads of synthetic chunks (embedding a million chunks with e5 on 2 cores takes
~45 h), texts of ``bench_bm25``'s synthetic French for the keyword side:

- ``structured`` (:mod:`scale_corpus`): vectors built so that a question's nearest chunks are
  obvious (cosine ≈ 0.93 inside a document, ≈ 0.44 between unrelated chunks), 300 users each in
  2–6 of 40 groups — the graph's job is easy;
- ``clustered`` (:mod:`scale_clustered`): vectors around ``n / 400`` cluster centres with e5's
  geometry (:mod:`scale_calibration`: levels and spectrum fitted on e5 embeddings of ~3,000
  generated French business chunks, embedded once and cached; the bench prints e5's cosine
  figures beside the synthetic ones), 60 groups of Zipf(1.2) popularity, rights that follow the
  clusters, 7 % deny ACEs, Authenticated Users on 4 % of the documents, 40 users reading from
  ~1 % to ~60 % of the chunks, half the questions about what the asker may not read.

**Measured**, per size:

- *ingest*: bulk upserts of 2,048 points (the payload with its index terms), and the index builds
  the store runs after them (:meth:`EdgeStore.maintain`: a separate process on a copy; one build
  per 250,000 points, the store's largest segment) — seconds, and the build process's peak RSS;
- *retrieval* (``Retriever.retrieve``: vector top 30 in both collections with the rights filter,
  BM25 top 30 in the store under the same filter, RRF; no LLM, query vectors precomputed):
  p50/p95/p99 sequential over the workload once (the first pass: pages of the memory-mapped
  store read from disk as the questions need them), then the same questions again (the steady
  state, the row the targets apply to), then from 2 threads (throughput too);
- *recall@30* of the vector search (both collections merged) against a NumPy brute force over
  exactly the chunks each asker may read (:mod:`scale_truth`), per class of reader (< 5 %,
  5–20 %, 20–60 %, > 60 % of the chunks readable: mean, worst, the vector search's p50), and how
  far the engine's own exact search (``exact=True``) agrees with the brute force;
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
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ancre.index.edge_config import EdgeTuning

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from scale_corpus import N_QUERIES, Corpus  # noqa: E402 - the bench's own modules, beside this file
from scale_truth import CLASSES, Truth, reader_class  # noqa: E402

REPO = HERE.parents[1]
DIM = 384
K = 30
SIZES = (100_000, 300_000)
BIG = 1_000_000
BATCH = 2_048
DELTA = 20_000
"""New chunks before the measured maintenance build (the store's default ``build_after_points``)."""
FRESH_READER = "sid:S-1-5-21-424242-424242-424242-9999"
"""The only principal that may read the keyword-freshness note (no user of a workload holds it)."""
DURING_INTERVAL_S = 0.2
WRITE_EVERY_S = 0.5
CONCURRENT_USERS = 20
QUESTIONS_PER_USER = 5
EMBEDDER_NAME = "e5-local:multilingual-e5-small"
WORKLOADS = ("structured", "clustered")
"""The two workloads (``scale_corpus``, ``scale_clustered``), in the order they run."""
ENGINE_EXACT_CHECKS = 20
"""Questions whose engine exact search (``exact=True``) is compared with the NumPy brute force."""
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
    askers = c.askers(N_QUERIES)
    qv = c.query_vectors(N_QUERIES, askers)
    return Workload(list(zip(questions, askers, strict=True)), dict(zip(questions, qv, strict=True)))


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


def _rows(hits: list, truth: Truth) -> set[int]:
    return {truth.row_of(h.payload.doc_id, h.payload.chunk_index) for h in hits}


def _merged(store: object, v: np.ndarray, p: frozenset[str], exact: bool = False) -> list:
    """The top ``K`` of both collections by score, as the retriever merges them."""
    from ancre.models import COLLECTIONS

    hits = [h for c in COLLECTIONS for h in store.search(c, v, p, K, exact=exact)]  # type: ignore[attr-defined]
    return sorted(hits, key=lambda h: -(h.score or 0))[:K]


def _recall(store: object, w: Workload, truth: Truth) -> dict:
    """recall@30 of the store's vector search (both collections merged) against the NumPy brute
    force over what each asker may read (:class:`~scale_truth.Truth`), overall and per reader
    class (mean, worst, questions, users); and, on the first questions, how far the engine's own
    exact search (``exact=True``) agrees with the brute force (1.0: the rights semantics agree)."""
    users = [p for _, p in w.items]
    exact = truth.top(np.asarray([w.vectors[q] for q, _ in w.items]), users, K)
    shares = {p: truth.share(p) for p in set(users)}
    rec: list[float] = []
    by: dict[str, list[float]] = {}
    by_users: dict[str, set[frozenset[str]]] = {}
    vector_ms: dict[str, list[float]] = {}
    for (q, p), want in zip(w.items, exact, strict=True):
        t = time.perf_counter()
        hits = _merged(store, w.vectors[q], p)
        ms = (time.perf_counter() - t) * 1000
        if not len(want):
            continue
        r = len(_rows(hits, truth) & set(want.tolist())) / len(want)
        rec.append(r)
        label = reader_class(shares[p])
        by.setdefault(label, []).append(r)
        by_users.setdefault(label, set()).add(p)
        vector_ms.setdefault(label, []).append(ms)
    agree = [len(_rows(_merged(store, w.vectors[q], p, exact=True), truth) & set(want.tolist())) / len(want)
             for (q, p), want in list(zip(w.items, exact, strict=True))[:ENGINE_EXACT_CHECKS] if len(want)]
    classes = {label: {"mean": round(float(np.mean(v)), 4), "worst": round(float(min(v)), 3), "queries": len(v),
                       "users": len(by_users[label]), "vector_p50_ms": round(float(np.percentile(vector_ms[label], 50)), 1)}
               for _, _, label in CLASSES if (v := by.get(label))}
    return {"recall_at_30": round(float(np.mean(rec)), 4), "recall_min": round(float(min(rec)), 3), "queries": len(rec),
            "by_class": classes, "engine_exact_vs_numpy": round(float(np.mean(agree)), 4) if agree else None}


def _during_build(store, retriever, c: Corpus, w: Workload, qps: float, truth: Truth) -> dict:
    """``maintain()`` in a thread (a build as the daemon starts it), open-loop retrievals from
    this thread, a writer thread adding a document every ``WRITE_EVERY_S``. The questions come
    at half the sequential throughput ``qps`` measured before (at most one per
    ``DURING_INTERVAL_S``): a rate above what the machine serves makes every question wait for
    the ones before it, which measures the queue, not the build. The writer's documents are
    recorded in ``truth``."""
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
            pairs = c.batch(1)
            _write(store, pairs)
            truth.record(pairs)
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
    """A one-file change synced by the real sync engine into the store under ``data``. The file
    is readable by a principal of its own (no bench user holds it), so the store's answers to
    the workload stay those :class:`~scale_truth.Truth` knows."""
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
        f'[[sources]]\nid = "fresh"\nroot = "{share}"\nprincipals = ["{FRESH_READER}"]\n', encoding="utf-8",
    )
    with Runtime(load_settings(cfg)) as rt:
        t_open = time.perf_counter()
        store = rt.store
        open_s = time.perf_counter() - t_open
        conn = rt.connector(rt.settings.sources[0])
        rt.engine.run_pass(conn)
        reader = frozenset({FRESH_READER})
        times = []
        for i in range(3):
            code = f"ZETA-{4471 + i}-FRESH"
            doc.write_text(f"# Note\n\nLe relais {code} remplace le RX-1000.\n", encoding="utf-8")
            t0 = time.perf_counter()
            rt.engine.sync_paths(conn, ["note.md"])
            while not store.keyword_search("documents", code, reader, 5):  # type: ignore[attr-defined]
                time.sleep(0.01)
            times.append(time.perf_counter() - t0)
    return {"keyword_freshness_s": round(float(np.median(times)), 2), "freshness_max_s": round(max(times), 2),
            "runtime_open_s": round(open_s, 2)}


def _progress(stage: str, value: object) -> None:
    """One line per finished stage on stderr (a 1M run takes over an hour)."""
    print(f"{time.strftime('%H:%M:%S')} {stage}: {json.dumps(value)[:400]}", file=sys.stderr, flush=True)


def make_corpus(workload: str, n: int) -> Corpus:
    """The generator of ``workload`` (one of :data:`WORKLOADS`) for about ``n`` chunks."""
    if workload == "structured":
        return Corpus()
    if workload == "clustered":
        from scale_calibration import calibrate
        from scale_clustered import ClusteredCorpus

        return ClusteredCorpus(n, calibrate())
    raise ValueError(f"unknown workload {workload!r}; expected one of {WORKLOADS}")


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
    truth = Truth.load(tmp / "truth")
    recall = _recall(store, Workload(items, w.vectors), truth)
    _progress("recall", recall)
    truth.reopen()  # what is written from here on is recorded: a --remeasure compares with the store as it is
    t0 = time.perf_counter()
    delta = 0
    while not store.needs_build():  # until one collection has DELTA points searched exactly
        pairs = c.batch(BATCH)
        _write(store, pairs)
        truth.record(pairs)
        delta += len(pairs)
    delta_s = time.perf_counter() - t0
    exact_part = _sequential(retriever, items[:50])  # the delta searched exactly, before its build
    _progress("delta unbuilt", exact_part)
    during = _during_build(store, retriever, c, Workload(items, w.vectors), seq["qps"], truth)
    truth.freeze()
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


def tuning_overrides() -> dict:
    """The :class:`~ancre.index.edge_config.EdgeTuning` fields ``$ANCRE_BENCH_SCALE_TUNING`` (a
    JSON object) changes, ``{}`` when unset. Raises ``SystemExit`` naming a field that is not one
    of EdgeTuning's."""
    raw = json.loads(os.environ.get("ANCRE_BENCH_SCALE_TUNING") or "{}")
    fields = set(EdgeTuning.__dataclass_fields__)
    unknown = sorted(set(raw) - fields)
    if unknown:
        raise SystemExit(f"ANCRE_BENCH_SCALE_TUNING: unknown field {unknown[0]!r} (EdgeTuning has {', '.join(sorted(fields))})")
    return dict(raw)


def bench_tuning() -> EdgeTuning:
    """The store's :class:`~ancre.index.edge_config.EdgeTuning`: the default with
    :func:`tuning_overrides` applied."""
    return replace(EdgeTuning(), **tuning_overrides())


def bench_one(n: int, workload: str = "structured", quick: bool = False) -> dict:
    """One size of one workload in this process (see the module doc); the query process in a
    child. With ``ANCRE_BENCH_SCALE_KEEP`` set the store is kept (its folder on stderr) for
    :func:`remeasure`."""
    from ancre.index.edge_store import EdgeStore
    from ancre.models import COLLECTIONS

    tmp = Path(tempfile.mkdtemp(prefix="ancre-bench-scale-"))
    data = tmp / "data"
    keep = bool(os.environ.get("ANCRE_BENCH_SCALE_KEEP"))
    if keep:
        print(f"keeping the store in {tmp}", file=sys.stderr, flush=True)
    try:
        c = make_corpus(workload, n)
        truth = Truth(tmp / "truth")
        store = EdgeStore(data, tuning=bench_tuning())
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
                truth.record(pairs)
                _write(store, pairs)
                done += len(pairs)
            ingest_s += time.perf_counter() - t0
            written += done
            builds += [r.to_dict() for r in store.maintain(force=True)]
            _progress("ingest", {"written": written, "ingest_s": round(ingest_s), "builds_s": [b["build_s"] for b in builds]})
        truth.freeze()
        ingest = {"workload": workload, "n": n, "chunks": sum(store.count(coll) for coll in COLLECTIONS),
                  "ingest_s": round(ingest_s, 1), "ingest_chunks_per_s": round(written / ingest_s), "builds": builds}
        (tmp / "ingest.json").write_text(json.dumps(ingest), encoding="utf-8")
        extra = {"calibration": calibration()} if workload == "clustered" else {}
        return {**ingest, **extra, **_measure(tmp, store, c, _workload(c), quick), "tuning": tuning_overrides()}
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def remeasure(tmp: Path, quick: bool = False) -> dict:
    """Every measure after the ingest again, on a store kept by :func:`bench_one` (its ingest
    figures from its ``ingest.json``): the same workload, new documents for the delta."""
    from ancre.index.edge_store import EdgeStore

    ingest = json.loads((tmp / "ingest.json").read_text(encoding="utf-8"))
    c = make_corpus(ingest.get("workload", "structured"), int(ingest.get("n", ingest["chunks"])))
    c.docs = Truth.load(tmp / "truth").next_doc()  # the delta's documents are new ones,
    c.rng = np.random.default_rng([7, c.docs])  # and so are their vectors: a duplicate is a tie the recall miscounts
    spec = json.loads((tmp / "workload.json").read_text(encoding="utf-8"))
    w = Workload([(q, frozenset(p)) for q, p in spec["items"]],
                 {q: np.asarray(v, dtype=np.float32) for q, v in spec["vectors"].items()})
    store = EdgeStore(tmp / "data", tuning=bench_tuning())
    store.open(EMBEDDER_NAME, DIM)
    return {**ingest, **_measure(tmp, store, c, w, quick), "remeasured": True, "tuning": tuning_overrides()}


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
    store = EdgeStore(workdir / "data", tuning=bench_tuning())
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


def run(sizes: tuple[int, ...] = SIZES, quick: bool = False, big: bool = False,
        workloads: tuple[str, ...] | None = None) -> list[dict]:
    """Each workload (default :data:`WORKLOADS`, or ``$ANCRE_BENCH_SCALE_WORKLOADS``,
    comma-separated) at each size (``big`` adds 1M), each in its own child process; one result
    dict per workload and size."""
    if workloads is None:
        workloads = tuple(w for w in os.environ.get("ANCRE_BENCH_SCALE_WORKLOADS", ",".join(WORKLOADS)).split(",") if w)
    rows = []
    for workload in workloads:
        for n in (*sizes, BIG) if big and BIG not in sizes else sizes:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(n), "--workload", workload]
            load = os.getloadavg()[0]
            out = subprocess.run(cmd + (["--quick"] if quick else []), check=True, stdout=subprocess.PIPE, text=True).stdout
            row = json.loads(out.strip().splitlines()[-1])
            row["loadavg_1m_start"] = round(load, 2)
            rows.append(row)
    return rows


def calibration() -> dict:
    """The clustered workload's calibration: e5's cosine figures beside the synthetic vectors'
    (:func:`scale_clustered.synthetic_like`), and the levels fitted."""
    from scale_calibration import calibrate, e5_vectors
    from scale_clustered import synthetic_like

    cal = calibrate()
    return {"e5": cal.e5.rounded(), "synthetic": synthetic_like(cal, e5_vectors()).rounded(),
            "levels": {k: round(getattr(cal, k), 4) for k in ("common", "cluster", "doc", "chunk", "question_noise")}}


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
        ("search settings (EdgeTuning fields changed)", "", lambda r: ", ".join(f"{k}={v}" for k, v in r.get("tuning", {}).items()) or "default"),
        ("ingest: bulk upserts (chunks/s), then builds (s)", "", lambda r: f"{r['ingest_chunks_per_s']:,}/s, {sum(b['build_s'] for b in r['builds']):.0f} s ({len(r['builds'])} builds)"),
        ("retrieval p50 / p95 / p99 ms, first pass (pages cold)", "", lambda r: trio(r["retrieval_first_pass"]) if "retrieval_first_pass" in r else "n/a"),
        ("retrieval p50 / p95 / p99 ms, sequential", "p50 ≤ 50, p99 ≤ 150", lambda r: trio(r["retrieval"])),
        ("  of which vector search / keyword search, p50 ms", "", lambda r: f"{r['retrieval'].get('vector_p50_ms', float('nan')):.0f} / {r['retrieval'].get('keyword_p50_ms', float('nan')):.0f}"),
        ("  throughput q/s: 1 thread / 2 threads", "", lambda r: f"{r['retrieval']['qps']} / {r['retrieval_2_threads']['qps']}"),
        ("retrieval p50 / p95 / p99 ms, 2 threads", "", lambda r: trio(r["retrieval_2_threads"])),
        ("recall@30 vs brute force over what the user may read (mean / worst)", "≥ 0.98 / ≥ 0.90", lambda r: f"{r['recall']['recall_at_30']:.4f} / {r['recall']['recall_min']:.2f}"),
        *((f"  users reading {label} of the chunks: mean / worst (questions, users; vector p50 ms)", "≥ 0.98 / ≥ 0.90", _class_cell(label))
          for _, _, label in CLASSES),
        ("  engine's exact search vs the brute force (first 20 questions)", "1.000", lambda r: f"{r['recall'].get('engine_exact_vs_numpy') or float('nan'):.4f}"),
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
                    "chunks, 384-dim vectors: 'structured' and e5-calibrated 'clustered' workloads)")
    t.add_column("measure")
    t.add_column("target at 1M")
    for r in rows:
        t.add_column(f"{r.get('workload', 'structured')}, {r['chunks']:,} chunks", justify="right")
    for label, target, fmt in lines:
        t.add_row(label, target, *(fmt(r) for r in rows))
    console = Console(width=max(Console().width, 90 + 30 * len(rows)))
    console.print(t)
    cal = next((r["calibration"] for r in rows if "calibration" in r), None)
    if cal is not None:
        c = Table(title="The clustered workload's vectors vs e5's (generated French business chunks; mean cosines)")
        for col in ("", "same document", "same cluster", "other clusters", "question → its chunk",
                    "question → 1st", "question → 30th", "top 30 in own cluster", "effective dim"):
            c.add_column(col, justify="right")
        keys = ("same_doc", "same_cluster", "other_cluster", "question_to_chunk", "question_top1", "question_top30",
                "top30_in_cluster", "effective_dim")
        for name in ("e5", "synthetic"):
            c.add_row(name, *(str(cal[name][k]) for k in keys))
        console.print(c)


def _class_cell(label: str):
    def cell(r: dict) -> str:
        c = r["recall"].get("by_class", {}).get(label)
        if c is None:
            return "—"
        return f"{c['mean']:.3f} / {c['worst']:.2f} ({c['queries']}, {c['users']}; {c['vector_p50_ms']:.0f})"

    return cell


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
    """``(measure, value, target)`` lines at the largest size of each workload."""
    out: list[tuple[str, str, str]] = []
    for workload in dict.fromkeys(r.get("workload", "structured") for r in rows):
        r = max((x for x in rows if x.get("workload", "structured") == workload), key=lambda x: x["chunks"])
        n = f"{workload}, {r['chunks']:,}"
        classes = list(r["recall"].get("by_class", {}).values()) or [{"mean": r["recall"]["recall_at_30"], "worst": r["recall"]["recall_min"]}]
        worst = (min(c["mean"] for c in classes), min(c["worst"] for c in classes))
        out += [
            (f"retrieval p50 / p99 ({n})", f"{r['retrieval']['p50_ms']:.0f} / {r['retrieval']['p99_ms']:.0f} ms", "≤ 50 / ≤ 150 ms at 1M"),
            (f"recall@30 vs brute force, lowest class mean / lowest worst ({n})", f"{worst[0]:.4f} / {worst[1]:.2f}", "≥ 0.98 / ≥ 0.90"),
            (f"max latency during a build + swap ({n})", f"{r['during_build']['max_ms']:.0f} ms", "≤ 1000 ms"),
            (f"keyword freshness, one-file change ({n})", f"{r['keyword_freshness_s']:.2f} s", "≤ 5 s"),
            (f"query process RSS ({n})", f"{r['serve']['rss']['VmRSS']:,.0f} MiB", "≤ 2048 MiB"),
            (f"{CONCURRENT_USERS} concurrent users p95 ({n})", f"{r['serve']['concurrent']['p95_ms']:.0f} ms", ""),
        ]
    return out


def main(argv: list[str]) -> None:
    known = {"--quick", "--scale-1m", "--sizes", "--child", "--remeasure", "--serve-child", "--workload", "--workloads"}
    unknown = [a for a in argv if a.startswith("-") and a not in known]
    if unknown:
        print(f"unknown option {unknown[0]}\n{__doc__}", file=sys.stderr)
        raise SystemExit(2)
    quick = "--quick" in argv
    if argv and argv[0] == "--child":
        workload = argv[argv.index("--workload") + 1] if "--workload" in argv else "structured"
        print(json.dumps(bench_one(int(argv[1]), workload, quick=quick)))
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
    workloads = tuple(argv[argv.index("--workloads") + 1].split(",")) if "--workloads" in argv else None
    rows = run(sizes, quick=quick, big="--scale-1m" in argv, workloads=workloads)
    render(rows)
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main(sys.argv[1:])
