"""Daemon benchmark: event-to-searchable delay of ``ancre daemon`` (issue 5: p95 ≤ 3 s, excluding
the embedding of large files).

Run: ``.venv/bin/python tests/bench/bench_daemon.py`` (a command, not a test), or through
``tests/bench/run.py --only daemon``. From code: ``run()`` returns one dict per kind of change plus
an ``all`` row; :func:`render` prints them as a table.

The daemon runs as a subprocess (e5-local, embedded store, the default debounce of 0.75 s) on a
temporary folder of small text files plus two corpus documents. Twenty changes are made one after
the other — creations, modifications, editor saves (lock file + temp file renamed onto the
document), renames and deletions — and each is timed from the file-system operation until the
daemon's loopback search shows it: the new words found by the keyword side (so the BM25
generation with the change is published), or the path gone. The daemon's own
``ancre_event_to_searchable_seconds`` observations (first event → BM25 published) are reported too.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ → `support`

from support.corpus import CORPUS  # noqa: E402
from support.daemon_proc import DaemonProc, token, write_daemon_config  # noqa: E402

N_CHANGES = 20
KINDS = ("create", "modify", "editor save", "rename", "delete")


def _p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(0.95 * len(s) + 0.5) - 1))]


def _change(d: DaemonProc, root: Path, kind: str, i: int, live: list[str]) -> float:
    docs = root / "docs"
    t0 = time.monotonic()
    if kind == "create":
        name = f"new{i}.txt"
        (docs / name).write_text(f"nouveau fichier {token(100 + i)}", encoding="utf-8")
        live.append(name)
        d.wait_for(lambda: f"docs/{name}" in d.bm25_paths(token(100 + i)), f"create {name}", every=0.02)
    elif kind == "modify":
        name = live[0]
        (docs / name).write_text(f"contenu modifié {token(100 + i)}", encoding="utf-8")
        d.wait_for(lambda: f"docs/{name}" in d.bm25_paths(token(100 + i)), f"modify {name}", every=0.02)
    elif kind == "editor save":
        name = live[-1]
        lock = docs / f"~${name}"
        lock.write_text("verrou", encoding="utf-8")
        tmp = docs / f"{name}.tmp"
        tmp.write_text(f"enregistré {token(100 + i)}", encoding="utf-8")
        os.replace(tmp, docs / name)
        lock.unlink()
        d.wait_for(lambda: f"docs/{name}" in d.bm25_paths(token(100 + i)), f"save {name}", every=0.02)
    elif kind == "rename":
        old = live.pop(0)
        new = f"renamed{i}.txt"
        text = (docs / old).read_text(encoding="utf-8")
        os.rename(docs / old, docs / new)
        live.append(new)
        word = text.split()[-1]
        d.wait_for(lambda: d.bm25_paths(word) == {f"docs/{new}"}, f"rename {old}", every=0.02)
    else:
        name = live.pop(0)
        word = (docs / name).read_text(encoding="utf-8").split()[-1]
        (docs / name).unlink()
        d.wait_for(lambda: f"docs/{name}" not in d.all_paths(word), f"delete {name}", every=0.02)
    return time.monotonic() - t0


def run(quick: bool = False) -> list[dict]:
    """Start a daemon, make ``N_CHANGES`` changes (10 with ``quick``), return delay statistics per
    kind of change and overall (seconds)."""
    n = 10 if quick else N_CHANGES
    with tempfile.TemporaryDirectory(prefix="ancre-bench-daemon-") as tmp:
        base = Path(tmp)
        root = base / "tree"
        (root / "docs").mkdir(parents=True)
        for j in range(8):
            (root / "docs" / f"f{j}.txt").write_text(f"fichier de départ {token(j)}", encoding="utf-8")
        for rel in ("DOCUMENTATION/Politique_Securite_SI.pdf", "CLIENTS/21_Contrat_Maintenance_Baumont_Industries.docx"):
            shutil.copy2(CORPUS / "share" / rel, root / Path(rel).name)
        cfg = write_daemon_config(base, daemon={"debounce_s": 0.75})
        d = DaemonProc(cfg).start()
        live = [f"f{j}.txt" for j in range(8)]
        measured: list[tuple[str, float]] = []
        try:
            d.wait_idle(timeout=180)
            for i in range(n):
                kind = KINDS[i % len(KINDS)]
                measured.append((kind, _change(d, root, kind, i, live)))
                d.wait_idle()
            internal = list(d.status()["delays_s"])  # type: ignore[index]
            d.stop(timeout=10)
        finally:
            d.kill()
    rows = []
    for kind in (*KINDS, "all"):
        xs = [s for k, s in measured if kind in (k, "all")]
        if xs:
            rows.append({"change": kind, "n": len(xs), "median_s": round(statistics.median(xs), 3),
                         "p95_s": round(_p95(xs), 3), "max_s": round(max(xs), 3)})
    if internal:
        rows.append({"change": "daemon histogram (event → BM25 published)", "n": len(internal),
                     "median_s": round(statistics.median(internal), 3), "p95_s": round(_p95(internal), 3),
                     "max_s": round(max(internal), 3)})
    return rows


def render(rows: list[dict]) -> None:
    """Print ``rows`` as a table."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title="ancre daemon: event-to-searchable delay (debounce 0.75 s)")
    for col in ("change", "n", "median s", "p95 s", "max s"):
        t.add_column(col, justify="left" if col == "change" else "right")
    for r in rows:
        t.add_row(r["change"], str(r["n"]), f"{r['median_s']:.2f}", f"{r['p95_s']:.2f}", f"{r['max_s']:.2f}")
    Console().print(t)


def summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    """``(measure, value, target)`` for the bench runner."""
    r = next(r for r in rows if r["change"] == "all")
    verdict = "met" if r["p95_s"] <= 3.0 else "MISSED"
    return [(f"event-to-searchable over {r['n']} changes", f"median {r['median_s']:.2f} s, p95 {r['p95_s']:.2f} s {verdict}",
             "p95 ≤ 3 s")]


if __name__ == "__main__":
    out = run(quick="--quick" in sys.argv[1:])
    render(out)
    for line in summary(out):
        print(" | ".join(line))
