"""BM25 benchmark: ``ancre.index.bm25`` (bm25s) against rank-bm25 on synthetic French chunks.

Run: ``.venv/bin/python tests/bench/bench_bm25.py [--sizes 10000,100000]`` (a command, not a test).
From code: ``run(sizes)`` returns one dict per size; :func:`render` prints them as a rich table.

Chunks (~1 000 characters) draw their words from a Zipfian law (exponent 1.07) over a vocabulary
made of the Axonix corpus words (most frequent first, stop words included, as in real text) then
~60 000 pseudo-words spliced from corpus words, with codes (``WD-EXCL-042``-like), numbers and file
names sprinkled in. Queries are French questions around 2–5 content words drawn from the same law.

Each size runs in a fresh child process so that its peak RSS (``ru_maxrss``) is its own; the peak is
read after the bm25s stages, before rank-bm25 is built. rank-bm25 scores every document in Python,
so it gets few queries (20 at ≤ 10k chunks, 5 above) — its p50 over so few queries is indicative.
Query time is ``search(query, k=30)`` including query tokenization, and for rank-bm25
``get_scores`` + arg-sort of the top 30 on the same tokens.
"""

from __future__ import annotations

import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SHARE = REPO / "examples" / "axonix" / "share"
K = 30
N_QUERIES = 50
ZIPF_S = 1.07
SYNTHETIC_WORDS = 60_000


def _corpus_words() -> list[str]:
    """Words of the corpus (.md and .docx), most frequent first."""
    import docx

    texts = [p.read_text(encoding="utf-8") for p in SHARE.rglob("*.md")]
    for p in SHARE.rglob("*.docx"):
        texts.append("\n".join(par.text for par in docx.Document(str(p)).paragraphs))
    counts: dict[str, int] = {}
    for w in re.findall(r"[^\W\d_]+(?:'[^\W\d_]+)?", "\n".join(texts)):
        counts[w] = counts.get(w, 0) + 1
    return sorted(counts, key=lambda w: (-counts[w], w))


def _vocabulary(rng: np.random.Generator) -> list[str]:
    real = _corpus_words()
    long_words = [w.lower() for w in real if len(w) >= 5]
    seen = set(real)
    synthetic: list[str] = []
    while len(synthetic) < SYNTHETIC_WORDS:
        a, b = rng.choice(len(long_words), 2)
        w1, w2 = long_words[a], long_words[b]
        w = w1[: rng.integers(2, len(w1))] + w2[rng.integers(1, len(w2) - 1) :]
        if w not in seen:
            seen.add(w)
            synthetic.append(w)
    return real + synthetic


def _zipf_probs(n: int) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** ZIPF_S
    return p / p.sum()


def make_chunks(n: int, seed: int = 7) -> tuple[list[str], list[str], list[str]]:
    """``n`` synthetic chunks of ~1 000 characters, their file names, and ``N_QUERIES`` queries."""
    rng = np.random.default_rng(seed)
    vocab = _vocabulary(rng)
    probs = _zipf_probs(len(vocab))
    words_per_chunk = 150  # ~6.7 characters per word with the space
    draws = rng.choice(len(vocab), size=(n, words_per_chunk), p=probs)
    extras = rng.random((n, 3))
    chunks, filenames = [], []
    for i in range(n):
        words = [vocab[j] for j in draws[i]]
        for pos in range(14, words_per_chunk, 15):
            words[pos] += "."
        if extras[i, 0] < 0.10:
            words[int(extras[i, 1] * 140)] = f"WD-EXCL-{int(extras[i, 2] * 1000):03d}"
        if extras[i, 1] < 0.20:
            words[int(extras[i, 2] * 140)] = f"CHF {int(extras[i, 0] * 100)} {int(extras[i, 2] * 900 + 100)} HT"
        chunks.append(" ".join(words))
        filenames.append(f"{i // 8:05d}_{vocab[draws[i, 0]]}_{vocab[draws[i, 1]]}.docx")
    content = np.arange(30, len(vocab))  # skip the most frequent words (mostly stop words)
    cprobs = _zipf_probs(len(vocab))[30:]
    cprobs /= cprobs.sum()
    queries = []
    for q in range(N_QUERIES):
        picked = [vocab[j] for j in rng.choice(content, size=int(rng.integers(2, 6)), p=cprobs)]
        if q % 10 == 0:
            picked.append(f"WD-EXCL-{q:03d}")
        queries.append(f"Quel est le {' '.join(picked)} ?")
    return chunks, filenames, queries


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _times_ms(fn, queries: list) -> list[float]:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def bench_one(n: int) -> dict:
    """Measure one size in this process (call through :func:`run` for a clean peak RSS)."""
    from rank_bm25 import BM25Okapi

    from ancre.index.bm25 import Bm25Entry, Bm25Index
    from ancre.index.tokenize import tokenize

    t0 = time.perf_counter()
    chunks, filenames, queries = make_chunks(n)
    gen_s = time.perf_counter() - t0
    rss_base = _rss_mib()
    entries = [Bm25Entry(f"p{i}", "documents", t, f) for i, (t, f) in enumerate(zip(chunks, filenames, strict=False))]

    t0 = time.perf_counter()
    index = Bm25Index.build(entries)
    build_s = time.perf_counter() - t0
    index.search(queries[0], K)  # warm-up
    bm25s_times = _times_ms(lambda q: index.search(q, K), queries)
    bm25s_p50 = statistics.median(bm25s_times)
    hits = [len(index.search(q, K)) for q in queries]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        index.save(Path(tmp))
        save_s = time.perf_counter() - t0
        disk_mib = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 2**20
        t0 = time.perf_counter()
        loaded = Bm25Index.load(Path(tmp))
        load_s = time.perf_counter() - t0
        assert loaded.search(queries[1], K) == index.search(queries[1], K)
    rss_bm25s = _rss_mib()
    del loaded

    t0 = time.perf_counter()
    tokenized = [tokenize(f) + tokenize(t) for t, f in zip(chunks, filenames, strict=False)]
    tokenize_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    okapi = BM25Okapi(tokenized)
    rank_build_s = time.perf_counter() - t0
    n_rank = 20 if n <= 10_000 else 5
    rank_queries = [tokenize(q) for q in queries[:n_rank]]
    rank_p50 = statistics.median(
        _times_ms(lambda toks: np.argsort(okapi.get_scores(toks))[::-1][:K], rank_queries)
    )
    return {
        "chunks": n,
        "avg_chunk_chars": round(sum(map(len, chunks)) / n),
        "generate_s": round(gen_s, 2),
        "bm25s_build_s": round(build_s, 2),
        "tokenize_s": round(tokenize_s, 2),
        "bm25s_query_p50_ms": round(bm25s_p50, 3),
        "bm25s_query_p95_ms": round(float(np.percentile(bm25s_times, 95)), 3),
        "bm25s_queries": len(queries),
        "bm25s_median_hits": int(statistics.median(hits)),
        "rank_bm25_build_s": round(rank_build_s, 2),
        "rank_bm25_query_p50_ms": round(rank_p50, 2),
        "rank_bm25_queries": n_rank,
        "speedup": round(rank_p50 / bm25s_p50, 1),
        "save_s": round(save_s, 2),
        "load_s": round(load_s, 2),
        "disk_mib": round(disk_mib, 1),
        "rss_after_corpus_mib": round(rss_base),
        "rss_peak_bm25s_mib": round(rss_bm25s),
        "rss_peak_with_rank_bm25_mib": round(_rss_mib()),
    }


def run(sizes: tuple[int, ...] = (10_000, 100_000)) -> list[dict]:
    """Benchmark each size in its own child process; one result dict per size (keys as in
    :func:`bench_one`: times in seconds or milliseconds as suffixed, memory in MiB)."""
    rows = []
    for n in sizes:
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", str(n)],
            check=True, capture_output=True, text=True,
        ).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    return rows


def render(rows: list[dict]) -> None:
    """Print ``rows`` from :func:`run` as a rich table."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title="BM25: bm25s (ancre.index.bm25) vs rank-bm25, k=30, synthetic French chunks")
    for col in (
        "chunks", "build s", "bm25s p50 ms", "bm25s p95 ms", "rank-bm25 p50 ms (queries)",
        "speedup", "rank-bm25 build s", "save / load s", "disk MiB", "RSS corpus / bm25s / +rank MiB",
    ):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(
            f"{r['chunks']:,}",
            f"{r['bm25s_build_s']:.2f}",
            f"{r['bm25s_query_p50_ms']:.2f}",
            f"{r['bm25s_query_p95_ms']:.2f}",
            f"{r['rank_bm25_query_p50_ms']:.1f} ({r['rank_bm25_queries']})",
            f"{r['speedup']:.0f}×",
            f"{r['rank_bm25_build_s']:.1f}",
            f"{r['save_s']:.2f} / {r['load_s']:.2f}",
            f"{r['disk_mib']:.1f}",
            f"{r['rss_after_corpus_mib']:,} / {r['rss_peak_bm25s_mib']:,} / "
            f"{r['rss_peak_with_rank_bm25_mib']:,}",
        )
    console = Console(width=max(Console().width, 160))
    console.print(t)
    console.print(
        f"bm25s over {rows[0]['bm25s_queries']} queries, rank-bm25 over few (it scores every chunk "
        "in Python). Build = tokenize + index. Peak RSS (ru_maxrss) per size in its own process: "
        "after generating the corpus, after the bm25s stages, after rank-bm25."
    )


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "--child":
        print(json.dumps(bench_one(int(argv[1]))))
        return
    sizes: tuple[int, ...] = (10_000, 100_000)
    if len(argv) == 2 and argv[0] == "--sizes":
        sizes = tuple(int(s) for s in argv[1].split(","))
    rows = run(sizes)
    render(rows)
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main(sys.argv[1:])
