"""Extraction limits benchmark: peak memory and seconds of ``ancre sync`` on a folder
holding a document that inflates enormously, next to a normal one.

Run: ``.venv/bin/python tests/bench/bench_extraction.py`` (a command, not a test), or through
``tests/bench/run.py --only extraction``. Each row is one ``ancre sync`` in a fresh process
(:func:`support.measure.measure_sync`, e5-local, embedded store) on a new folder: the peak RSS of
the sync process and of its extraction worker (their sum bounds the process tree's peak; the
issue's bound is 500 MB), the seconds of the sync, and the status the big file got. The files are
built here: a Word file of ~2 MB whose ``word/document.xml`` inflates to 300 MB, a workbook whose
sheet inflates to 100 MB, and a one-page Word file alone as the baseline.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ → `support`

import contextlib

from support.hostile import expanding_docx, simple_docx, xlsx_with_sheet_xml
from support.measure import measure_sync, office_config

CASES = (
    ("one-page .docx alone (baseline)", None, None),
    ("300 MB-expanding .docx (word/document.xml)", "gonfle.docx", lambda: expanding_docx(300)),
    ("100 MB-expanding .xlsx (one sheet)", "feuille.xlsx", lambda: xlsx_with_sheet_xml("Données", inflated_mb=100)),
)


def _status_of(cfg: Path, name: str) -> str:
    from ancre.app.runtime import Runtime
    from ancre.config import load_settings

    with Runtime(load_settings(cfg)) as rt:
        row = next(r for r in rt.state.all_items() if r.path.endswith(name))
    return f"{row.status}: {(row.reason or '').split(' > ')[-1]}" if row.reason else row.status


def _decide_ms(data: bytes, name: str) -> float:
    """Milliseconds :func:`extract_bytes` takes to settle the file (in this process)."""
    import time

    from ancre.errors import ExtractionError
    from ancre.ingest.extract import extract_bytes

    t0 = time.perf_counter()
    with contextlib.suppress(ExtractionError):
        extract_bytes(data, name)
    return round((time.perf_counter() - t0) * 1000, 1)


def run(quick: bool = False) -> list[dict]:
    """One row per case: ``case``, ``file_mib``, ``peak_rss_mib`` (sync + worker), ``self_mib``,
    ``worker_mib``, ``seconds`` (the whole sync: model load and the normal file included),
    ``decide_ms`` (extraction of the big file alone until its status is known), ``status``."""
    rows = []
    for label, name, build in CASES:
        with tempfile.TemporaryDirectory(prefix="ancre-bench-extract-") as tmp:
            root = Path(tmp)
            share = root / "share" / "Contrats"
            share.mkdir(parents=True)
            (share / "normal.docx").write_bytes(simple_docx("Contrat", ["Le forfait mensuel est de CHF 3 840 HT."]))
            size, decide_ms = 0, None
            if build is not None and name is not None:
                data = build()
                size = len(data)
                (share / name).write_bytes(data)
                decide_ms = _decide_ms(data, name)
                del data
            cfg = office_config(root)
            m = measure_sync(cfg)
            rows.append({
                "case": label, "file_mib": round(size / 2**20, 2),
                "peak_rss_mib": round(m["self_mib"] + m["worker_mib"], 1), "self_mib": round(m["self_mib"], 1),
                "worker_mib": round(m["worker_mib"], 1), "seconds": round(m["seconds"], 2),
                "status": _status_of(cfg, name) if name else "-", "decide_ms": decide_ms,
            })
    return rows


def render(rows: list[dict]) -> None:
    """Print ``rows`` as a table."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title="ancre sync on a document over the extraction limits (fresh process, e5-local)")
    for col in ("case", "file MiB", "peak RSS MiB (sync + worker)", "sync s", "big file settled in", "status of the big file"):
        t.add_column(col, justify="left" if col in ("case", "status of the big file") else "right")
    for r in rows:
        t.add_row(r["case"], f"{r['file_mib']:.2f}", f"{r['peak_rss_mib']:.0f} ({r['self_mib']:.0f} + {r['worker_mib']:.0f})",
                  f"{r['seconds']:.2f}", "-" if r["decide_ms"] is None else f"{r['decide_ms']:.1f} ms", r["status"])
    Console().print(t)


def summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    """``(measure, value, target)`` for the bench runner."""
    r = next(r for r in rows if r["case"].startswith("300 MB"))
    verdict = "met" if r["peak_rss_mib"] < 500 else "MISSED"
    return [("sync of a 300 MB-expanding .docx", f"peak RSS {r['peak_rss_mib']:.0f} MiB, {r['seconds']:.1f} s {verdict}",
             "< 500 MB, seconds")]


if __name__ == "__main__":
    out = run(quick="--quick" in sys.argv[1:])
    render(out)
    print(json.dumps(out, indent=1))
