"""The one bench command: runs every ``bench_*.py`` module of this folder and prints its table,
then a summary against the performance targets.

    .venv/bin/python tests/bench/run.py [--sizes 10000,100000] [--quick] [--only bm25,retrieval,...] [--scale-1m] [--no-write]

Each module exposes ``run(...) -> list[dict]`` and, optionally, ``render(rows)`` (its own rich
table; without it the rows are printed as a generic table) and ``summary(rows) -> list[tuple[str,
str, str]]`` (``(measure, value, target)`` lines for the final summary). ``run`` receives
``sizes``, ``quick`` and ``big`` when its signature has them. ``--quick`` runs small sizes (2 000
chunks unless ``--sizes`` is given) for a smoke check; ``--scale-1m`` (``big``) adds the million-chunk
column of the scale bench (it takes long: one build process per 250,000 chunks). A bench that fails is reported and the others
still run; the exit code is then 1.

What each bench rendered, with its summary lines and the machine it ran on, is written into
docs/BENCHMARKS.md, *Latest ``make bench`` run* (:mod:`markdown_report`: that bench's section
replaced, the others kept); not with ``--quick`` (a smoke run) nor ``--no-write``; ``--write FILE``
names another file.

Importing this file does nothing; benchmarks are commands, not tests (pytest collects nothing
here: no ``test_*`` files).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
ORDER = ("bm25", "bm25_rights", "retrieval", "scale", "ingest", "eval", "answer", "daemon", "extraction", "sharepoint")
"""Known benches first, in this order; any other ``bench_*.py`` after them, by name."""
QUICK_SIZES = (2_000,)
DEFAULT_SIZES = (10_000, 100_000)
TARGET_SIZE = 100_000
"""The targets are stated at 100k chunks."""


def available() -> list[str]:
    """Names of the bench modules present (``bench_<name>.py`` → ``<name>``), in run order."""
    names = sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    return [n for n in ORDER if n in names] + [n for n in names if n not in ORDER]


def load(name: str) -> ModuleType:
    """Import ``bench_<name>.py`` from this folder (the folder goes on ``sys.path`` so benches can
    import one another, as ``bench_retrieval`` imports ``bench_bm25``)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    module_name = f"bench_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, HERE / f"{module_name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def run_bench(module: ModuleType, sizes: tuple[int, ...] | None, quick: bool, big: bool = False) -> list[dict]:
    """Call ``module.run`` with the ``sizes`` / ``quick`` / ``big`` arguments its signature accepts."""
    params = inspect.signature(module.run).parameters
    kwargs: dict[str, object] = {}
    if big and "big" in params:
        kwargs["big"] = True
    if "sizes" in params:
        if sizes is not None:
            kwargs["sizes"] = sizes
        elif quick:
            kwargs["sizes"] = QUICK_SIZES
    if "quick" in params:
        kwargs["quick"] = quick
    return module.run(**kwargs)


def _largest(rows: list[dict]) -> dict:
    return max(rows, key=lambda r: r.get("chunks", 0))


def _verdict(ok: bool, row: dict) -> str:
    if row.get("chunks") != TARGET_SIZE:
        return f"(target is at {TARGET_SIZE:,}; measured at {row.get('chunks', 0):,})"
    return "met" if ok else "MISSED"


def _summary_bm25(rows: list[dict]) -> list[tuple[str, str, str]]:
    r = _largest(rows)
    return [
        (f"bm25s vs rank-bm25 speed-up at {r['chunks']:,}", (f"{r['speedup']:.0f}× "
         f"({r['bm25s_query_p50_ms']:.2f} vs {r['rank_bm25_query_p50_ms']:.0f} ms p50) "
         f"{_verdict(r['speedup'] >= 20, r)}"), "≥ 20× at 100k"),
    ]


def _summary_retrieval(rows: list[dict]) -> list[tuple[str, str, str]]:
    r = _largest(rows)
    after, before, during = r["retrieval_after"], r["retrieval_before"], r["during_build"]
    return [
        (f"retrieval p50 / p95 at {r['chunks']:,} (HNSW)",
         f"{after['p50_ms']:.1f} / {after['p95_ms']:.1f} ms {_verdict(after['p50_ms'] <= 50, r)}",
         "p50 ≤ 50 ms at 100k"),
        ("  before optimize (plain segments)", f"{before['p50_ms']:.1f} / {before['p95_ms']:.1f} ms", ""),
        ("  e5-local query embedding p50 (apart)", f"{r['serve']['e5_embed_p50_ms']:.1f} ms", ""),
        ("  retrieval with real e5 p50 / p95",
         f"{r['serve']['e5_total_p50_ms']:.1f} / {r['serve']['e5_total_p95_ms']:.1f} ms", ""),
        (f"index {r['chunks']:,} chunks + HNSW build",
         (f"sync path {r['index_per_doc_s'] + r['hnsw_build_alone_s']:.0f} s, "
          f"bulk {r['index_bulk_s'] + r['hnsw_build_alone_s']:.0f} s "
          f"(HNSW {r['hnsw_build_alone_s']:.0f} s)"), ""),
        ("retrieval during HNSW build p50 / p95",
         f"{during['p50_ms']:,.0f} / {during['p95_ms']:,.0f} ms", ""),
        ("BM25 rebuild from store", f"{r['bm25_rebuild_s']:.1f} s", ""),
        ("RSS of a query process (store + BM25 + e5)", f"{r['serve']['rss_e5_mib']:,} MiB", ""),
        ("peak RSS of the bench process (with its corpus)", f"{r['rss_peak_mib']:,} MiB", ""),
    ]


_SUMMARIES = {"bm25": _summary_bm25, "retrieval": _summary_retrieval}


def summary_lines(name: str, module: ModuleType, rows: list[dict]) -> list[tuple[str, str, str]]:
    """``(measure, value, target)`` lines for bench ``name``: the module's own ``summary`` if it
    has one, else the known ones above, else just the number of result rows."""
    if hasattr(module, "summary"):
        return list(module.summary(rows))
    if name in _SUMMARIES and rows:
        return _SUMMARIES[name](rows)
    return [("result rows", str(len(rows)), "")]


def _generic_table(name: str, rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    columns = list(dict.fromkeys(k for r in rows for k in r))
    t = Table(title=f"bench {name}")
    for c in columns:
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(*(str(r.get(c, "")) for c in columns))
    Console().print(t)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, run the benches, print their tables and the summary; return the exit
    code (0, or 1 if a bench failed or an unknown bench was named)."""
    from rich.console import Console
    from rich.table import Table

    names = available()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", help="comma-separated chunk counts (default 10000,100000)")
    ap.add_argument("--quick", action="store_true", help=f"small smoke run (sizes {QUICK_SIZES})")
    ap.add_argument("--only", help=f"comma-separated benches among: {','.join(names)}")
    ap.add_argument("--scale-1m", action="store_true", help="add the 1,000,000-chunk column of the scale bench")
    ap.add_argument("--no-write", action="store_true", help="do not write the tables into docs/BENCHMARKS.md")
    ap.add_argument("--write", type=Path, metavar="FILE", help="write the tables into FILE instead of docs/BENCHMARKS.md")
    ap.add_argument(
        "--stateful", type=int, metavar="N",
        help="instead of the benches, run the hypothesis rights property with N examples (e.g. 10000)",
    )
    args = ap.parse_args(argv)
    if args.stateful:
        import subprocess

        test = Path(__file__).resolve().parents[1] / "integration" / "test_rights_stateful.py"
        env = {**os.environ, "ANCRE_STATEFUL_EXAMPLES": str(args.stateful)}
        return subprocess.call([sys.executable, "-m", "pytest", "-q", str(test)], env=env)
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else None
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import markdown_report
    selected = names
    if args.only:
        selected = [s.strip() for s in args.only.split(",") if s.strip()]
        unknown = [s for s in selected if s not in names]
        if unknown:
            print(f"unknown bench(es): {', '.join(unknown)}; available: {', '.join(names)}", file=sys.stderr)
            return 1

    console = Console(width=max(Console().width, 160))
    load0 = os.getloadavg()
    console.print(
        f"ancre benchmarks: {', '.join(selected)}; sizes {sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)}; "
        f"{os.cpu_count()} cores; load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}"
    )
    results: list[tuple[str, str, float, list[tuple[str, str, str]]]] = []
    sections: dict[str, str] = {}
    for name in selected:
        console.rule(f"bench {name}")
        t0, start_load = time.perf_counter(), os.getloadavg()
        with markdown_report.capture() as shown:
            try:
                module = load(name)
                rows = run_bench(module, sizes, args.quick, args.scale_1m)
                if hasattr(module, "render"):
                    module.render(rows)
                else:
                    _generic_table(name, rows)
                lines = summary_lines(name, module, rows)
                status = "ok"
            except Exception as exc:  # noqa: BLE001 - one failing bench must not hide the others
                traceback.print_exc()
                lines, status = [("error", f"{type(exc).__name__}: {exc}"[:200], "")], "FAILED"
        elapsed = time.perf_counter() - t0
        results.append((name, status, elapsed, lines))
        sections[name] = markdown_report.section(name, shown, lines, argv=list(argv if argv is not None else sys.argv[1:]),
                                                 seconds=elapsed, load=(start_load, os.getloadavg()), status=status)

    t = Table(title="Summary")
    for col in ("bench", "status", "time s", "measure", "value", "target"):
        t.add_column(col)
    for name, status, elapsed, lines in results:
        for i, (measure, value, target) in enumerate(lines):
            head = (name, status, f"{elapsed:.0f}") if i == 0 else ("", "", "")
            t.add_row(*head, measure, value, target)
    console.print(t)
    load1 = os.getloadavg()
    console.print(f"load average at the end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    if args.write or not (args.quick or args.no_write):
        target = args.write or markdown_report.DOC
        markdown_report.write(sections, names, target)
        console.print(f"tables written into {target}")
    return 0 if all(status == "ok" for _, status, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
