"""A changed document embeds only its new or edited passages; the passages it kept word for word
keep the vector stored for them (``ChunkWriter._vectors``), whatever their new position — on a real
folder, the extraction worker, e5-local and the embedded store, in process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.daemon_proc import write_daemon_config

from ancre.app.runtime import Runtime
from ancre.config import load_settings

SECTIONS = [
    f"Article {i}. Le prestataire tient le registre des interventions du site {i} et le remet au client "
    f"chaque trimestre, avec le relevé des heures et des pièces remplacées (lot {i * 37})."
    for i in range(1, 9)
]


def _write(path: Path, sections: list[str]) -> None:
    """One section per passage, headed by its first two words (a chunk begins with its heading)."""
    path.write_text("\n\n".join(f"## {' '.join(text.split()[:2])}\n\n{text}" for text in sections), encoding="utf-8")


@pytest.fixture()
def rt(tmp_path: Path):
    (tmp_path / "tree").mkdir()
    runtime = Runtime(load_settings(write_daemon_config(tmp_path)))
    yield runtime
    runtime.close()


def _stored_match_a_fresh_embedding(rt: Runtime, doc_id: str) -> dict[str, np.ndarray]:
    """The document's stored vectors, each checked against its text embedded now."""
    stored = rt.store.vectors_of("documents", doc_id)
    texts = list(stored)
    fresh = rt.embedder.embed_documents(texts)
    for text, vector in zip(texts, fresh, strict=True):
        assert float(stored[text] @ vector) > 0.9999, text
    return stored


def test_an_edit_embeds_the_edited_passage_and_an_insertion_only_the_new_one(rt: Runtime, tmp_path: Path) -> None:
    doc = tmp_path / "tree" / "contrat.md"
    _write(doc, SECTIONS)
    conn = rt.connectors()[0]
    first = rt.engine.run_pass(conn)
    assert first.outcome == "ok" and first.new == 1 and first.embedded_chunks >= len(SECTIONS)
    assert first.reused_chunks == 0
    (row,) = rt.state.all_items()
    before = _stored_match_a_fresh_embedding(rt, row.doc_id)

    edited = [*SECTIONS]
    edited[3] = edited[3].replace("chaque trimestre", "chaque mois")
    _write(doc, edited)
    rep = rt.engine.sync_paths(conn, ["contrat.md"])
    assert (rep.changed, rep.embedded_chunks, rep.reused_chunks) == (1, 1, first.embedded_chunks - 1), rep
    after = _stored_match_a_fresh_embedding(rt, row.doc_id)
    assert len(after) == len(before) and not any(SECTIONS[3] in t for t in after)
    assert [t for t in after if "chaque mois" in t]

    inserted = ["Préambule ajouté : les parties conviennent d'une revue annuelle (n° 777).", *edited]
    _write(doc, inserted)
    rep = rt.engine.sync_paths(conn, ["contrat.md"])
    assert (rep.embedded_chunks, rep.reused_chunks) == (1, len(after)), rep  # every chunk index moved
    final = _stored_match_a_fresh_embedding(rt, row.doc_id)
    assert len(final) == len(after) + 1 == rt.state.get(row.source, row.native_id).chunk_count  # type: ignore[union-attr]
    everyone = frozenset({"sid:S-1-1-0"})
    hits = rt.store.keyword_search("documents", "revue annuelle", everyone, 3)  # type: ignore[attr-defined]
    assert hits and "Préambule" in hits[0].payload.text


def test_the_same_passage_in_two_new_files_is_embedded_once(rt: Runtime, tmp_path: Path) -> None:
    """A copy saved in another folder, synced in the same batch: its passages are embedded once
    and both files' points get that vector."""
    for name in ("a/contrat.md", "b/copie du contrat.md"):
        (tmp_path / "tree" / name).parent.mkdir(parents=True)
        _write(tmp_path / "tree" / name, SECTIONS)
    rep = rt.engine.run_pass(rt.connectors()[0])
    assert rep.new == 2 and rep.reused_chunks == rep.embedded_chunks, rep
    per_doc = [rt.store.vectors_of("documents", row.doc_id) for row in rt.state.all_items()]
    assert len(per_doc[0]) == len(per_doc[1]) == rep.embedded_chunks, rep
    for text, vector in per_doc[0].items():
        assert np.allclose(per_doc[1][text], vector, atol=1e-6)


def test_a_copy_of_an_indexed_file_embeds_nothing(rt: Runtime, tmp_path: Path) -> None:
    """The file copied into another folder after it was indexed: its points take the stored
    vectors of the original (same content hash), which keeps its own."""
    _write(tmp_path / "tree" / "contrat.md", SECTIONS)
    conn = rt.connectors()[0]
    first = rt.engine.run_pass(conn)
    (tmp_path / "tree" / "archives").mkdir()
    (tmp_path / "tree" / "archives" / "contrat (copie).md").write_bytes((tmp_path / "tree" / "contrat.md").read_bytes())
    rep = rt.engine.run_pass(conn)
    assert (rep.new, rep.embedded_chunks, rep.reused_chunks) == (1, 0, first.embedded_chunks), rep
    rows = {row.path: row for row in rt.state.all_items()}
    copy = _stored_match_a_fresh_embedding(rt, rows["archives/contrat (copie).md"].doc_id)
    assert copy.keys() == rt.store.vectors_of("documents", rows["contrat.md"].doc_id).keys()
    everyone = frozenset({"sid:S-1-1-0"})
    found = rt.store.search("documents", next(iter(copy.values())), everyone, 2)
    assert {p.payload.path for p in found} == {"contrat.md", "archives/contrat (copie).md"}
