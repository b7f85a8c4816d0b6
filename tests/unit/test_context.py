"""Context builder against a real Store (qdrant-client local mode): windows, complements, copies,
the rights filter on every read, and the cap when no document clearly leads."""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ancre.index.qdrant_store import QdrantStore
from ancre.index.store import PointWrite
from ancre.models import Acl, ChunkPayload, SearchResult, point_id
from ancre.query.context import build_context
from ancre.query.prompt import build_messages, format_extracts
from ancre.settings.query import ContextConfig

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")

ALICE = frozenset({"sid:S-1-5-21-1-1001", "sid:S-1-1-0"})
BRUNO = frozenset({"sid:S-1-5-21-1-1002", "sid:S-1-1-0"})
DIRECTION = ("sid:S-1-5-21-1-1001",)
EVERYONE = ("sid:S-1-1-0",)
CFG = ContextConfig()
DIM = 4


def _payload(doc: str, i: int, filename: str, allow: tuple[str, ...], text: str | None, deny=()) -> ChunkPayload:
    return ChunkPayload(
        source="partage",
        doc_id=doc,
        path=f"DIR/{filename}",
        filename=filename,
        location=f"\\\\SRV\\Partage\\{doc}\\",
        chunk_index=i,
        text=text if text is not None else f"{doc} extrait {i}",
        acl_allow=allow,
        acl_deny=tuple(deny),
        content_hash=f"h-{doc}",
        indexed_at=0.0,
    )


class Corpus:
    def __init__(self, store: QdrantStore) -> None:
        self.store = store
        self.payloads: dict[tuple[str, int], ChunkPayload] = {}

    def add(
        self,
        doc: str,
        n: int,
        *,
        filename: str | None = None,
        allow: tuple[str, ...] = EVERYONE,
        deny: tuple[str, ...] = (),
        texts: dict[int, str] | None = None,
    ) -> None:
        points = []
        for i in range(n):
            pl = _payload(doc, i, filename or f"{doc}.docx", allow, (texts or {}).get(i), deny)
            self.payloads[(doc, i)] = pl
            points.append(PointWrite(point_id(doc, i), np.ones(DIM, dtype=np.float32) / 2, pl))
        self.store.upsert("documents", points)

    def hit(self, doc: str, i: int, score: float) -> SearchResult:
        pl = self.payloads[(doc, i)]
        return SearchResult(
            point_id=point_id(doc, i),
            doc_id=doc,
            filename=pl.filename,
            path=pl.path,
            location=pl.location,
            chunk_index=i,
            score=score,
            found_by=("vector",),
            text=pl.text,
        )


@pytest.fixture
def corpus(tmp_path: Path) -> Iterator[Corpus]:
    store = QdrantStore.local(tmp_path / "qdrant")
    store.open("test:v1", DIM)
    yield Corpus(store)
    store.close()


def _layout(ctx) -> list[tuple[str, int]]:
    return [(e.doc_id, e.chunk_index) for e in ctx.extracts]


LEAD = 2 / 61  # first in both lists
RUNNER = 1 / 62  # second in one list only


def test_principal_window_is_nine_chunks_around_the_best(corpus: Corpus) -> None:
    corpus.add("A", 20)
    ctx = build_context([corpus.hit("A", 10, LEAD)], corpus.store, ALICE, CFG)
    assert _layout(ctx) == [("A", i) for i in range(6, 15)]
    assert ctx.leading and [s.doc_id for s in ctx.sources] == ["A"]
    assert [e.score for e in ctx.extracts if e.score is not None] == [LEAD]
    assert ctx.extracts[4].chunk_index == 10 and ctx.extracts[4].score == LEAD


def test_window_shifts_at_the_document_edges(corpus: Corpus) -> None:
    corpus.add("A", 20)
    corpus.add("B", 3)
    ctx = build_context([corpus.hit("A", 0, LEAD)], corpus.store, ALICE, CFG)
    assert _layout(ctx) == [("A", i) for i in range(9)]
    ctx = build_context([corpus.hit("A", 19, LEAD)], corpus.store, ALICE, CFG)
    assert _layout(ctx) == [("A", i) for i in range(11, 20)]
    ctx = build_context([corpus.hit("B", 1, LEAD)], corpus.store, ALICE, CFG)
    assert _layout(ctx) == [("B", 0), ("B", 1), ("B", 2)]


def test_complements_four_consecutive_chunks_and_at_most_six_documents(corpus: Corpus) -> None:
    corpus.add("A", 20)
    others = [f"O{k}" for k in range(8)]
    for d in others:
        corpus.add(d, 10)
    results = [corpus.hit("A", 5, LEAD)] + [corpus.hit(d, 5, RUNNER - 0.0001 * k) for k, d in enumerate(others)]
    ctx = build_context(results, corpus.store, ALICE, CFG)
    assert ctx.leading
    assert [s.doc_id for s in ctx.sources] == ["A", *others[:6]]
    assert _layout(ctx)[:9] == [("A", i) for i in range(1, 10)]
    for k, d in enumerate(others[:6]):
        block = _layout(ctx)[9 + 4 * k : 13 + 4 * k]
        assert block == [(d, 4), (d, 5), (d, 6), (d, 7)]
    assert len(ctx.extracts) == 9 + 6 * 4


def test_results_in_any_order_are_ranked_by_score(corpus: Corpus) -> None:
    corpus.add("A", 3)
    corpus.add("B", 3)
    ctx = build_context([corpus.hit("B", 0, RUNNER), corpus.hit("A", 1, LEAD)], corpus.store, ALICE, CFG)
    assert [s.doc_id for s in ctx.sources] == ["A", "B"]


def test_same_file_name_on_another_source_is_a_copy(corpus: Corpus) -> None:
    name = "21_Contrat_Maintenance_Baumont_Industries.docx"
    corpus.add("share", 3, filename=name)
    # SharePoint copy: other doc id, same name in another case and in NFD
    corpus.add("sp", 3, filename=unicodedata.normalize("NFD", name.upper()))
    corpus.add("other", 3, filename="Procès-verbal.docx")
    results = [corpus.hit("share", 1, LEAD), corpus.hit("sp", 1, LEAD - 0.0001), corpus.hit("other", 0, RUNNER)]
    ctx = build_context(results, corpus.store, ALICE, CFG)
    assert [s.doc_id for s in ctx.sources] == ["share", "other"]
    assert ctx.leading  # the copy is not a rival


def test_identical_text_is_dropped(corpus: Corpus) -> None:
    corpus.add("A", 3, texts={0: "Forfait mensuel CHF 3 840 HT.", 1: "Durée 24 mois."})
    corpus.add("B", 3, texts={0: "Forfait  mensuel\nCHF 3 840 HT.", 1: "Durée 24 mois."})
    corpus.add("C", 2, texts={0: "Forfait mensuel CHF 3 840 HT.", 1: "Durée 24 mois."})
    results = [corpus.hit("A", 0, LEAD), corpus.hit("B", 0, RUNNER), corpus.hit("C", 0, RUNNER - 0.001)]
    ctx = build_context(results, corpus.store, ALICE, CFG)
    assert _layout(ctx) == [("A", 0), ("A", 1), ("A", 2), ("B", 2)]
    assert [s.doc_id for s in ctx.sources] == ["A", "B"]  # C had nothing new


def test_no_clear_leader_caps_the_context_at_fourteen(corpus: Corpus) -> None:
    docs = [f"D{k}" for k in range(7)]
    for d in docs:
        corpus.add(d, 12)
    # D0 first in the vector list, D1 first in the BM25 list: nobody clearly leads
    results = [corpus.hit(d, 6, 1 / 61 - 0.0002 * k) for k, d in enumerate(docs)]
    ctx = build_context(results, corpus.store, ALICE, CFG)
    assert not ctx.leading
    assert len(ctx.extracts) == CFG.max_chunks == 14
    assert _layout(ctx)[:9] == [("D0", i) for i in range(2, 11)]
    assert [s.doc_id for s in ctx.sources] == ["D0", "D1", "D2"]
    assert _layout(ctx)[13] == ("D2", 5)
    # same results, the first one now clearly ahead: everything is kept
    lead = build_context([corpus.hit("D0", 6, LEAD), *results[1:]], corpus.store, ALICE, CFG)
    assert lead.leading and len(lead.extracts) == 9 + 6 * 4


def test_threshold_is_configurable(corpus: Corpus) -> None:
    corpus.add("A", 1)
    corpus.add("B", 1)
    results = [corpus.hit("A", 0, LEAD), corpus.hit("B", 0, RUNNER)]
    assert build_context(results, corpus.store, ALICE, CFG).leading
    assert not build_context(results, corpus.store, ALICE, ContextConfig(threshold=0.02)).leading


def test_every_read_applies_the_rights_filter(corpus: Corpus) -> None:
    corpus.add("pub", 5)
    corpus.add("dir", 5, allow=DIRECTION)
    corpus.add("denied", 5, allow=EVERYONE, deny=("sid:S-1-5-21-1-1002",))
    # stale results naming documents that bruno may not read must not lend him a single chunk
    results = [corpus.hit("dir", 2, LEAD), corpus.hit("denied", 2, LEAD), corpus.hit("pub", 2, RUNNER)]
    ctx = build_context(results, corpus.store, BRUNO, CFG)
    assert {e.doc_id for e in ctx.extracts} == {"pub"}
    assert [s.doc_id for s in ctx.sources] == ["pub"]
    alice = build_context(results, corpus.store, ALICE, CFG)
    assert [s.doc_id for s in alice.sources] == ["dir", "denied", "pub"]


def test_revoked_after_retrieval_is_skipped(corpus: Corpus) -> None:
    corpus.add("A", 5)
    corpus.add("B", 5)
    results = [corpus.hit("A", 2, LEAD), corpus.hit("B", 2, RUNNER)]
    corpus.store.set_acl("documents", "A", Acl(frozenset(EVERYONE), frozenset({"sid:S-1-5-21-1-1001"})))
    ctx = build_context(results, corpus.store, ALICE, CFG)
    assert {e.doc_id for e in ctx.extracts} == {"B"}
    assert len(ctx.extracts) == 5  # B became the principal document


def test_empty_principals_or_results_give_an_empty_context(corpus: Corpus) -> None:
    corpus.add("A", 3)
    assert build_context([corpus.hit("A", 0, LEAD)], corpus.store, frozenset(), CFG).empty
    assert build_context([], corpus.store, ALICE, CFG).empty


def test_sources_carry_location_and_acl_digest(corpus: Corpus) -> None:
    corpus.add("A", 2, allow=DIRECTION, deny=("sid:S-1-5-21-1-666",))
    (src,) = build_context([corpus.hit("A", 0, LEAD)], corpus.store, ALICE, CFG).sources
    assert src.location == "\\\\SRV\\Partage\\A\\" and src.filename == "A.docx" and src.score == LEAD
    assert src.acl_digest == Acl(frozenset(DIRECTION), frozenset({"sid:S-1-5-21-1-666"})).digest()


def test_prompt_formats_blocks_headed_by_file_name(corpus: Corpus) -> None:
    corpus.add("A", 2, filename="03_Contrat_Maintenance_Etude_Rochat.docx", texts={0: "Forfait CHF 3 840 HT.", 1: "Durée."})
    corpus.add("B", 1, filename="21_Contrat_Maintenance_Baumont_Industries.docx", texts={0: "Forfait CHF 4 200 HT."})
    ctx = build_context([corpus.hit("A", 0, LEAD), corpus.hit("B", 0, RUNNER)], corpus.store, ALICE, CFG)
    assert format_extracts(ctx.extracts) == (
        "[03_Contrat_Maintenance_Etude_Rochat.docx]\nForfait CHF 3 840 HT.\nDurée.\n\n"
        "[21_Contrat_Maintenance_Baumont_Industries.docx]\nForfait CHF 4 200 HT."
    )
    system, user = build_messages("Forfait Rochat ?", ctx)
    assert system.role == "system" and "Cette information ne figure pas dans les documents disponibles." in system.content
    assert "[03_Contrat_Maintenance_Etude_Rochat.docx]" in system.content  # the citation example
    assert user.content.endswith("entre crochets.") and "Question : Forfait Rochat ?" in user.content


def test_versions_read_the_indexed_modification_time(corpus: Corpus) -> None:
    text = "L'offre couvre la migration de quatorze machines virtuelles vers Azure pour le cabinet Sarrasin."
    for doc, filename, mtime, extra in (("A", "Offre_Sarrasin.docx", 1_767_225_600.0, ""),
                                        ("B", "Copie de Offre_Sarrasin.docx", 1_764_633_600.0, " Brouillon.")):
        pl = dataclasses.replace(_payload(doc, 0, filename, EVERYONE, text + extra), modified_at=mtime)
        corpus.payloads[(doc, 0)] = pl
        corpus.store.upsert("documents", [PointWrite(point_id(doc, 0), np.ones(DIM, dtype=np.float32) / 2, pl)])
    ctx = build_context([corpus.hit("B", 0, LEAD), corpus.hit("A", 0, RUNNER)], corpus.store, ALICE, CFG)
    assert {e.doc_id: e.modified_at for e in ctx.extracts} == {"A": 1_767_225_600.0, "B": 1_764_633_600.0}
    (g,) = ctx.versions
    assert g.current == "Offre_Sarrasin.docx" and g.reasons == ("modifié le plus récemment : Offre_Sarrasin.docx (01.01.2026)",)
