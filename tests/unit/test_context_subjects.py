"""The asked entity decides the context (issue 41), against a real Store (qdrant-client local mode):
a precise question about « Garage Dubois » keeps that client's contract and its archived version
and drops the lookalikes that retrieval ranked above them; a broad question keeps them all, the
named ones first; a note whose own subject is another but whose passage names the client stays;
the provider every contract names asks about none of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ancre.index.qdrant_store import QdrantStore
from ancre.index.store import PointWrite
from ancre.models import ChunkPayload, SearchResult, Subject, point_id
from ancre.query.context import build_context
from ancre.query.prompt import build_messages
from ancre.settings.query import ContextConfig

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")

DIM = 4
EVERYONE = ("sid:S-1-1-0",)
ALICE = frozenset({"sid:S-1-1-0"})
CFG = ContextConfig()

DOCS = {
    # doc id: (path, subject, text)
    "dubuis": ("CLIENTS/Contrat_Maintenance_GarageDubuis.docx",
               Subject("", ("Axonix SA", "Garage Dubuis Sàrl"), "Contrat Maintenance Garage Dubuis", "CLIENTS"),
               "5. Accès aux locaux\nLe code d'accès de la salle serveur est 5112-OMEGA."),
    "dubois": ("CLIENTS/Contrat_Maintenance_GarageDubois.docx",
               Subject("", ("Axonix SA", "Garage Dubois Sàrl"), "Contrat Maintenance Garage Dubois", "CLIENTS"),
               "5. Accès aux locaux\nLe code d'accès de la salle serveur est 4471-ZETA."),
    "transports": ("CLIENTS/Contrat maintenance Dubois Transports SA.docx",
                   Subject("", ("Axonix SA", "Dubois Transports SA"), "Contrat maintenance Dubois Transports SA", "CLIENTS"),
                   "5. Accès aux locaux\nLe code d'accès de la salle serveur est 3020-SIGMA."),
    "archived": ("ARCHIVES/Contrat_Maintenance_GarageDubois.docx",
                 Subject("", ("Axonix SA", "Garage Dubois Sàrl"), "Contrat Maintenance Garage Dubois", "ARCHIVES"),
                 "5. Accès aux locaux\nLe code d'accès de la salle serveur est 1234-ALPHA."),
    "note": ("TECHNIQUE/note-salle-serveur.docx",
             Subject("Note interne — accès restreint", (), "note salle serveur", "TECHNIQUE"),
             "Le badge du Garage Dubois ouvre aussi la salle serveur du deuxième étage."),
}


class Corpus:
    def __init__(self, store: QdrantStore) -> None:
        self.store = store
        for doc, (path, subject, text) in DOCS.items():
            payload = ChunkPayload(
                source="partage", doc_id=doc, path=path, filename=path.rsplit("/", 1)[1],
                location=f"\\\\SRV\\Partage\\{path.rsplit('/', 1)[0]}\\", chunk_index=0, text=text,
                acl_allow=EVERYONE, acl_deny=(), content_hash=f"h-{doc}", indexed_at=0.0, subject=subject,
                header=f"Parties : {' ; '.join(subject.parties)}",
            )
            store.upsert("documents", [PointWrite(point_id(doc, 0), np.ones(DIM, dtype=np.float32) / 2, payload)])

    def hit(self, doc: str, score: float) -> SearchResult:
        path, subject, text = DOCS[doc]
        return SearchResult(
            point_id=point_id(doc, 0), doc_id=doc, filename=path.rsplit("/", 1)[1], path=path, location="",
            chunk_index=0, score=score, found_by=("vector",), text=text, subject=subject,
        )


@pytest.fixture
def corpus(tmp_path: Path) -> Iterator[Corpus]:
    store = QdrantStore.local(tmp_path / "qdrant")
    store.open("test:v1", DIM)
    yield Corpus(store)
    store.close()


def _ranked(corpus: Corpus, *docs: str) -> list[SearchResult]:
    return [corpus.hit(d, 0.03 - i * 0.001) for i, d in enumerate(docs)]


def test_a_precise_question_keeps_the_asked_client_and_its_versions(corpus: Corpus) -> None:
    results = _ranked(corpus, "dubuis", "transports", "dubois", "archived")
    q = "Quel est le code d'accès de la salle serveur du Garage Dubois ?"
    ctx = build_context(results, corpus.store, ALICE, CFG, question=q)
    assert ctx.focused and [n.written for n in ctx.entities] == ["Garage Dubois"]
    assert [s.doc_id for s in ctx.sources] == ["dubois", "archived"]
    (g,) = ctx.versions
    assert g.paths == ("CLIENTS/Contrat_Maintenance_GarageDubois.docx", "ARCHIVES/Contrat_Maintenance_GarageDubois.docx")
    assert g.current == "Contrat_Maintenance_GarageDubois.docx"
    prompt = build_messages(q, ctx)[1].content
    assert "5112-OMEGA" not in prompt and "3020-SIGMA" not in prompt  # no other client's passage as a complement
    assert "(dossier \\\\SRV\\Partage\\ARCHIVES\\) est une version antérieure" in prompt
    # without the question (by score alone) the lookalike led: what issue 41 found
    assert build_context(results, corpus.store, ALICE, CFG).sources[0].doc_id == "dubuis"


def test_the_other_lookalikes_are_asked_apart(corpus: Corpus) -> None:
    results = _ranked(corpus, "dubois", "archived", "dubuis", "transports")
    ctx = build_context(results, corpus.store, ALICE, CFG, question="Et pour le Garage Dubuis, quel code ?")
    assert [s.doc_id for s in ctx.sources] == ["dubuis"]
    ctx = build_context(results, corpus.store, ALICE, CFG, question="Quel code pour Dubois Transports SA ?")
    assert [s.doc_id for s in ctx.sources] == ["transports"]


def test_a_note_naming_the_client_in_its_passage_stays(corpus: Corpus) -> None:
    results = _ranked(corpus, "dubuis", "note", "dubois")
    ctx = build_context(results, corpus.store, ALICE, CFG, question="Quel badge ouvre la salle serveur du Garage Dubois ?")
    assert [s.doc_id for s in ctx.sources] == ["note", "dubois"]


def test_a_broad_question_keeps_diversity_the_named_subjects_first(corpus: Corpus) -> None:
    results = _ranked(corpus, "transports", "note", "dubuis", "dubois")
    q = "Compare les codes d'accès des contrats du Garage Dubois et du Garage Dubuis"
    ctx = build_context(results, corpus.store, ALICE, CFG, broad=True, question=q)
    assert not ctx.focused
    # the named subjects first (the note's passage names the Garage Dubois), then the partial match
    assert [s.doc_id for s in ctx.sources] == ["note", "dubuis", "dubois", "transports"]


def test_a_client_that_does_not_exist_focuses_nothing(corpus: Corpus) -> None:
    results = _ranked(corpus, "dubuis", "dubois", "transports")
    ctx = build_context(results, corpus.store, ALICE, CFG, question="Quel est le code du Garage Duboy ?")
    assert not ctx.focused and [n.written for n in ctx.entities] == ["Garage Duboy"]  # a near miss, no document
    assert [s.doc_id for s in ctx.sources] == ["dubuis", "dubois", "transports"]


def test_the_provider_asks_about_no_contract(corpus: Corpus) -> None:
    results = _ranked(corpus, "dubuis", "dubois", "transports")
    ctx = build_context(results, corpus.store, ALICE, CFG, question="Quels contrats de maintenance Axonix SA a-t-elle signés ?")
    assert ctx.entities == () and not ctx.focused and len(ctx.sources) == 3
