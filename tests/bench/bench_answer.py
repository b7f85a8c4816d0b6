"""Answer-path benchmark: how long one user's short question takes while other users' long
questions are in flight, and what the audit record adds to each question.

Run: ``.venv/bin/python tests/bench/bench_answer.py [--quick]`` (a command, not a test), or
through ``tests/bench/run.py``. ``run()`` returns the rows, :func:`render` prints them,
:func:`summary` gives the summary lines.

Setup: the Axonix corpus (``examples/axonix``) copied and synced with the real e5-local
embedder into the embedded store; the API served by uvicorn on 127.0.0.1 (``ApiServer``) in
extractive mode (no language model: what is measured is ancre's own path — identity, directory,
embedding, vector and BM25 search, live rights check, context, gate, audit); clients are httpx
threads posting ``/v1/chat/completions`` (not streamed) as Open WebUI's users would.

- **short questions**: the corpus' own questions (``questions.json``, 40–90 characters), asked
  one after the other by one user: p50 / p95 of their wall time, **idle** (nothing else in
  flight) and with **N long questions in flight** (N users each asking, back to back, a
  4,000-character question — ``api.max_question_chars``, the longest the API accepts). Target:
  p95 with the long ones within 2× the idle p95.
- **audit**: the same short questions on a second API over the same index with the audit off,
  interleaved with the first: the difference of the medians is what the record costs a question
  (one ``answer`` record, fsync'd, and its mark in the state witness — the default); and
  ``AuditLog.append`` timed alone (an ``answer`` record; a streamed answer's ``start`` +
  ``outcome``; an ``answer`` record with the state witness).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LONG_IN_FLIGHT = 3
KEY = "bench-service-key-0123456789"
HEADERS = {"Authorization": f"Bearer {KEY}", "X-OpenWebUI-User-Email": "alice.martin@axonix.ch"}


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def _stats(label: str, ms: list[float]) -> dict:
    return {"phase": label, "questions": len(ms), "p50_ms": round(_pct(ms, 0.5), 1), "p95_ms": round(_pct(ms, 0.95), 1),
            "max_ms": round(max(ms), 1)}


def _long_question(corpus: Path, chars: int) -> str:
    """A real question preceded by real corpus text, ``chars`` characters in all."""
    md = (corpus / "share" / "DOCUMENTATION" / "09-pipeline-llm.md").read_text(encoding="utf-8")
    q = " Quel est le forfait mensuel du contrat de maintenance de Baumont Industries ?"
    body = (" ".join(md.split()) + " ") * (chars // max(1, len(md)) + 2)
    return body[: chars - len(q)] + q


def run(quick: bool = False) -> list[dict]:
    """The rows (see the module doc); ``quick``: fewer questions."""
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    sys.path.insert(0, str(REPO / "tests"))
    import httpx
    from support.corpus import copy_corpus, load_question_set, write_config

    from ancre.api.app import create_app
    from ancre.app.runtime import Runtime
    from ancre.app.server import ApiServer
    from ancre.audit.chain import Sealer
    from ancre.audit.record import AuditKind, AuditLog, AuditOutcome, AuditRecord
    from ancre.audit.witness import StateWitness
    from ancre.config import load_settings
    from ancre.models import Acl
    from ancre.query import QueryCore
    from ancre.query.context import Source
    from ancre.query.grounding import Verdict
    from ancre.settings.query import AuditConfig

    rounds = 8 if quick else 30
    with tempfile.TemporaryDirectory(prefix="ancre-bench-answer-") as tmp:
        root = copy_corpus(Path(tmp) / "corpus")
        settings = load_settings(write_config(root), api={"api_key": KEY})
        questions = [q["q"] for q in load_question_set(root / "questions.json")][:8]
        long_q = _long_question(root, settings.api.max_question_chars)
        rows: list[dict] = []
        with Runtime(settings) as rt:
            t0 = time.perf_counter()
            for conn in rt.connectors():
                rt.engine.run_pass(conn)
            sync_s = time.perf_counter() - t0
            audited = ApiServer(create_app(rt.query_core, settings), limits=settings.api).start()
            quiet = settings.model_copy(update={"audit": AuditConfig(enabled=False)})
            core_quiet = QueryCore(quiet, rt.query_core.parts)
            unaudited = ApiServer(create_app(core_quiet, quiet), limits=settings.api).start()
            http = httpx.Client(timeout=600)

            def ask(url: str, q: str) -> float:
                body = {"model": "ancre", "messages": [{"role": "user", "content": q}]}
                t = time.perf_counter()
                r = http.post(f"{url}/v1/chat/completions", json=body, headers=HEADERS)
                r.raise_for_status()
                return (time.perf_counter() - t) * 1000

            def shorts(url: str, n: int) -> list[float]:
                return [ask(url, questions[i % len(questions)]) for i in range(n)]

            try:
                shorts(audited.url, 4)  # warm: model pages, caches, connections
                ask(audited.url, long_q)
                idle = shorts(audited.url, rounds)
                long_alone = [ask(audited.url, long_q) for _ in range(3 if quick else 5)]

                stop = threading.Event()
                done_long: list[float] = []

                def long_user() -> None:
                    with httpx.Client(timeout=600) as own:
                        body = {"model": "ancre", "messages": [{"role": "user", "content": long_q}]}
                        while not stop.is_set():
                            t = time.perf_counter()
                            own.post(f"{audited.url}/v1/chat/completions", json=body, headers=HEADERS).raise_for_status()
                            done_long.append((time.perf_counter() - t) * 1000)

                users = [threading.Thread(target=long_user, daemon=True) for _ in range(LONG_IN_FLIGHT)]
                for u in users:
                    u.start()
                time.sleep(1.0)  # every long user has one in flight
                loaded = shorts(audited.url, rounds)
                stop.set()
                for u in users:
                    u.join(600)

                on, off = [], []
                for i in range(rounds):
                    q = questions[i % len(questions)]
                    on.append(ask(audited.url, q))
                    off.append(ask(unaudited.url, q))
            finally:
                http.close()
                audited.stop()
                unaudited.stop()
                core_quiet.close()

        rows.append(_stats("short, idle", idle))
        rows.append(_stats(f"short, {LONG_IN_FLIGHT} long in flight", loaded))
        rows.append(_stats("long (4,000 characters), alone", long_alone))
        if done_long:
            rows.append(_stats(f"long, {LONG_IN_FLIGHT} at once", done_long))
        rows.append(_stats("short, audit on", on))
        rows.append(_stats("short, audit off", off))

        log = AuditLog(Path(tmp) / "audit")
        acl = Acl(frozenset({"sid:S-1-5-21-1-1001"}))
        src = Source("21_Contrat.docx", "partage:CLIENTS/21_Contrat.docx", "CLIENTS/21_Contrat.docx",
                     "\\\\SRV\\Partage\\CLIENTS\\", "documents", acl.digest(), 0.03)
        verdict = Verdict(True, (), (), ("21_Contrat.docx",), "effectuee")
        answer_ms, stream_ms = [], []
        for _ in range(20 if quick else 100):
            rec = AuditRecord("alice", frozenset({"sid:S-1-1-0"}), "Quel est le forfait ?", (src,), verdict,
                              {"total": 900.0}, datetime.now(UTC))
            t = time.perf_counter()
            log.append(rec)
            answer_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            start = AuditRecord("alice", frozenset({"sid:S-1-1-0"}), "Quel est le forfait ?", (src,), None,
                                {"retrieval": 300.0}, kind=AuditKind.START)
            log.append(start)
            log.append(AuditOutcome(start.id, "alice", verdict, {"total": 900.0}))
            stream_ms.append((time.perf_counter() - t) * 1000)
        log.close()
        rows.append(_stats("AuditLog.append: answer record", answer_ms))
        rows.append(_stats("AuditLog.append: start + outcome", stream_ms))
        witness = StateWitness(Path(tmp) / "w" / "state.sqlite3", Path(tmp) / "audit-w", Sealer())
        log = AuditLog(Path(tmp) / "audit-w", witnesses=[witness])
        witnessed_ms = []
        for _ in range(20 if quick else 100):
            rec = AuditRecord("alice", frozenset({"sid:S-1-1-0"}), "Quel est le forfait ?", (src,), verdict,
                              {"total": 900.0}, datetime.now(UTC))
            t = time.perf_counter()
            log.append(rec)
            witnessed_ms.append((time.perf_counter() - t) * 1000)
        log.close()
        rows.append(_stats("AuditLog.append: answer record, state witness", witnessed_ms))
        for r in rows:
            r["sync_s"] = round(sync_s, 1)
        return rows


def _row(rows: list[dict], phase: str) -> dict:
    return next(r for r in rows if r["phase"] == phase)


def summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    """Summary lines: short questions idle / loaded against the 2× target, the audit's cost."""
    idle, loaded = _row(rows, "short, idle"), _row(rows, f"short, {LONG_IN_FLIGHT} long in flight")
    on, off = _row(rows, "short, audit on"), _row(rows, "short, audit off")
    ratio = loaded["p95_ms"] / idle["p95_ms"] if idle["p95_ms"] else float("inf")
    append = _row(rows, "AuditLog.append: answer record")
    stream = _row(rows, "AuditLog.append: start + outcome")
    witnessed = _row(rows, "AuditLog.append: answer record, state witness")
    return [
        ("short question p50 / p95, idle", f"{idle['p50_ms']:,.0f} / {idle['p95_ms']:,.0f} ms", ""),
        (f"short question p50 / p95, {LONG_IN_FLIGHT} long (4,000 chars) in flight",
         (f"{loaded['p50_ms']:,.0f} / {loaded['p95_ms']:,.0f} ms (p95 {ratio:.2f}× idle) "
          f"{'met' if ratio <= 2 else 'MISSED'}"), "p95 ≤ 2× idle"),
        ("audit's added latency per question (p50 on − off)",
         f"{on['p50_ms'] - off['p50_ms']:+.1f} ms ({on['p50_ms']:,.0f} vs {off['p50_ms']:,.0f} ms)", ""),
        ("  AuditLog.append p50: answer / start + outcome / answer with the state witness",
         f"{append['p50_ms']:.2f} / {stream['p50_ms']:.2f} / {witnessed['p50_ms']:.2f} ms (fsync each)", ""),
    ]


def render(rows: list[dict]) -> None:
    """The rows as a rich table."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"bench answer (Axonix corpus, e5-local, extractive; synced in {rows[0]['sync_s']} s)")
    for c in ("phase", "questions", "p50_ms", "p95_ms", "max_ms"):
        t.add_column(c, justify="right" if c != "phase" else "left")
    for r in rows:
        t.add_row(r["phase"], str(r["questions"]), f"{r['p50_ms']:,.1f}", f"{r['p95_ms']:,.1f}", f"{r['max_ms']:,.1f}")
    Console().print(t)


if __name__ == "__main__":
    result = run(quick="--quick" in sys.argv)
    render(result)
    from rich.console import Console

    for line in summary(result):
        Console().print(" · ".join(x for x in line if x))
