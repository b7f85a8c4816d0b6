"""e5-local with the real bundled model, the factory's config checks, and the pure helpers of the
HTTP embedders (HTTP behaviour itself: tests/integration/test_embedders_http.py)."""

from __future__ import annotations

import numpy as np
import pytest

from ancre.config import load_settings
from ancre.errors import ConfigError
from ancre.index.e5_local import E5LocalEmbedder
from ancre.index.embedder_factory import make_embedder
from ancre.index.embedders import Embedder
from ancre.index.ollama_embed import default_prefixes, split_in_two
from ancre.index.openai_embed import embeddings_endpoint
from ancre.settings import E5LocalEmbedderConfig, EmbedderConfig

MAINTENANCE = (
    "Article 5 – Conditions financières. En contrepartie des prestations de maintenance, le Client "
    "verse au Prestataire un forfait mensuel de 2 450 € HT, payable à terme échu. Le forfait couvre "
    "la supervision, les mises à jour et l'assistance téléphonique."
)
SALARIES = (
    "Grille salariale 2026 – Ingénieur systèmes confirmé : salaire annuel brut de 48 000 € à "
    "56 000 €. Technicien support niveau 2 : de 32 000 € à 36 000 €. Revalorisation au 1er janvier."
)
QUESTION = "Quel est le montant du forfait mensuel du contrat de maintenance ?"


@pytest.fixture(scope="module")
def e5() -> E5LocalEmbedder:
    return E5LocalEmbedder()


def test_e5_documents_shape_dtype_and_norm(e5: E5LocalEmbedder) -> None:
    out = e5.embed_documents([MAINTENANCE, SALARIES, "court"])
    assert out.shape == (3, 384)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-4)
    assert not np.allclose(out[0], out[1])


def test_e5_empty_list_gives_zero_rows(e5: E5LocalEmbedder) -> None:
    out = e5.embed_documents([])
    assert out.shape == (0, 384)
    assert out.dtype == np.float32


def test_e5_query_shape_and_name(e5: E5LocalEmbedder) -> None:
    q = e5.embed_query(QUESTION)
    assert q.shape == (384,)
    assert q.dtype == np.float32
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-4
    assert e5.name == "e5-local:multilingual-e5-small"
    assert e5.dim == 384
    assert isinstance(e5, Embedder)


def test_e5_query_and_passage_prefixes_differ(e5: E5LocalEmbedder) -> None:
    # the engine prepends "query: " / "passage: " itself: the same text gives two different vectors
    assert not np.allclose(e5.embed_query(MAINTENANCE), e5.embed_documents([MAINTENANCE])[0], atol=1e-3)


def test_e5_french_semantic_sanity(e5: E5LocalEmbedder) -> None:
    docs = e5.embed_documents([MAINTENANCE, SALARIES])
    scores = docs @ e5.embed_query(QUESTION)
    assert scores[0] > scores[1]


def test_e5_batching_does_not_change_vectors(e5: E5LocalEmbedder) -> None:
    texts = [MAINTENANCE, SALARIES, QUESTION, "Politique de sécurité du SI", "Sarrasin Azure"]
    whole = e5.embed_documents(texts)
    small = E5LocalEmbedder(batch_size=2).embed_documents(texts)
    np.testing.assert_allclose(whole, small, atol=1e-4)


def test_e5_text_longer_than_512_tokens_is_embedded_whole(e5: E5LocalEmbedder) -> None:
    # the engine windows long inputs instead of truncating: the end of the text changes the vector
    head = " ".join([MAINTENANCE] * 8)  # ~550 tokens: a truncating model would never see the tail
    a, b = e5.embed_documents([head + " " + SALARIES, head + " " + MAINTENANCE])
    assert abs(float(np.linalg.norm(a)) - 1.0) < 1e-4
    assert not np.allclose(a, b, atol=1e-3)


def test_e5_query_is_cut_to_the_window_the_model_reads(e5: E5LocalEmbedder) -> None:
    """A 4,000-character question cost three windows and held the engine for everyone: a query is
    embedded as the model reads it — its first 512 tokens (prefix and specials included) — so its
    vector is that of its longest fitting prefix, and a 1 MB one costs the same."""
    from ancre.index import e5_local

    e5.embed_query("chargement")
    model = e5_local._models["original"]  # the engine itself, windowing included
    long = " ".join([MAINTENANCE, SALARIES] * 9)  # ~1,080 tokens
    assert model.token_count(long, True) > 1000
    words = long.split(" ")
    # the longest whole-word prefix the model reads in one window, found by the test on its own
    fits = max(k for k in range(1, len(words) + 1) if model.token_count(" ".join(words[:k]), True) <= 512)
    window = " ".join(words[:fits])
    expected = model.encode([window], True)[0]
    np.testing.assert_allclose(e5.embed_query(long), expected, atol=1e-5)
    np.testing.assert_allclose(e5.embed_query(long + " " + "remplissage " * 200_000), expected, atol=1e-5)
    assert not np.allclose(model.encode([long], True)[0], expected, atol=1e-3)  # the model alone would window it


def test_e5_short_query_does_not_wait_for_a_long_one_and_long_ones_go_shortest_first() -> None:
    """The engine's scheduling (index/e5_local.py): a short question is encoded while a long one
    holds the engine; waiting long queries run shortest first, before passages."""
    import threading

    from ancre.index.e5_local import _Engine

    engine = _Engine()
    release, running = threading.Event(), threading.Event()
    order: list[str] = []

    def hold() -> str:
        running.set()
        assert release.wait(30)
        return "long"

    first = threading.Thread(target=lambda: engine.run(hold, query=True, tokens=500))
    first.start()
    assert running.wait(10)
    waiting = [
        threading.Thread(target=lambda name=name, kind=kind, n=n: engine.run(lambda: order.append(name), query=kind, tokens=n))
        for name, kind, n in (("passages", False, 512), ("long-400", True, 400), ("long-200", True, 200))
    ]
    for t in waiting:
        t.start()
        t.join(0.2)  # each is queued before the next one
    done = threading.Event()
    short = threading.Thread(target=lambda: (engine.run(lambda: order.append("short"), query=True, tokens=20), done.set()))
    short.start()
    assert done.wait(10), "a short query waited for the long one in progress"
    assert order == ["short"]
    release.set()
    for t in (first, *waiting, short):
        t.join(10)
    assert order == ["short", "long-200", "long-400", "passages"]


def test_e5_nul_characters_do_not_cut_the_text(e5: E5LocalEmbedder) -> None:
    with_nul, cut = e5.embed_documents(["forfait\x00" + SALARIES, "forfait"])
    assert not np.allclose(with_nul, cut, atol=1e-3)


def test_e5_question_does_not_wait_behind_passages(e5: E5LocalEmbedder) -> None:
    """A question asked while a batch of long passages is being embedded is answered before that
    batch is done (it runs alongside, never waiting for the batch in progress)."""
    import threading

    long_text = " ".join([MAINTENANCE, SALARIES] * 6)  # several engine windows each
    order: list[str] = []
    started = threading.Event()

    def passages() -> None:
        started.set()
        e5.embed_documents([long_text] * 8)
        order.append("passages")

    t = threading.Thread(target=passages)
    t.start()
    started.wait()
    import time

    time.sleep(0.2)  # the passage call is in the engine
    q = e5.embed_query(QUESTION)
    order.append("question")
    t.join()
    assert order == ["question", "passages"]
    assert np.allclose(q, e5.embed_query(QUESTION), atol=1e-4)


def test_e5_concurrent_questions_share_engine_calls(e5: E5LocalEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Twenty questions asked at once are encoded in a few engine calls (the ones that waited go
    together), each caller getting the vector of his own question."""
    import threading

    from ancre.index import e5_local

    questions = [f"{QUESTION} (variante {i})" for i in range(20)]
    alone = {q: e5.embed_query(q) for q in questions}
    model = e5_local._models["original"]
    real = model.encode
    calls: list[int] = []

    def counted(texts, is_query=False):  # the real engine, calls counted
        if is_query:
            calls.append(len(texts))
        return real(texts, is_query)

    monkeypatch.setattr(model, "encode", counted)
    got: dict[str, np.ndarray] = {}
    barrier = threading.Barrier(len(questions))

    def ask(q: str) -> None:
        barrier.wait()
        got[q] = e5.embed_query(q)

    threads = [threading.Thread(target=ask, args=(q,)) for q in questions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(calls) == len(questions) and len(calls) < len(questions) // 2, calls
    for q in questions:
        assert np.allclose(got[q], alone[q], atol=1e-4)


def test_factory_default_is_e5_local() -> None:
    emb = make_embedder(load_settings(None).embedder)
    assert isinstance(emb, E5LocalEmbedder)
    assert emb.name == "e5-local:multilingual-e5-small"


@pytest.mark.parametrize(
    ("cfg", "key"),
    [
        (E5LocalEmbedderConfig(model="bge-m3"), "embedder.model"),
        (E5LocalEmbedderConfig(dim=768), "embedder.dim"),
    ],
)
def test_factory_config_errors_name_the_key(cfg: EmbedderConfig, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        make_embedder(cfg)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"kind": "openai", "url": "http://127.0.0.1:9"}, "embedder.model: Field required"),
        ({"kind": "openai", "model": "m"}, "embedder.url: Field required"),
        ({"kind": "e5-local", "query_prefix": "q: "},
         "embedder.query_prefix: not a key of kind 'e5-local' (only of 'ollama', 'openai')"),
        ({"url": "http://127.0.0.1:11434"}, "embedder.url: not a key of kind 'e5-local' (only of 'ollama', 'openai')"),
        ({"kind": "ollama", "keep_alive": "1h", "model": "x", "bogus": 1}, "embedder.bogus: unknown key for kind 'ollama'"),
        ({"kind": "onnx"}, "embedder.kind: unknown embedder kind 'onnx' (known: e5-local, ollama, openai)"),
        ({"kind": "ollama", "url": "127.0.0.1:11434"},
         "embedder.url: '127.0.0.1:11434' is not a URL (http:// or https://host…): no scheme"),
    ],
)
def test_embedder_keys_are_checked_per_kind(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_settings(None, embedder=table)
    assert message in str(e.value)


def test_default_prefixes() -> None:
    assert default_prefixes("nomic-embed-text") == ("search_document: ", "search_query: ")
    assert default_prefixes("nomic-embed-text:v1.5") == ("search_document: ", "search_query: ")
    assert default_prefixes("bge-m3") == ("", "")


def test_split_in_two_cuts_at_whitespace_near_middle() -> None:
    text = "alpha beta gamma delta epsilon zeta"
    left, right = split_in_two(text)
    assert f"{left} {right}" == text
    assert abs(len(left) - len(right)) <= 6
    assert left and right


def test_split_in_two_without_whitespace_cuts_in_the_middle() -> None:
    text = "x" * 11
    left, right = split_in_two(text)
    assert left + right == text
    assert (len(left), len(right)) == (5, 6)


def test_split_in_two_ignores_whitespace_far_from_the_middle() -> None:
    text = "a " + "b" * 40
    left, right = split_in_two(text)
    assert left + right == text  # the only space is at the edge: cut in the middle instead
    assert len(left) == 21


def test_embeddings_endpoint_does_not_double_v1() -> None:
    assert embeddings_endpoint("http://h:8000") == "http://h:8000/v1/embeddings"
    assert embeddings_endpoint("http://h:8000/") == "http://h:8000/v1/embeddings"
    assert embeddings_endpoint("http://h:8000/v1") == "http://h:8000/v1/embeddings"
    assert embeddings_endpoint("http://h:8000/v1/") == "http://h:8000/v1/embeddings"
