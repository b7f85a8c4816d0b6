"""The ``ollama`` and ``openai`` embedders against a real local HTTP server (support.httpserver)
scripted to answer like Ollama's ``/api/embed`` and an OpenAI-compatible ``/v1/embeddings``."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator

import numpy as np
import pytest
from support.httpserver import DISCONNECT, Request, ScriptedServer, sequence

from ancre.errors import EmbedderError
from ancre.index.embedder_factory import make_embedder
from ancre.index.embedders import Embedder
from ancre.index.ollama_embed import HttpEmbedder, OllamaEmbedder
from ancre.index.openai_embed import OpenAIEmbedder
from ancre.settings import OllamaEmbedderConfig, OpenAIEmbedderConfig

DIM = 16
TOO_LONG = {"error": "the input length exceeds the context length"}  # Ollama, truncate=false
FAST = 0.001  # backoff base in seconds, to keep the retry tests quick


def fake_vector(text: str, dim: int = DIM) -> np.ndarray:
    """Deterministic, unnormalised vector for ``text`` (what the scripted server answers)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).normal(size=dim) * 3.0


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def ollama_ok(dim: int = DIM):
    def handler(req: Request):
        vectors = [fake_vector(t, dim).tolist() for t in req.json["input"]]
        return 200, {"model": req.json["model"], "embeddings": vectors}

    return handler


def openai_ok(req: Request):
    data = [
        {"object": "embedding", "index": i, "embedding": fake_vector(t).tolist()}
        for i, t in enumerate(req.json["input"])
    ]
    return 200, {"object": "list", "data": data, "model": req.json["model"]}


_made: list[HttpEmbedder] = []


@pytest.fixture
def srv() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s
        while _made:
            _made.pop().close()
    assert not s.errors


def track(emb: HttpEmbedder) -> HttpEmbedder:
    """Close ``emb`` when the test's server stops."""
    _made.append(emb)
    return emb


def ollama(srv: ScriptedServer, **kw) -> OllamaEmbedder:
    kw.setdefault("dim", DIM)
    return track(OllamaEmbedder(OllamaEmbedderConfig(kind="ollama", url=srv.url, **kw), backoff_s=FAST))


def embed_inputs(srv: ScriptedServer, path: str = "/api/embed") -> list[list[str]]:
    return [r.json["input"] for r in srv.requests_to(path, "POST")]


# -- ollama: request shape, batching, prefixes, clean-up ------------------------------------------


def test_ollama_batches_and_keeps_order(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", ollama_ok())
    emb = ollama(srv, batch_size=3)
    texts = [f"texte numéro {i}" for i in range(7)]
    out = emb.embed_documents(texts)

    assert len(srv.requests) == math.ceil(7 / 3)
    assert [len(batch) for batch in embed_inputs(srv)] == [3, 3, 1]
    assert out.shape == (7, DIM) and out.dtype == np.float32
    expected = np.stack([unit(fake_vector("search_document: " + t)) for t in texts])
    np.testing.assert_allclose(out, expected, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_ollama_request_body(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", ollama_ok())
    emb = ollama(srv, keep_alive="45m", model="nomic-embed-text")
    emb.embed_documents(["bonjour"])
    body = srv.requests[0].json
    assert body == {
        "model": "nomic-embed-text",
        "input": ["search_document: bonjour"],
        "keep_alive": "45m",
        "truncate": False,
    }
    assert "authorization" not in srv.requests[0].headers
    assert emb.name == "ollama:nomic-embed-text"
    assert isinstance(emb, Embedder)


def test_ollama_empty_list_sends_nothing(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", ollama_ok())
    out = ollama(srv).embed_documents([])
    assert out.shape == (0, DIM) and out.dtype == np.float32
    assert srv.requests == []


def test_nomic_prefixes_by_default(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", ollama_ok())
    emb = ollama(srv)
    emb.embed_documents(["contrat"])
    q = emb.embed_query("quel forfait ?")
    assert embed_inputs(srv) == [["search_document: contrat"], ["search_query: quel forfait ?"]]
    assert q.shape == (DIM,)
    np.testing.assert_allclose(q, unit(fake_vector("search_query: quel forfait ?")), atol=1e-6)


def test_configured_prefixes_override_and_show_in_name(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", ollama_ok())
    emb = ollama(srv, model="bge-m3", document_prefix="passage: ", query_prefix="")
    emb.embed_documents(["contrat"])
    emb.embed_query("forfait")
    assert embed_inputs(srv) == [["passage: contrat"], ["forfait"]]
    assert emb.name != "ollama:bge-m3" and emb.name.startswith("ollama:bge-m3")


def test_other_models_get_no_prefix(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", ollama_ok())
    emb = ollama(srv, model="bge-m3")
    emb.embed_documents(["contrat"])
    emb.embed_query("forfait")
    assert embed_inputs(srv) == [["contrat"], ["forfait"]]
    assert emb.name == "ollama:bge-m3"


def test_toc_leaders_collapsed_before_sending(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", ollama_ok())
    emb = ollama(srv)
    emb.embed_documents(["1. Objet du contrat ................ 2\n2. Durée ______________ 3"])
    emb.embed_query("Objet ........ ?")
    sent = [t for batch in embed_inputs(srv) for t in batch]
    assert all(not re.search(r"\.{4,}|_{4,}", t) for t in sent), sent
    assert "Objet du contrat" in sent[0] and "Durée" in sent[0]


# -- dimension -------------------------------------------------------------------------------


def test_dimension_probed_when_not_configured(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", ollama_ok(dim=24))
    emb = track(OllamaEmbedder(OllamaEmbedderConfig(kind="ollama", url=srv.url), backoff_s=FAST))
    assert emb.dim == 24
    assert len(srv.requests) == 1  # one probe at construction
    assert emb.embed_documents(["a", "b"]).shape == (2, 24)


def test_configured_dimension_is_enforced(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", ollama_ok(dim=24))
    emb = ollama(srv, dim=768)
    assert srv.requests == []  # no probe when embedder.dim is set
    with pytest.raises(EmbedderError, match="768"):
        emb.embed_documents(["a"])


def test_probe_failure_raises_embedder_error_naming_url() -> None:
    with ScriptedServer() as s:
        url = s.url
    with pytest.raises(EmbedderError, match=re.escape(url)):
        OllamaEmbedder(OllamaEmbedderConfig(kind="ollama", url=url, retries=1), backoff_s=FAST)


def test_factory_builds_ollama_and_openai(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", ollama_ok())
    srv.route("POST", "/v1/embeddings", openai_ok)
    o = track(make_embedder(OllamaEmbedderConfig(kind="ollama", url=srv.url)))
    a = track(make_embedder(OpenAIEmbedderConfig(kind="openai", url=srv.url, model="bge-m3")))
    assert isinstance(o, OllamaEmbedder) and o.dim == DIM
    assert isinstance(a, OpenAIEmbedder) and a.name == "openai:bge-m3" and a.dim == DIM


# -- retries ---------------------------------------------------------------------------------


def test_retries_after_503_then_succeeds(srv: ScriptedServer) -> None:
    busy = (503, {"error": "server busy"})
    srv.route("POST", "/api/embed", sequence(busy, busy, ollama_ok()))
    out = ollama(srv, retries=4).embed_documents(["a", "b"])
    assert len(srv.requests) == 3
    np.testing.assert_allclose(out[1], unit(fake_vector("search_document: b")), atol=1e-6)


def test_retries_429_and_dropped_connections(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", sequence((429, {"error": "slow down"}), DISCONNECT, ollama_ok()))
    out = ollama(srv, retries=2).embed_documents(["a"])
    assert out.shape == (1, DIM)
    assert len(srv.requests) == 3


def test_exhausted_retries_raise_with_url_and_last_error(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", (503, {"error": "model is loading"}))
    emb = ollama(srv, retries=2)
    with pytest.raises(EmbedderError) as ei:
        emb.embed_documents(["a"])
    assert len(srv.requests) == 3  # 1 try + 2 retries
    assert f"{srv.url}/api/embed" in str(ei.value)
    assert "503" in str(ei.value) and "model is loading" in str(ei.value)


def test_client_errors_are_not_retried(srv: ScriptedServer) -> None:
    not_found = {"error": 'model "nomic-embed-text" not found, try pulling it first'}
    srv.route("POST", "/api/embed", (404, not_found))
    with pytest.raises(EmbedderError, match="not found"):
        ollama(srv, retries=4).embed_documents(["a"])
    assert len(srv.requests) == 1


def test_unreachable_server_raises_after_retries() -> None:
    with ScriptedServer() as s:
        url = s.url  # the port refuses connections once the server is stopped
    cfg = OllamaEmbedderConfig(kind="ollama", url=url, dim=DIM, retries=2)
    with OllamaEmbedder(cfg, backoff_s=FAST) as emb, pytest.raises(EmbedderError, match=r"failed after 3 attempt\(s\).*Connect"):
        emb.embed_query("a")


def test_malformed_answer_raises(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", (200, {"embeddings": [[1.0] * DIM]}))  # 1 vector for 2 inputs
    with pytest.raises(EmbedderError, match="2 input"):
        ollama(srv).embed_documents(["a", "b"])
    srv.route("POST", "/api/embed", (200, {"embeddings": [[0.0] * DIM]}))
    with pytest.raises(EmbedderError, match="zero"):
        ollama(srv).embed_documents(["a"])


# -- too long: split, never drop -------------------------------------------------------------


def limited_ollama(max_chars: int, status: int = 400, error: dict = TOO_LONG):
    """An Ollama that rejects any request holding an input longer than ``max_chars``."""
    ok = ollama_ok()

    def handler(req: Request):
        if any(len(t) > max_chars for t in req.json["input"]):
            return status, error
        return ok(req)

    return handler


WORDS = [f"mot{i:02d}" for i in range(40)]
LONG = " ".join(WORDS)  # 239 characters


def accepted_inputs(srv: ScriptedServer, max_chars: int, path: str = "/api/embed") -> list[str]:
    """The inputs of the requests the length-limited server accepted, in order."""
    batches = embed_inputs(srv, path)
    return [t for batch in batches if all(len(x) <= max_chars for x in batch) for t in batch]


def test_too_long_input_is_split_and_averaged(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", limited_ollama(150))
    emb = ollama(srv, model="bge-m3")  # no prefix: pieces are plain substrings
    v = emb.embed_documents([LONG])[0]

    pieces = accepted_inputs(srv, 150)
    assert len(pieces) == 2
    assert " ".join(pieces) == LONG  # both halves sent, nothing dropped
    halves = unit(fake_vector(pieces[0])) + unit(fake_vector(pieces[1]))
    np.testing.assert_allclose(v, unit(halves), atol=1e-6)
    assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-5


def test_too_long_split_recurses_and_keeps_prefix_on_each_piece(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", limited_ollama(60))
    emb = ollama(srv)  # nomic: "search_document: " on every piece
    out = emb.embed_documents([LONG])
    assert out.shape == (1, DIM)
    pieces = accepted_inputs(srv, 60)
    assert len(pieces) > 2
    assert all(p.startswith("search_document: ") for p in pieces)
    words = " ".join(p.removeprefix("search_document: ") for p in pieces).split()
    assert words == WORDS  # every word embedded exactly once, in order


def test_too_long_in_a_batch_retries_item_by_item(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", limited_ollama(150))
    emb = ollama(srv, model="bge-m3", batch_size=8)
    out = emb.embed_documents(["court", LONG, "bref"])
    batches = embed_inputs(srv)
    assert batches[0] == ["court", LONG, "bref"]  # rejected as a whole
    assert ["court"] in batches and ["bref"] in batches
    np.testing.assert_allclose(out[0], unit(fake_vector("court")), atol=1e-6)
    np.testing.assert_allclose(out[2], unit(fake_vector("bref")), atol=1e-6)
    assert not np.allclose(out[1], out[0])


def test_too_long_as_http_500_is_split_not_retried(srv: ScriptedServer) -> None:
    error = {"error": "input exceeds maximum context length"}
    srv.route("POST", "/api/embed", limited_ollama(150, status=500, error=error))
    out = ollama(srv, model="bge-m3", retries=0).embed_documents([LONG])
    assert out.shape == (1, DIM)


def test_split_depth_is_bounded(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/embed", (400, TOO_LONG))  # rejects everything
    with pytest.raises(EmbedderError, match="too long"):
        ollama(srv).embed_documents([LONG])
    assert len(srv.requests) < 200


# -- openai-compatible -----------------------------------------------------------------------


def openai(srv: ScriptedServer, url: str | None = None, **kw) -> OpenAIEmbedder:
    kw.setdefault("dim", DIM)
    kw.setdefault("model", "bge-m3")
    return track(OpenAIEmbedder(OpenAIEmbedderConfig(kind="openai", url=url or srv.url, **kw), backoff_s=FAST))


def test_openai_auth_header_and_body(srv: ScriptedServer) -> None:
    srv.route("POST", "/v1/embeddings", openai_ok)
    emb = openai(srv, api_key="sk-secret-123")
    emb.embed_documents(["a", "b"])
    req = srv.requests[0]
    assert req.headers["authorization"] == "Bearer sk-secret-123"
    assert req.json == {"model": "bge-m3", "input": ["a", "b"]}
    assert "sk-secret" not in repr(emb)


def test_openai_without_key_sends_no_auth(srv: ScriptedServer) -> None:
    srv.route("POST", "/v1/embeddings", openai_ok)
    openai(srv).embed_query("a")
    assert "authorization" not in srv.requests[0].headers


def test_openai_orders_by_index(srv: ScriptedServer) -> None:
    def reversed_answer(req: Request):
        status, body = openai_ok(req)
        body["data"].reverse()
        return status, body

    srv.route("POST", "/v1/embeddings", reversed_answer)
    out = openai(srv).embed_documents(["un", "deux", "trois"])
    expected = np.stack([unit(fake_vector(t)) for t in ["un", "deux", "trois"]])
    np.testing.assert_allclose(out, expected, atol=1e-6)


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_openai_v1_not_doubled(srv: ScriptedServer, suffix: str) -> None:
    srv.route("POST", "/v1/embeddings", openai_ok)
    openai(srv, url=srv.url + suffix).embed_query("a")
    assert [r.path for r in srv.requests] == ["/v1/embeddings"]


def test_openai_probes_dimension_and_splits_too_long(srv: ScriptedServer) -> None:
    vllm_too_long = {
        "error": {
            "message": "This model's maximum context length is 512 tokens. "
            "However, you requested 700 tokens.",
            "type": "BadRequestError",
        }
    }

    def handler(req: Request):
        if any(len(t) > 150 for t in req.json["input"]):
            return 400, vllm_too_long
        return openai_ok(req)

    srv.route("POST", "/v1/embeddings", handler)
    emb = track(OpenAIEmbedder(OpenAIEmbedderConfig(kind="openai", url=srv.url, model="bge-m3"), backoff_s=FAST))
    assert emb.dim == DIM
    out = emb.embed_documents([LONG])
    assert out.shape == (1, DIM)
    assert " ".join(accepted_inputs(srv, 150, "/v1/embeddings")[1:]) == LONG  # [0] is the probe


def test_openai_errors_never_show_the_key(srv: ScriptedServer) -> None:
    srv.route("POST", "/v1/embeddings", (401, {"error": {"message": "Incorrect API key provided"}}))
    emb = openai(srv, api_key="sk-secret-123")
    with pytest.raises(EmbedderError) as ei:
        emb.embed_query("a")
    assert "401" in str(ei.value) and "sk-secret" not in str(ei.value)
    assert len(srv.requests) == 1
