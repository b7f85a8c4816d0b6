"""No poison pill, bounded embedding, a pass that always records its end.

A document whose extraction crashes the worker is tried ``sync.max_attempts`` times with backoff,
then left ``failed`` until its content changes; a document whose indexing kills the whole sync
process (``kill -9`` half-way, three times) is marked ``failed`` instead of being redone at every
start; a big document is embedded ``_BATCH_CHUNKS`` chunks at a time; a pass stopped by an
embedder failure is recorded with its end and outcome ``error``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from support.hostile import SENTENCES, word_variant

from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.daemon.sync import SyncEngine
from ancre.errors import EmbedderError
from ancre.index.state import ItemState
from ancre.ingest.worker import ExtractionPool
from ancre.models import ItemStatus, ReasonCode

DIRECTORY = '{"domain_sid": "S-1-5-21-9", "netbios": "H", "groups": {}, "users": {"zoe": {"sid": "S-1-5-21-9-1001", "groups": []}}}'


def _setup(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "share" / "D").mkdir(parents=True, exist_ok=True)
    (tmp_path / "directory.json").write_text(DIRECTORY, encoding="utf-8")
    cfg = tmp_path / "ancre.toml"
    cfg.write_text(
        'data_dir = "data"\n[directory]\nkind = "file"\npath = "directory.json"\n'
        '[[sources]]\nid = "h"\nroot = "share"\nprincipals = ["sid:S-1-1-0"]\n' + extra,
        encoding="utf-8",
    )
    return cfg


class _Engine:
    """A runtime whose engine extracts with ``support.hostile:misbehave_on_marker`` (``*.crash``
    kills the worker) and whose embedder is the real one seen through ``embedder`` (optional)."""

    def __init__(self, cfg: Path, embedder: object = None) -> None:
        self.rt = Runtime(load_settings(cfg))
        self.pool = ExtractionPool(timeout_s=20, target="support.hostile:misbehave_on_marker")
        rt = self.rt
        self.engine = SyncEngine(
            rt.settings, rt.store, embedder or rt.embedder, rt.state, rt.bm25, self.pool, acl_writer=rt.acl_writer
        )

    def pass_(self):
        return self.engine.run_pass(self.rt.connectors()[0])

    def row(self, name: str) -> ItemState:
        return next(s for s in self.rt.state.all_items() if s.path.endswith(name))

    def close(self) -> None:
        self.pool.close()
        self.rt.close()


def test_worker_crash_is_retried_with_backoff_then_left_failed(tmp_path: Path) -> None:
    cfg = _setup(tmp_path, "[sync]\nmax_attempts = 3\nretry_backoff_s = 3600\n")
    bad = tmp_path / "share" / "D" / "plantage.crash"
    bad.write_bytes(b"version 1")
    (tmp_path / "share" / "D" / "sain.md").write_text("# Sain\n\nTexte sain.\n", encoding="utf-8")
    e = _Engine(cfg)
    try:
        e.pass_()
        first = e.row("plantage.crash")
        assert first.status == "failed" and first.reason.startswith("crashed") and "(try 1 of 3)" in first.reason
        assert first.attempts == 1 and first.retry_at is not None and first.retry_at > time.time() + 3000
        rep = e.pass_()  # within the backoff: not tried again, still reported
        assert e.row("plantage.crash") == first
        assert ("D/plantage.crash", "failed", first.reason) in rep.problems
    finally:
        e.close()

    tmp_path = tmp_path / "sans_attente"
    cfg = _setup(tmp_path, "[sync]\nmax_attempts = 3\nretry_backoff_s = 0\n")
    bad = tmp_path / "share" / "D" / "plantage.crash"
    bad.write_bytes(b"version 1")
    (tmp_path / "share" / "D" / "sain.md").write_text("# Sain\n\nTexte sain.\n", encoding="utf-8")
    e = _Engine(cfg)
    try:
        e.pass_()
        e.pass_()
        e.pass_()
        gave_up = e.row("plantage.crash")
        assert gave_up.attempts == 3 and "gave up after 3 tries" in gave_up.reason and gave_up.retry_at is None
        for _ in range(2):  # every later pass (and start) leaves it alone
            e.pass_()
            assert e.row("plantage.crash") == gave_up
        os.utime(bad, (time.time() + 5, time.time() + 5))  # touched, same bytes: same version
        e.pass_()
        touched = e.row("plantage.crash")
        assert touched.attempts == 3 and touched.reason == gave_up.reason and touched.mtime != gave_up.mtime
        bad.write_bytes(b"version 2")  # a new version: tried again
        e.pass_()
        assert e.row("plantage.crash").attempts == 1
        assert e.row("sain.md").status == "indexed"
    finally:
        e.close()


def test_a_file_skipped_by_an_older_extractor_is_read_again(tmp_path: Path) -> None:
    cfg = _setup(tmp_path)
    doc = tmp_path / "share" / "D" / "macros.docm"
    doc.write_bytes(word_variant(".docm", "Procédure", [SENTENCES["docm"]]))
    e = _Engine(cfg)
    try:
        item = e.rt.connectors()[0].get_item("D/macros.docm")
        assert item is not None
        old = ItemState(
            source=item.source, native_id=item.native_id, path=item.path, doc_id=item.doc_id, collection="documents",
            size=item.size, mtime=item.mtime, etag=item.etag, content_hash=None, acl_hash=None, chunk_count=0,
            status=ItemStatus.SKIPPED, reason_code=ReasonCode.UNSUPPORTED, detail="extension '.docm'", updated_at=time.time(),
        )
        e.rt.state.put(old)  # as an ancre that did not read .docm left it (no extractor version)
        rep = e.pass_()
        assert rep.new == 1 and e.row("macros.docm").status == "indexed"
        e.rt.state.put(old.__class__(**{**old.__dict__, "extractor": "0:old"}))
        e.pass_()
        assert e.row("macros.docm").status == "indexed"
    finally:
        e.close()


_SYNC = "from ancre.app.cli import app; import sys; app(['sync', '--config', sys.argv[1], '--json'], standalone_mode=False)"


def _sync_process(cfg: Path, crash_at: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANCRE_LOG_LEVEL": "ERROR"}
    env.pop("ANCRE_TEST_CRASH_AT", None)
    if crash_at:
        env["ANCRE_TEST_CRASH_AT"] = crash_at
    return subprocess.run([sys.executable, "-c", _SYNC, str(cfg)], check=False, capture_output=True, text=True, timeout=300, env=env)


def test_a_document_that_kills_the_sync_three_times_is_marked_failed(tmp_path: Path) -> None:
    cfg = _setup(tmp_path, "[sync]\nmax_attempts = 3\n")
    (tmp_path / "share" / "D" / "poison.md").write_text("# Poison\n\nCe document tue la synchro.\n", encoding="utf-8")
    for _attempt in range(1, 4):  # killed (SIGKILL) each time its chunks are in the store, row still pending
        out = _sync_process(cfg, "after_upsert:1")
        assert out.returncode == -9, out.stderr[-500:]
    from typer.testing import CliRunner

    from ancre.app.cli import app

    status = CliRunner().invoke(app, ["status", "--json", "--config", str(cfg)], catch_exceptions=False)
    passes = json.loads(status.stdout)["passes"]
    assert [p["outcome"] for p in passes] == ["crashed"] * 3 and all(p["finished_at"] for p in passes)
    out = _sync_process(cfg, "after_upsert:1")  # a 4th start does not try it again: it does not die
    assert out.returncode == 0, out.stderr[-1500:]
    report = json.loads(out.stdout)[0]
    assert report["failed"] == 1 and report["embedded_chunks"] == 0
    settings = load_settings(cfg)
    with Runtime(settings) as rt:
        (row,) = rt.state.all_items()
        assert row.status == "failed" and row.reason.startswith("crashed: indexing stopped half-way 3 times")
        assert sum(rt.store.count(c) for c in ("documents", "documentation")) == 0  # its partial chunks are gone
        passes = rt.state.last_passes(10)
        assert [p[3] for p in passes] == ["ok", "crashed", "crashed", "crashed"]  # dead passes are closed
        assert all(p[2] is not None for p in passes)


class _Spy:
    """The real embedder, recording the size of each ``embed_documents`` call; raises
    :class:`EmbedderError` from call ``fail_at`` on (a server that went away)."""

    def __init__(self, real: object, fail_at: int | None = None) -> None:
        self.real, self.fail_at, self.calls = real, fail_at, []  # type: list[int]
        self.name, self.dim = real.name, real.dim  # type: ignore[attr-defined]

    def embed_documents(self, texts):
        self.calls.append(len(texts))
        if self.fail_at is not None and len(self.calls) >= self.fail_at:
            raise EmbedderError("connection refused")
        return self.real.embed_documents(texts)  # type: ignore[attr-defined]

    def embed_query(self, text: str) -> np.ndarray:
        return self.real.embed_query(text)  # type: ignore[attr-defined]


def test_a_big_document_is_embedded_in_bounded_batches(tmp_path: Path) -> None:
    cfg = _setup(tmp_path, "[chunking]\ntarget_chars = 100\n")  # one short chunk per paragraph
    para = "Le prestataire assure la maintenance du parc et la sauvegarde."
    (tmp_path / "share" / "D" / "gros.md").write_text("# Gros\n\n" + "\n\n".join(f"{i}. {para}" for i in range(300)))
    rt = Runtime(load_settings(cfg))
    spy = _Spy(rt.embedder)
    pool = ExtractionPool(timeout_s=60)
    try:
        engine = SyncEngine(rt.settings, rt.store, spy, rt.state, rt.bm25, pool, acl_writer=rt.acl_writer)  # type: ignore[arg-type]
        rep = engine.run_pass(rt.connectors()[0])
        assert rep.new == 1 and rep.embedded_chunks == sum(spy.calls) >= 300
        assert max(spy.calls) <= 128 and len(spy.calls) >= 3
    finally:
        pool.close()
        rt.close()


def test_a_pass_stopped_by_the_embedder_records_its_end(tmp_path: Path) -> None:
    cfg = _setup(tmp_path)
    for i in range(3):
        (tmp_path / "share" / "D" / f"doc{i}.md").write_text(f"# Doc {i}\n\nTexte {i}.\n", encoding="utf-8")
    rt = Runtime(load_settings(cfg))
    pool = ExtractionPool(timeout_s=60)
    try:
        spy = _Spy(rt.embedder, fail_at=1)
        engine = SyncEngine(rt.settings, rt.store, spy, rt.state, rt.bm25, pool, acl_writer=rt.acl_writer)  # type: ignore[arg-type]
        with pytest.raises(EmbedderError):
            engine.run_pass(rt.connectors()[0])
        (_, started, finished, outcome, summary) = rt.state.last_passes(1)[0]
        assert finished is not None and finished >= started and outcome == "error"
        assert "connection refused" in json.loads(summary)["reason"]
        rows = rt.state.all_items()
        assert rows and all(r.status == "pending" and r.attempts == 0 for r in rows)  # not the documents' fault
        spy.fail_at = None  # the server is back: the next pass converges
        rep = engine.run_pass(rt.connectors()[0])
        assert rep.outcome == "ok" and {r.status for r in rt.state.all_items()} == {"indexed"}
    finally:
        pool.close()
        rt.close()


def test_a_document_over_max_chunks_is_skipped_without_embedding(tmp_path: Path) -> None:
    cfg = _setup(tmp_path, "[chunking]\ntarget_chars = 100\n[extraction]\nmax_chunks = 5\n")
    para = "Le prestataire assure la maintenance du parc et la sauvegarde."
    (tmp_path / "share" / "D" / "long.md").write_text("\n\n".join(f"{i}. {para}" for i in range(12)), encoding="utf-8")
    e = _Engine(cfg)
    try:
        rep = e.pass_()
        assert rep.embedded_chunks == 0 and rep.skipped == 1
        row = e.row("long.md")
        assert row.status == "skipped" and row.reason == "too_large: 12 chunks > extraction.max_chunks (5)"
    finally:
        e.close()
