"""Hostile files in one folder: the sync completes, each file gets the right status and reason,
and everything else is indexed (docs/ARCHITECTURE.md "Invariants": "bad input never stops a sync")."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from support.hostile import make_hostile_files

from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.daemon.sync import SyncEngine
from ancre.ingest.worker import ExtractionPool


@pytest.fixture()
def hostile(tmp_path: Path):
    share = tmp_path / "share"
    expect = make_hostile_files(share / "Dossier")
    (share / "Dossier" / "boucle_infinie.hang").write_bytes(b"x")
    (share / "Dossier" / "plantage.crash").write_bytes(b"x")
    (share / "Dossier" / "normal.md").write_text("# Normal\n\nDocument sain MARQUEURSAIN.\n", encoding="utf-8")
    cfg = tmp_path / "ancre.toml"
    cfg.write_text(
        'data_dir = "data"\n[directory]\nkind = "file"\npath = "directory.json"\n'
        '[[sources]]\nid = "h"\nroot = "share"\nprincipals = ["sid:S-1-1-0"]\n'
        'unc_root = \'\\\\SRV\\Partage\'\n',
        encoding="utf-8",
    )
    (tmp_path / "directory.json").write_text(
        '{"domain_sid": "S-1-5-21-9", "netbios": "H", "groups": {}, "users": {"zoe": {"sid": "S-1-5-21-9-1001", "groups": []}}}',
        encoding="utf-8",
    )
    rt = Runtime(load_settings(cfg))
    pool = ExtractionPool(timeout_s=3.0, target="support.hostile:misbehave_on_marker")
    engine = SyncEngine(rt.settings, rt.store, rt.embedder, rt.state, rt.bm25, pool, acl_writer=rt.acl_writer)
    yield rt, engine, expect
    pool.close()
    rt.close()


def test_hostile_folder(hostile) -> None:
    rt, engine, expect = hostile
    rep = engine.run_pass(rt.connectors()[0])
    assert rep.outcome == "ok"
    states = {unicodedata.normalize("NFC", s.path.split("/", 1)[1]): s for s in rt.state.all_items()}
    texts: dict[str, str] = {}
    for coll in ("documents", "documentation"):
        for p in rt.store.scroll(coll):
            texts.setdefault(p.payload.filename, "")
            texts[p.payload.filename] += "\n" + p.payload.text

    assert states["boucle_infinie.hang"].status == "failed"
    assert states["boucle_infinie.hang"].reason.startswith("timeout")
    assert states["plantage.crash"].status == "failed"
    assert states["plantage.crash"].reason.startswith("crashed")
    assert "MARQUEURSAIN" in texts["normal.md"]

    for raw_name, exp in expect.items():
        name = unicodedata.normalize("NFC", raw_name)
        if exp.status == "ignored":
            assert name not in states and name not in texts, name
            continue
        st = states[name]
        assert st.status == exp.status, (name, st.status, st.reason)
        if exp.reason:
            assert (st.reason or "").split(":")[0] == exp.reason, (name, st.reason)
        if exp.status != "indexed":
            assert name not in texts, f"{name} must have no chunk"
            continue
        text = texts[name]
        for m in exp.must_contain:
            assert m in text, (name, m)
        for m in exp.must_not_contain:
            assert m not in text, (name, m)
        for m in exp.count_once:
            assert text.count(m) == 1, (name, m, text.count(m))

    # the report lists every problem with its reason, and a second pass redoes none of them
    reported = {unicodedata.normalize("NFC", p.split("/", 1)[1]) for p, _, _ in rep.problems}
    assert reported == {n for n, s in states.items() if s.status in ("failed", "skipped")}
    again = engine.run_pass(rt.connectors()[0])
    assert again.embedded_chunks == 0 and again.failed == rep.failed and again.skipped == rep.skipped

    # the NFD-named file is found by its NFC name and searchable
    hits = rt.retriever.retrieve("MARQUEURNFD", rt.directory.principals("zoe"), limit=5).results
    assert hits and hits[0].filename == "Résumé étude.md"
    assert hits[0].location == "\\\\SRV\\Partage\\Dossier\\"
