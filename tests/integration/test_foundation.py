"""End to end on the real corpus: sync with e5-local into the embedded store, then
permission-trimmed hybrid search for every user of visibility.json."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from support.corpus import USERS, copy_corpus, load_question_set, readable_paths, write_config

from ancre.app.runtime import Runtime
from ancre.config import load_settings

QUESTIONS = load_question_set()
EXTRA_QUESTIONS = [
    "etude rochat",
    "grille salariale 2026",
    "Quels sont les salaires des techniciens ?",
    "code d'accès 4471-ZETA",
    "migration Azure",
    "contrat de maintenance",
    "politique de sécurité mot de passe",
    "WD-EXCL-042",
]


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory):
    """The corpus copied and synced once; yields the open Runtime (read-only tests only)."""
    root = copy_corpus(tmp_path_factory.mktemp("corpus"))
    rt = Runtime(load_settings(write_config(root)))
    for conn in rt.connectors():
        rep = rt.engine.run_pass(conn)
        assert rep.outcome == "ok", rep
    yield rt
    rt.close()


@pytest.fixture()
def fresh(tmp_path: Path):
    """A private copy of the corpus and an open Runtime for tests that change files or ACLs."""
    root = copy_corpus(tmp_path / "c")
    rt = Runtime(load_settings(write_config(root)))
    yield root, rt
    rt.close()


@pytest.fixture()
def fresh_snapshot(tmp_path: Path):
    """:func:`fresh` with the keyword side in a BM25 snapshot (``[store] bm25 = "snapshot"``)."""
    root = copy_corpus(tmp_path / "c")
    config = write_config(root)
    config.write_text(config.read_text(encoding="utf-8").replace('kind = "edge"', 'kind = "edge"\nbm25 = "snapshot"', 1),
                      encoding="utf-8")
    rt = Runtime(load_settings(config))
    yield root, rt
    rt.close()


def _hits(rt: Runtime, question: str, user: str, limit: int = 50) -> list:
    return list(rt.retriever.retrieve(question, rt.directory.principals(user), limit=limit).results)


def _src_path(r) -> tuple[str, str]:
    return (r.doc_id.split(":", 1)[0], r.path)


@pytest.mark.parametrize("user", USERS)
def test_search_never_returns_unreadable_documents(synced: Runtime, user: str) -> None:
    allowed = readable_paths(user)
    assert allowed, "visibility.json lists something for every known user"
    seen: set[tuple[str, str]] = set()
    for q in [x["q"] for x in QUESTIONS] + EXTRA_QUESTIONS:
        for r in _hits(synced, q, user):
            assert _src_path(r) in allowed, f"{user} got {r.path} for {q!r}"
            seen.add(_src_path(r))
    assert seen, f"{user} found nothing at all"


def test_explicit_deny_chloe_vs_bruno(synced: Runtime) -> None:
    q = "Quel est le code d'accès de la salle serveur de Baumont Industries ?"
    assert "test-deny-explicite.docx" not in {r.filename for r in _hits(synced, q, "chloe")}
    assert "test-deny-explicite.docx" in {r.filename for r in _hits(synced, q, "bruno")[:3]}


@pytest.mark.parametrize("user", ["nobody-knows-me", "", "AXONIX\\mallory"])
def test_unknown_user_gets_nothing(synced: Runtime, user: str) -> None:
    assert synced.directory.principals(user) == frozenset()
    assert _hits(synced, "contrat de maintenance", user) == []


@pytest.mark.parametrize("case", [q for q in QUESTIONS if "expect_source" in q], ids=lambda q: f"{q['as']}:{q['expect_source']}")
def test_expected_source_in_top3(synced: Runtime, case: dict) -> None:
    top = [r.filename for r in _hits(synced, case["q"], case["as"], limit=3)]
    assert case["expect_source"] in top, top


def test_refusal_questions_do_not_leak_expected_forbidden_source(synced: Runtime) -> None:
    q = "Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"
    files = {r.filename for r in _hits(synced, q, "bruno")}
    assert not any("Rochat" in f for f in files), files


def test_exact_code_found_by_bm25(synced: Runtime) -> None:
    res = _hits(synced, "Que fait la règle WD-EXCL-042 ?", "bruno", limit=3)
    assert res[0].filename == "11-correlations-yaml.md"
    assert "bm25" in res[0].found_by
    assert "WD-EXCL-042" in res[0].text


def test_unaccented_query_finds_accented_name(synced: Runtime) -> None:
    top = [r.filename for r in _hits(synced, "etude rochat", "alice", limit=3)]
    assert any("Etude_Rochat" in f for f in top), top
    texts = " ".join(r.text for r in _hits(synced, "etude rochat", "alice", limit=5))
    assert "Étude Rochat" in texts or "étude Rochat" in texts


def test_pdf_text_has_no_dot_leaders(synced: Runtime) -> None:
    texts = [p.payload.text for p in synced.store.scroll("documentation") if p.payload.filename.endswith(".pdf")]
    assert texts, "the PDF is indexed"
    joined = "\n".join(texts)
    assert "14 caractères" in joined
    for leader in ("....", "…", "____", "····", ". . . ."):
        assert leader not in joined


def test_documentation_goes_to_its_collection(synced: Runtime) -> None:
    doc_files = {p.payload.filename for p in synced.store.scroll("documentation")}
    assert doc_files == {"09-pipeline-llm.md", "11-correlations-yaml.md", "Politique_Securite_SI.pdf"}
    assert not doc_files & {p.payload.filename for p in synced.store.scroll("documents")}


def test_locations_are_unc_folders(synced: Runtime) -> None:
    r = _hits(synced, "Baumont Industries contrat", "alice", limit=10)
    locs = {x.filename: x.location for x in r}
    assert locs.get("21_Contrat_Maintenance_Baumont_Industries.docx") in (
        "\\\\SRV-FICHIERS\\Partage\\CLIENTS\\",
        "https://axonix.sharepoint.example/sites/Direction/Documents partages/",
    )


# ---------------------------------------------------------------- incremental sync behaviour
def _pass(rt: Runtime, source: str = "partage", **kw):
    conn = next(c for c in rt.connectors() if c.source_id == source)
    return rt.engine.run_pass(conn, **kw)


def _set_acl(root: Path, path: str, aces: list) -> None:
    acl = json.loads((root / "acl.json").read_text(encoding="utf-8"))
    acl["entries"][path] = {"aces": aces}
    (root / "acl.json").write_text(json.dumps(acl), encoding="utf-8")


def test_incremental_resync_touch_acl_delete(fresh) -> None:
    root, rt = fresh
    first = _pass(rt)
    assert first.new == 11 and first.embedded_chunks > 0 and first.outcome == "ok"

    again = _pass(rt)
    assert (again.embedded_chunks, again.new, again.changed, again.acl_only, again.deleted) == (0, 0, 0, 0, 0)

    # touch one file (content changed): only it is re-embedded
    md = root / "share/DOCUMENTATION/09-pipeline-llm.md"
    md.write_text(md.read_text(encoding="utf-8") + "\n\nNouvelle section MARQUEURTOUCHE.\n", encoding="utf-8")
    touched = _pass(rt)
    n_chunks = sum(1 for p in rt.store.scroll("documentation") if p.payload.filename == md.name)
    assert touched.changed == 1 and touched.new == 0
    # of it only the chunk that changed (the last, which the new section joined): the others keep their vector
    assert (touched.embedded_chunks, touched.reused_chunks) == (1, n_chunks - 1), touched
    assert any("MARQUEURTOUCHE" in r.text for r in _hits(rt, "MARQUEURTOUCHE", "bruno"))

    # mtime moves but bytes identical: nothing embedded
    os.utime(md, (time.time() + 5, time.time() + 5))
    assert _pass(rt).embedded_chunks == 0

    # ACL-only change: bruno loses DOCUMENTATION/09 file; payload updated, 0 embeddings
    q = "pipeline LLM MARQUEURTOUCHE"
    assert md.name in {r.filename for r in _hits(rt, q, "bruno")}
    _set_acl(root, "DOCUMENTATION/09-pipeline-llm.md", [["DENY", "GG_Techniciens", "READ", ""]])
    acl_pass = _pass(rt)
    assert acl_pass.acl_only == 1 and acl_pass.embedded_chunks == 0
    assert md.name not in {r.filename for r in _hits(rt, q, "bruno")}
    assert md.name in {r.filename for r in _hits(rt, q, "david")}  # others keep it

    # regain it
    _set_acl(root, "DOCUMENTATION/09-pipeline-llm.md", [])
    regain = _pass(rt)
    assert regain.acl_only == 1 and regain.embedded_chunks == 0
    assert md.name in {r.filename for r in _hits(rt, q, "bruno")}

    # delete: gone at the next search
    md.unlink()
    gone = _pass(rt)
    assert gone.deleted == 1
    assert md.name not in {r.filename for r in _hits(rt, q, "bruno")}
    assert all(p.payload.filename != md.name for p in rt.store.scroll("documentation"))


def test_missing_root_purges_nothing(fresh) -> None:
    root, rt = fresh
    _pass(rt)
    before = rt.store.count("documents") + rt.store.count("documentation")
    shutil.move(root / "share", root / "share-away")
    rep = _pass(rt)
    assert rep.outcome == "suspect" and rep.deleted == 0 and "missing" in (rep.reason or "")
    assert rt.store.count("documents") + rt.store.count("documentation") == before
    shutil.move(root / "share-away", root / "share")
    back = _pass(rt)
    assert back.outcome == "ok" and back.embedded_chunks == 0


def test_mass_deletion_guard(fresh) -> None:
    root, rt = fresh
    _pass(rt)
    before = rt.store.count("documents") + rt.store.count("documentation")
    for d in ("DIRECTION", "ARCHIVES", "CLIENTS", "COMMERCIAL", "RH"):
        shutil.rmtree(root / "share" / d)
    rep = _pass(rt)
    assert rep.outcome == "suspect" and rep.deleted == 0
    # nothing purged: every point is still in the store (the live rights check, which finds the
    # files gone, keeps them out of answers meanwhile — that is query time, not a purge)
    assert rt.store.count("documents") + rt.store.count("documentation") == before
    assert "test-deny-explicite.docx" not in {r.filename for r in _hits(rt, "code d'accès salle serveur", "bruno")}


def test_bm25_snapshot_hit_rechecked_on_fresh_read(fresh_snapshot) -> None:
    """An ACL-only revocation written to the store but *before* the BM25 rebuild: a hit that only
    the stale BM25 snapshot still returns is dropped for the revoked user."""
    root, rt = fresh_snapshot
    _pass(rt)
    q = "WD-EXCL-042"
    res = rt.retriever.retrieve(q, rt.directory.principals("bruno"), limit=5)
    assert any(r.filename == "11-correlations-yaml.md" and "bm25" in r.found_by for r in res.results)
    gen = rt.bm25.current_generation()
    _set_acl(root, "DOCUMENTATION/11-correlations-yaml.md", [["DENY", "GG_Techniciens", "READ", ""]])
    rep = _pass(rt, rebuild_bm25=False)
    assert rep.acl_only == 1 and rt.bm25.current_generation() == gen  # snapshot is stale
    stale_hits = rt.bm25.get().search(q, 30)
    assert stale_hits, "the stale snapshot still knows the chunk"
    res = rt.retriever.retrieve(q, rt.directory.principals("bruno"), limit=50)
    assert all(r.filename != "11-correlations-yaml.md" for r in res.results)
    assert res.bm25_dropped > 0


def test_membership_change_applies_at_next_search(fresh) -> None:
    root, rt = fresh
    _pass(rt)
    q = "Quel est le code d'accès de la salle serveur de Baumont Industries ?"
    assert "test-deny-explicite.docx" not in {r.filename for r in _hits(rt, q, "chloe")}
    d = json.loads((root / "directory.json").read_text(encoding="utf-8"))
    d["users"]["chloe"]["groups"] = ["GG_Techniciens"]
    (root / "directory.json").write_text(json.dumps(d), encoding="utf-8")
    os.utime(root / "directory.json", (time.time() + 2, time.time() + 2))
    assert "test-deny-explicite.docx" in {r.filename for r in _hits(rt, q, "chloe")}


def test_unusable_bm25_snapshot_is_rebuilt_by_next_pass(tmp_path: Path) -> None:
    root = copy_corpus(tmp_path / "c")
    cfg = write_config(root)
    cfg.write_text(cfg.read_text(encoding="utf-8").replace('kind = "edge"', 'kind = "edge"\nbm25 = "snapshot"', 1), encoding="utf-8")
    rt = Runtime(load_settings(cfg))
    try:
        _pass(rt)
        gen = rt.bm25.current_generation()
        meta = rt.bm25.index_dir / f"gen-{gen}" / "entries.json"
        data = json.loads(meta.read_text(encoding="utf-8"))
        data["tokenizer"] = "an-older-tokenizer"
        meta.write_text(json.dumps(data), encoding="utf-8")
        rep = _pass(rt)
        assert rep.embedded_chunks == 0 and rep.bm25_generation == gen + 1
        assert rt.bm25.get().search("WD-EXCL-042", 3)
    finally:
        rt.close()
