"""Rights-aware BM25 candidates at 100k chunks: does a user who may read 1 %, 10 % or
100 % of the index get the keyword matches an index of only *his* chunks would give, and what does
the rights mask cost?

Run: ``.venv/bin/python tests/run.py --only bm25_rights`` (or this file directly). Synthetic French
chunks from ``bench_bm25.make_chunks``; documents of 10 chunks, each in one of 100 departments
(one allow group each; one document in 7 also denies a trainee group). The users are nested: the
1 % user reads department 0, the 10 % user departments 0–9, the 100 % user all of them (each also
holds Everyone, Authenticated Users and a dozen unrelated groups, as real tokens do).

- **Planted codes**: for each of 20 queries a code appears in 5 chunks the 1 % user may read and,
  three times each, in 60 chunks of departments only the 100 % user reads. Recall@30 is the share
  of the relevant chunks (those with the code that the user may read, at most 30) in his top 30:
  with the mask, with an index built of his chunks alone, and unmasked (top 30 over
  everything, then the rights re-read).
- **Natural queries** (Zipfian words): overlap of his masked top 30 with the top 30 of the index
  of his chunks alone (IDF differs: the whole snapshot's vs his chunks'; ranks barely move).
- **Cost**: query p50 with and without the mask, and the mask alone, at 100k chunks.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

K = 30
DEPARTMENTS = 100
CHUNKS_PER_DOC = 10
N_CODES = 20
EVERYONE, AUTH = "sid:S-1-1-0", "sid:S-1-5-11"
TRAINEES = "sid:S-1-5-21-1-1999"
USERS = {"1 %": 1, "10 %": 10, "100 %": 100}


def _group(dept: int) -> str:
    return f"sid:S-1-5-21-1-{2000 + dept}"


def _principals(departments: int) -> frozenset[str]:
    extra = {f"sid:S-1-5-21-1-{5000 + i}" for i in range(12)}
    return frozenset({EVERYONE, AUTH, *extra, *(_group(d) for d in range(departments))})


def bench_one(n: int) -> dict:
    """One size in this process."""
    import numpy as np
    from bench_bm25 import make_chunks

    from ancre.index.bm25 import Bm25Entry, Bm25Index

    chunks, filenames, queries = make_chunks(n)
    dept_of = [(i // CHUNKS_PER_DOC) % DEPARTMENTS for i in range(n)]
    rng = np.random.default_rng(11)
    codes = [f"QX-{j:03d}-NEEDLE" for j in range(N_CODES)]
    in_dept0 = [i for i in range(n) if dept_of[i] == 0]
    only_all = [i for i in range(n) if dept_of[i] >= 10]
    planted: dict[str, list[int]] = {}
    for code in codes:
        mine = [int(i) for i in rng.choice(in_dept0, 5, replace=False)]
        theirs = [int(i) for i in rng.choice(only_all, 60, replace=False)]
        for i in mine:
            chunks[i] += f" Référence {code}."
        for i in theirs:
            chunks[i] += f" Référence {code} {code} {code}."
        planted[code] = mine + theirs
    entries = []
    for i, (text, fname) in enumerate(zip(chunks, filenames, strict=False)):
        doc = i // CHUNKS_PER_DOC
        deny = (TRAINEES,) if doc % 7 == 0 else ()
        entries.append(Bm25Entry(f"p{i}", "documents", text, fname, (_group(dept_of[i]),), deny))
    t0 = time.perf_counter()
    full = Bm25Index.build(entries)
    build_s = time.perf_counter() - t0

    rows = []
    for label, depts in USERS.items():
        principals = _principals(depts)
        readable = [i for i in range(n) if dept_of[i] < depts]
        own = full if depts == DEPARTMENTS else Bm25Index.build([entries[i] for i in readable])
        readable_ids = {f"p{i}" for i in readable}
        rec_mask, rec_own, rec_before = [], [], []
        for code in codes:
            relevant = {f"p{i}" for i in planted[code]} & readable_ids
            q = f"Que dit la référence {code} ?"
            denom = min(K, len(relevant))
            masked = {h.point_id for h in full.search(q, K, principals)}
            alone = {h.point_id for h in own.search(q, K)}
            before = {h.point_id for h in full.search(q, K)} & readable_ids  # then the re-read
            rec_mask.append(len(masked & relevant) / denom)
            rec_own.append(len(alone & relevant) / denom)
            rec_before.append(len(before & relevant) / denom)
        overlap = []
        for q in queries:
            alone = [h.point_id for h in own.search(q, K)]
            masked = [h.point_id for h in full.search(q, K, principals)]
            if alone:
                overlap.append(len(set(alone) & set(masked)) / len(alone))
        masked_ms, plain_ms, mask_ms = [], [], []
        for q in queries:
            t0 = time.perf_counter()
            full.search(q, K, principals)
            masked_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            full.search(q, K)
            plain_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            full.readable_mask(principals)
            mask_ms.append((time.perf_counter() - t0) * 1000)
        rows.append({
            "chunks": n, "user": label, "readable_chunks": len(readable),
            "recall30_masked": round(statistics.mean(rec_mask), 3),
            "recall30_own_index": round(statistics.mean(rec_own), 3),
            "recall30_before": round(statistics.mean(rec_before), 3),
            "overlap30_natural": round(statistics.mean(overlap), 3),
            "p50_masked_ms": round(statistics.median(masked_ms), 3),
            "p50_unmasked_ms": round(statistics.median(plain_ms), 3),
            "mask_p50_ms": round(statistics.median(mask_ms), 3),
            "distinct_acls": len({(e.acl_allow, e.acl_deny) for e in entries}),
            "build_s": round(build_s, 1),
        })
    return {"rows": rows}


def run(sizes: tuple[int, ...] = (100_000,)) -> list[dict]:
    """Each size in a child process (like ``bench_bm25``); one row per user and size."""
    rows: list[dict] = []
    for n in sizes:
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", str(n)],
            check=True, capture_output=True, text=True,
        ).stdout
        rows.extend(json.loads(out.strip().splitlines()[-1])["rows"])
    return rows


def render(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="BM25 with the rights mask: recall@30 vs an index of only the user's chunks; cost")
    for c in ("chunks", "user reads", "recall@30 masked", "recall@30 own index", "recall@30 before (top 30 then re-read)",
              "overlap@30 natural queries", "p50 masked / unmasked ms", "mask alone p50 ms"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(
            f"{r['chunks']:,}", f"{r['user']} ({r['readable_chunks']:,})", f"{r['recall30_masked']:.3f}",
            f"{r['recall30_own_index']:.3f}", f"{r['recall30_before']:.3f}", f"{r['overlap30_natural']:.3f}",
            f"{r['p50_masked_ms']:.2f} / {r['p50_unmasked_ms']:.2f}", f"{r['mask_p50_ms']:.3f}",
        )
    Console(width=max(Console().width, 160)).print(t)


def summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    out = []
    for r in rows:
        equal = r["recall30_masked"] == r["recall30_own_index"]
        out.append((
            f"recall@30 {r['user']} of {r['chunks']:,}: masked / own index / before",
            (f"{r['recall30_masked']:.2f} / {r['recall30_own_index']:.2f} / {r['recall30_before']:.2f} "
             f"{'equal' if equal else 'DIFFER'}; p50 {r['p50_masked_ms']:.2f} vs {r['p50_unmasked_ms']:.2f} ms"),
            "masked = own index",
        ))
    return out


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(bench_one(int(sys.argv[2]))))
    else:
        rows = run()
        render(rows)
