"""Exposure report benchmark: ``ancre report exposure`` from the index alone, time and memory.

Run: ``.venv/bin/python tests/bench/bench_exposure.py [--sizes 10000,100000] [--quick]`` (a
command, not a test); ``make bench`` runs it as ``--only exposure``.

Per size ``N``, in a child process of its own (so its peak RSS is its own): the synthetic corpus
of ``bench_retrieval`` (French chunks of ~1,000 characters from ``bench_bm25``, documents of 10–20
chunks, 1–3 allowed groups of 40, Authenticated Users on 10 % of the documents, some denies),
with sensitive data planted in 3 % of the documents (a valid AVS number, a valid IBAN, a salary
line) and, as decoys, AVS numbers and IBANs with a wrong check digit in 3 % more; written to the
embedded store in bulk; a file directory of the corpus's 300 users. Then
:func:`ancre.reports.exposure.exposure_report` without asking the sources (``--no-explain``):
wall and CPU seconds, chunks per second, the process's peak RSS before and after the report
measured in a fresh process that only opens the store and the directory, as the command does:
``VmRSS`` once open, then peak ``VmHWM``), the documents found exposed and sensitive — checked
against the planted truth.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

PLANT_SHARE = 0.03
DECOY_SHARE = 0.03
VALID = "N° AVS : 756.9217.0769.85, IBAN : CH93 0076 2011 6238 5295 7, salaire mensuel brut CHF 7 400."
DECOY = "Réf. 756.9217.0769.84, compte CH94 0076 2011 6238 5295 7."


def _rss_mib() -> float:
    import bench_retrieval

    return bench_retrieval._rss_mib()


def _current_mib() -> float:
    """``VmRSS`` of this process in MiB."""
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def bench_one(n: int, workdir: Path | None = None) -> dict:
    """Build the index of ``n`` chunks and time the report (see the module doc)."""
    import bench_retrieval
    import numpy as np

    from ancre.models import AUTHENTICATED_USERS, COLLECTIONS, EVERYONE
    from ancre.reports.exposure import ExposureReport

    tmp = Path(tempfile.mkdtemp(prefix="ancre-bench-exposure-", dir=workdir))
    try:
        c = bench_retrieval.make_corpus(n)
        rng = np.random.default_rng(5)
        n_docs = len(c.doc_starts)
        kinds = rng.random(n_docs)
        planted, decoys = set(), set()
        for d in range(n_docs):
            if kinds[d] < PLANT_SHARE:
                planted.add(d)
                c.texts[c.doc_starts[d]] = c.texts[c.doc_starts[d]] + " " + VALID
            elif kinds[d] < PLANT_SHARE + DECOY_SHARE:
                decoys.add(d)
                c.texts[c.doc_starts[d]] = c.texts[c.doc_starts[d]] + " " + DECOY
        store = bench_retrieval._open_store(tmp / "store")
        docs = [bench_retrieval._doc_points(c, d) for d in range(n_docs)]
        for coll in COLLECTIONS:
            pts = [p for cl, ps in docs if cl == coll for p in ps]
            for i in range(0, len(pts), bench_retrieval.BULK_BATCH):
                store.upsert(coll, pts[i : i + bench_retrieval.BULK_BATCH])
        del docs

        domain = bench_retrieval.DOMAIN.removeprefix("sid:")
        groups = {f"G{g:02d}": {"sid": f"{domain}-{1100 + g}", "member_of": []} for g in range(bench_retrieval.N_GROUPS)}
        by_sid = {f"sid:{v['sid']}": k for k, v in groups.items()}
        users = {}
        broad = {d for d in range(n_docs) if AUTHENTICATED_USERS in c.doc_allow[d] or EVERYONE in c.doc_allow[d]}
        for u, token in enumerate(c.users):
            users[f"u{u:03d}"] = {"sid": f"{domain}-{5000 + u}",
                                  "groups": sorted(by_sid[p] for p in token if p in by_sid)}
        (tmp / "directory.json").write_text(json.dumps({"domain_sid": domain, "netbios": "BENCH", "groups": groups,
                                                        "users": users}), encoding="utf-8")
        store.close()
        del c
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--report", str(tmp)], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        m = json.loads(out.strip().splitlines()[-1])
        rep = ExposureReport.model_validate(m["report"])
        wall, cpu, rss_before, rss_after = m["seconds"], m["cpu_s"], m["rss_open_mib"], m["rss_peak_mib"]

        def ids(d: object) -> dict[str, int]:
            return {x.kind.value: x.count for x in d.findings if x.kind.value in ("avs", "iban")}  # type: ignore[attr-defined]

        with_ids = {d.doc_id: ids(d) for f in rep.folders for d in f.documents if ids(d)}
        exposed = {d.doc_id for f in rep.folders for d in f.documents}
        share_exposed = exposed - {f"bench:{d:06d}" for d in broad}  # > 80 % of the users through their groups
        expect_found = {f"bench:{d:06d}" for d in planted} & exposed
        planted_ok = set(with_ids) == expect_found and all(v == {"avs": 1, "iban": 1} for v in with_ids.values())
        decoy_hits = {f"bench:{d:06d}" for d in decoys} & set(with_ids)
        return {
            "chunks": rep.chunks, "documents": rep.documents, "exposed": rep.exposed, "sensitive": rep.sensitive,
            "exposed_by_share": len(share_exposed), "seconds": round(wall, 2), "cpu_s": round(cpu, 2),
            "chunks_per_s": round(rep.chunks / wall), "rss_before_mib": round(rss_before), "rss_peak_mib": round(rss_after),
            "planted_found": planted_ok, "planted_exposed": len(expect_found), "decoys_reported": len(decoy_hits),
            "loadavg_1m_end": round(os.getloadavg()[0], 2),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report_child(tmp: Path) -> dict:
    """In a fresh process, as ``ancre report exposure --no-explain`` would: open the store and the
    directory of ``tmp``, run the report; its time, CPU time, RSS once open and peak RSS (MiB)."""
    import bench_retrieval

    from ancre.acl.directory import FileDirectory
    from ancre.acl.providers import DirectoryProvider, PrincipalResolver
    from ancre.index.edge_store import EdgeStore
    from ancre.reports.exposure import exposure_report
    from ancre.settings.reports import ReportsConfig

    store = EdgeStore(tmp / "store")
    store.open("bench:random-unit-vectors", bench_retrieval.DIM)
    directory = FileDirectory(tmp / "directory.json")
    rss_open = _current_mib()
    t0, cpu0 = time.perf_counter(), time.process_time()
    rep = exposure_report(store, directory, PrincipalResolver([DirectoryProvider(directory)]), ReportsConfig())
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    peak = _rss_mib()
    store.close()
    return {"seconds": round(wall, 2), "cpu_s": round(cpu, 2), "rss_open_mib": round(rss_open), "rss_peak_mib": round(peak),
            "report": rep.model_dump(mode="json")}


def run(sizes: tuple[int, ...] = (10_000, 100_000)) -> list[dict]:
    """Each size in its own child process; one dict per size (see :func:`bench_one`)."""
    rows = []
    for n in sizes:
        load = os.getloadavg()[0]
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(n)], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        row["loadavg_1m_start"] = round(load, 2)
        rows.append(row)
    return rows


def render(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="exposure report (index only, --no-explain)")
    for col in ("chunks", "docs", "exposed (share)", "sensitive", "planted ok / decoys",
                "s (CPU s)", "chunks/s", "RSS open / peak MiB", "load"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(f"{r['chunks']:,}", f"{r['documents']:,}", f"{r['exposed']:,} ({r['exposed_by_share']:,})",
                  f"{r['sensitive']:,}", f"{'yes' if r['planted_found'] else 'NO'} / {r['decoys_reported']}",
                  f"{r['seconds']:.1f} ({r['cpu_s']:.1f})", f"{r['chunks_per_s']:,}",
                  f"{r['rss_before_mib']} / {r['rss_peak_mib']}", f"{r['loadavg_1m_start']}–{r['loadavg_1m_end']}")
    Console(width=max(Console().width, 140)).print(t)


def summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    big = max(rows, key=lambda r: r["chunks"])
    ok = big["planted_found"] and big["decoys_reported"] == 0
    return [(f"exposure report at {big['chunks']:,} chunks: time / peak RSS",
             f"{big['seconds']:.1f} s / {big['rss_peak_mib']} MiB{'' if ok else ' (planted data MISSED)'}",
             "minutes")]


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--child"]:
        print(json.dumps(bench_one(int(args[1]))))
    elif args[:1] == ["--report"]:
        print(json.dumps(report_child(Path(args[1]))))
    else:
        sizes = (2_000,) if "--quick" in args else (10_000, 100_000)
        if "--sizes" in args:
            sizes = tuple(int(s) for s in args[args.index("--sizes") + 1].split(","))
        result = run(sizes)
        render(result)
