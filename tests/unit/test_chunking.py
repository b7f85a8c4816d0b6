"""Structure-aware chunking: sizes, table rows, heading paths, order, ids."""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ancre.ingest.chunking import chunk_blocks
from ancre.ingest.extract import extract_bytes
from ancre.models import POINT_NAMESPACE, Block, BlockKind, Chunk

H, P, R, PB = BlockKind.HEADING, BlockKind.PARAGRAPH, BlockKind.TABLE_ROW, BlockKind.PAGE_BREAK
SHARE = Path(__file__).resolve().parents[2] / "examples" / "axonix" / "share"


def sentence(i: int) -> str:
    return f"Phrase {i} sur la maintenance du serveur de fichiers."


def test_empty_inputs_give_no_chunk() -> None:
    assert chunk_blocks("d", []) == []
    assert chunk_blocks("d", [Block(PB, "", page=2), Block(P, "   "), Block(R, "\n")]) == []


def test_small_document_is_one_chunk_starting_with_its_heading() -> None:
    blocks = [Block(H, "Contrat", level=1), Block(P, "Premier paragraphe."), Block(P, "Second.")]
    assert chunk_blocks("doc", blocks) == [
        Chunk("doc", 0, "Contrat\nPremier paragraphe.\nSecond.", ("Contrat",))
    ]


def test_heading_paths_follow_levels() -> None:
    blocks = [
        Block(H, "A", level=1), Block(H, "A.1", level=2), Block(P, "texte a1"),
        Block(H, "A.2", level=2), Block(H, "A.2.a", level=3), Block(P, "texte a2a"),
        Block(H, "A.3", level=2), Block(P, "texte a3"),
        Block(H, "B", level=1), Block(P, "texte b"),
        Block(H, "B.x", level=3), Block(P, "texte bx"),
    ]
    chunks = chunk_blocks("d", blocks, target_chars=1000)
    assert [(c.text, c.heading_path) for c in chunks] == [
        ("A\nA.1\ntexte a1", ("A", "A.1")),
        ("A.2\nA.2.a\ntexte a2a", ("A", "A.2", "A.2.a")),
        ("A.3\ntexte a3", ("A", "A.3")),
        ("B\ntexte b", ("B",)),
        ("B.x\ntexte bx", ("B", "B.x")),
    ]


def test_paragraphs_packed_up_to_target_and_continuations_repeat_heading() -> None:
    paragraphs = [" ".join(sentence(i * 3 + k) for k in range(3)) for i in range(20)]
    blocks = [Block(H, "Niveaux de service", level=2)] + [Block(P, p) for p in paragraphs]
    chunks = chunk_blocks("d", blocks, target_chars=500)
    assert len(chunks) > 3
    assert all(len(c.text) <= 500 for c in chunks)
    assert all(c.text.startswith("Niveaux de service\n") for c in chunks)
    assert all(c.heading_path == ("Niveaux de service",) for c in chunks)
    # every paragraph whole, exactly once, in order
    bodies = [line for c in chunks for line in c.text.split("\n")[1:]]
    assert bodies == paragraphs
    # packing: no chunk could have taken the next paragraph
    for current, following in itertools.pairwise(chunks):
        assert len(current.text) + 1 + len(following.text.split("\n")[1]) > 500


def test_table_rows_stay_whole_and_repeat_the_header_row() -> None:
    rows = ["Poste | Montant"] + [f"Prestation numéro {i} du contrat | CHF {i} 000 HT" for i in range(30)]
    blocks = [Block(H, "Tarifs", level=2), Block(P, "Les prix suivants s'appliquent.")]
    blocks += [Block(R, r) for r in rows]
    chunks = chunk_blocks("d", blocks, target_chars=300)
    assert len(chunks) > 3
    assert all(len(c.text) <= 300 for c in chunks)
    seen: list[str] = []
    for c in chunks:
        lines = c.text.split("\n")
        assert all(line in rows or line in ("Tarifs", "Les prix suivants s'appliquent.") for line in lines)
        seen += [line for line in lines if line in rows[1:]]
    assert seen == rows[1:]  # each data row once, whole, in order
    for c in chunks[1:]:
        assert c.text.startswith("Tarifs\nPoste | Montant\n")


def test_oversized_row_split_only_as_last_resort() -> None:
    big = " | ".join(f"cellule {i} avec du texte" for i in range(40))  # ~1000 chars
    blocks = [Block(R, "court | ligne"), Block(R, big), Block(R, "fin | ligne")]
    chunks = chunk_blocks("d", blocks, target_chars=300)
    assert all(len(c.text) <= 300 for c in chunks)
    words = " ".join(c.text for c in chunks).split()
    for i in range(40):
        assert words.count(str(i)) >= 1
    assert chunks[0].text == "court | ligne"
    assert chunks[-1].text.endswith("fin | ligne")


def test_oversized_paragraph_split_at_sentences_then_words() -> None:
    text = " ".join(sentence(i) for i in range(40))
    chunks = chunk_blocks("d", [Block(P, text)], target_chars=200)
    assert all(len(c.text) <= 200 for c in chunks)
    assert all(c.text.endswith(".") for c in chunks)  # cut at sentence ends
    assert " ".join(c.text for c in chunks) == text

    word = "x" * 450
    chunks = chunk_blocks("d", [Block(P, f"début {word} fin")], target_chars=200)
    assert all(len(c.text) <= 200 for c in chunks)
    assert "".join(c.text.replace("début", "").replace("fin", "").replace(" ", "") for c in chunks) == word


def test_overlap_repeats_the_end_of_the_previous_chunk() -> None:
    paragraphs = [sentence(i) for i in range(30)]
    blocks = [Block(H, "Section", level=1)] + [Block(P, p) for p in paragraphs]
    plain = chunk_blocks("d", blocks, target_chars=300)
    overlapped = chunk_blocks("d", blocks, target_chars=300, overlap_chars=120)
    assert len(overlapped) > len(plain) > 1
    for previous, current in itertools.pairwise(overlapped):
        repeated = current.text.split("\n")[1]  # after the heading line
        assert repeated in previous.text.split("\n")
        assert len(current.text) <= 300


def test_page_breaks_carry_no_text_and_do_not_split() -> None:
    blocks = [Block(P, "page un", page=1), Block(PB, "", page=2), Block(P, "page deux", page=2)]
    assert [c.text for c in chunk_blocks("d", blocks)] == ["page un\npage deux"]


def test_point_ids_are_deterministic() -> None:
    blocks = [Block(H, "T", level=1)] + [Block(P, sentence(i)) for i in range(50)]
    first = chunk_blocks("share:CLIENTS/a.docx", blocks, target_chars=200)
    second = chunk_blocks("share:CLIENTS/a.docx", blocks, target_chars=200)
    other = chunk_blocks("share:CLIENTS/b.docx", blocks, target_chars=200)
    assert [c.point_id for c in first] == [c.point_id for c in second]
    assert first[3].point_id == str(uuid.uuid5(POINT_NAMESPACE, "share:CLIENTS/a.docx:3"))
    assert len({c.point_id for c in first}) == len(first)
    assert not {c.point_id for c in first} & {c.point_id for c in other}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        chunk_blocks("d", [], target_chars=0)
    with pytest.raises(ValueError):
        chunk_blocks("d", [], target_chars=100, overlap_chars=100)
    with pytest.raises(ValueError):
        chunk_blocks("d", [], overlap_chars=-1)


def test_corpus_contract_chunks_keep_facts_under_their_heading() -> None:
    path = SHARE / "CLIENTS" / "21_Contrat_Maintenance_Baumont_Industries.docx"
    chunks = chunk_blocks("c21", extract_bytes(path.read_bytes(), path.name), target_chars=400)
    tarif = [c for c in chunks if "Forfait mensuel | CHF 4 200 HT" in c.text]
    assert len(tarif) == 1
    assert tarif[0].heading_path == ("Contrat de maintenance — Baumont Industries", "4. Conditions financières")
    assert any("35 postes" in c.text and c.heading_path[-1] == "2. Objet et périmètre" for c in chunks)


# ------------------------------------------------------------------------------ property test

_words = st.text(alphabet="abcdéfghij.!? ", min_size=1, max_size=12)
_text = st.lists(_words, min_size=1, max_size=60).map(" ".join)
_block = st.one_of(
    st.builds(lambda t, lvl: Block(H, t[:40], level=lvl), _text, st.integers(0, 4)),
    st.builds(lambda t: Block(P, t), _text),
    st.builds(lambda t: Block(R, t), _text),
    st.just(Block(PB, "", page=2)),
)


@settings(max_examples=150, deadline=None)
@given(
    blocks=st.lists(_block, max_size=25),
    target=st.integers(20, 400),
    overlap_share=st.floats(0, 0.9),
)
def test_invariants_on_random_documents(blocks: list[Block], target: int, overlap_share: float) -> None:
    overlap = int(target * overlap_share)
    chunks = chunk_blocks("doc", blocks, target_chars=target, overlap_chars=overlap)
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert all(c.doc_id == "doc" for c in chunks)
    assert all(c.text.strip() and len(c.text) <= target for c in chunks)
    # every word of the input survives, and (without overlap) no text is invented
    produced = " ".join(c.text for c in chunks).split()
    expected = " ".join(b.text for b in blocks).split()
    if not expected:
        assert chunks == []
    for word in set(expected):
        assert any(word in w for w in produced)
    if overlap == 0 and all(b.kind in (P, PB) for b in blocks):
        assert "".join(produced) == "".join(expected)
