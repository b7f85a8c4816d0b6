"""Whose document it is (issue 41): the subject found at indexing (:mod:`ancre.ingest.subject`) and
how a question's entity is matched against it (:mod:`ancre.query.subjects`), checked on every
document of a generated template share (three templates, lookalike names, archived versions:
:mod:`support.template_corpus`) against the generator's truth, and on the Axonix documents."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from tempfile import mkdtemp

import pytest
from support.template_context import extracts
from support.template_corpus import TemplateCorpus, generate

from ancre.index.keywords import chunk_terms
from ancre.index.tokenize import tokenize
from ancre.ingest.extract import extract_bytes
from ancre.ingest.subject import MAX_HEADER_CHARS, chunk_header, document_subject, file_words
from ancre.models import Block, BlockKind, Subject
from ancre.query.subjects import Level, Name, asked_entities, doc_subject, lookalike, question_entities, same_subject


@cache
def corpus() -> TemplateCorpus:
    return generate(Path(mkdtemp(prefix="ancre-subjects-")), seed=7, per_template=30, archived=10)


def _subject(path: str) -> Subject:
    data = (corpus().share / path).read_bytes()
    return document_subject(extract_bytes(data, Path(path).name), path)


@pytest.mark.parametrize(("name", "words"), [
    ("Contrat_Maintenance_GarageDubois.docx", "Contrat Maintenance Garage Dubois"),
    ("contrat-maintenance-garage-dubois.docx", "contrat maintenance garage dubois"),
    ("03_Contrat_Maintenance_Etude_Rochat_v2024.docx", "03 Contrat Maintenance Etude Rochat v 2024"),
    ("Offre_2025-014_PharmacieWenger.md", "Offre 2025 014 Pharmacie Wenger"),
    ("lettre engagement Nadia Chollet-Müller.docx", "lettre engagement Nadia Chollet Müller"),
    ("ÉtudeRéviseursRéunisSA.pdf", "Étude Réviseurs Réunis SA"),
    ("README", "README"),
])
def test_file_names_split_into_words(name: str, words: str) -> None:
    assert file_words(name) == words


def test_every_generated_document_names_its_subject() -> None:
    """Contracts (with and without a title, four file-name styles), offers and letters: the parties
    hold the client's legal name or the person's name, the folder is the document's, and the header
    of every chunk — « 5. Accès aux locaux » included, which never names the client — says whose
    document it is and is part of the chunk's index terms."""
    c = corpus()
    checked = 0
    for client in c.clients:
        for path in (f"CLIENTS/{client.filename}", f"OFFRES/{client.offer_file}"):
            s = _subject(path)
            assert client.legal in s.parties, (path, s)
            assert s.folder == path.split("/")[0]
            assert bool(s.title) == (client.titled or path.startswith("OFFRES"))
            for e in extracts(c, path):
                assert client.legal in e.header and len(e.header) <= MAX_HEADER_CHARS
                assert set(tokenize(client.name)) <= set(chunk_terms(e.filename, e.text, e.header))
            checked += 1
    for person in c.people:
        s = _subject(f"RH/{person.filename}")
        assert s.parties == (person.name,) and s.title == "Lettre d'engagement"
        checked += 1
    assert checked == 2 * len(c.clients) + len(c.people) >= 90


def test_axonix_subjects() -> None:
    root = Path(__file__).resolve().parents[2] / "examples" / "axonix" / "share"
    rochat = root / "DIRECTION" / "03_Contrat_Maintenance_Etude_Rochat.docx"
    s = document_subject(extract_bytes(rochat.read_bytes(), rochat.name), "DIRECTION/03_Contrat_Maintenance_Etude_Rochat.docx")
    assert s == Subject("Contrat de maintenance — Étude Rochat", ("Axonix SA", "Étude Rochat & Associés"),
                        "03 Contrat Maintenance Etude Rochat", "DIRECTION")
    header = chunk_header(s, ("Contrat de maintenance — Étude Rochat", "5. Durée"))
    assert header == ("Document : Contrat de maintenance — Étude Rochat · Parties : Axonix SA ; Étude Rochat & Associés · "
                      "Fichier : 03 Contrat Maintenance Etude Rochat · Section : 5. Durée")  # « DIRECTION » names nobody
    # a copy, in another folder or with a copy or version mark, has the header of its original
    assert chunk_header(Subject(s.title, s.parties, "Copie de 03 Contrat Maintenance Etude Rochat v 2024", "ARCHIVES"),
                        ("Contrat de maintenance — Étude Rochat", "5. Durée")) == header
    assert "Dossier : Garage Dubois" in chunk_header(Subject("", (), "contrat", "CLIENTS/Garage Dubois"))
    sections = [Block(BlockKind.HEADING, "Article 1", 2), Block(BlockKind.HEADING, "Article 2", 2)]
    assert document_subject(sections, "a.md").title == ""  # sections, no title
    table = [Block(BlockKind.TABLE_ROW, "Collaborateur | Fonction | Salaire")]  # a table's header row names nobody
    assert document_subject(table, "x.xlsx").parties == ()


def test_names_one_letter_apart_or_sharing_a_word_are_other_subjects() -> None:
    """Dubois ≠ Dubuis ≠ Dubois Transports SA (the issue's rule), and the asked qualifier counts."""
    dubois = doc_subject(Subject("Contrat de maintenance — Garage Dubois", ("Axonix SA", "Garage Dubois Sàrl")), "a.docx")
    dubuis = doc_subject(Subject("", ("Axonix SA", "Garage Dubuis Sàrl"), "Contrat Maintenance Garage Dubuis"), "b.docx")
    transports = doc_subject(Subject("", ("Axonix SA", "Dubois Transports SA")), "c.docx")
    rochat = doc_subject(Subject("", ("Axonix SA", "Étude Rochat & Associés")), "r.docx")
    docs = [dubois, dubuis, transports, rochat]
    table = {
        "le Garage Dubois": (Level.EXACT, Level.NONE, Level.PARTIAL, Level.NONE),
        "Garage Dubuis": (Level.NONE, Level.EXACT, Level.NONE, Level.NONE),
        "Dubois Transports SA": (Level.PARTIAL, Level.NONE, Level.EXACT, Level.NONE),
        "l'étude Rochat": (Level.NONE, Level.NONE, Level.NONE, Level.EXACT),
        "Rochat": (Level.NONE, Level.NONE, Level.NONE, Level.EXACT),
    }
    for asked, levels in table.items():
        assert tuple(d.level(Name.of(asked)) for d in docs) == levels, asked
    assert lookalike(Name.of("Garage Duboy"), docs) and not lookalike(Name.of("Garage Martin"), docs)
    assert same_subject(dubois, dubuis) is False and same_subject(dubois, transports) is False
    # the provider, a party of every contract, asks about none of them
    q = "Quel est le forfait du Garage Dubois selon le contrat signé avec Axonix SA ?"
    assert [n.written for n in asked_entities(q, docs)] == ["Garage Dubois"]
    # names are found whatever the case, from the documents' own names
    assert [n.written for n in question_entities("forfait du garage dubuis", docs)] == ["Garage Dubuis Sàrl"]


def test_every_generated_client_matches_itself_only() -> None:
    """Over the whole generated share: each client's contract answers exactly to its own name, not
    to its one-letter twin; an archived contract is the same subject as its client's, never as a
    lookalike's."""
    c = corpus()
    subjects = {x.name: doc_subject(_subject(f"CLIENTS/{x.filename}"), x.filename) for x in c.clients}
    for x in c.clients:
        assert subjects[x.name].level(Name.of(x.name)) is Level.EXACT, x.name
        for y in c.clients:
            if y is not x:
                assert subjects[y.name].level(Name.of(x.name)) is not Level.EXACT, (x.name, y.name)
                assert same_subject(subjects[x.name], subjects[y.name]) is False, (x.name, y.name)
        if x.archived is not None:
            old = doc_subject(_subject(f"ARCHIVES/{x.archived.filename}"), x.archived.filename)
            assert same_subject(subjects[x.name], old) is True
    for m in c.missing:
        name = Name.of(m)
        assert all(s.level(name) is not Level.EXACT for s in subjects.values()), m


def test_the_qualifier_written_before_a_name_is_part_of_it_even_deep_in_a_long_text() -> None:
    """« l'étude Rochat », « la société Dubois »: the lower-case qualifier before a capitalised run
    joins it, wherever the run stands in the text (the qualifier is looked for in the words just
    before the run, not in the whole text before it)."""
    assert [n.written for n in question_entities("Quel est le forfait de l'étude Rochat ?")] == ["étude Rochat"]
    assert [n.written for n in question_entities("Et pour la société Dubois Transports SA ?")] == ["société Dubois Transports SA"]
    filler = "des lignes sans nom, 42 ; " * 2000
    assert [n.written for n in question_entities(f"{filler}le garage Dubois et Baumont Industries")] == [
        "garage Dubois", "Baumont Industries"]
