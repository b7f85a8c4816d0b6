"""Chat clients and the grounding judge against a scripted HTTP server on 127.0.0.1 (real HTTP:
Ollama's /api/chat with NDJSON streaming, an OpenAI-compatible /v1/chat/completions with SSE)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from support.httpserver import DISCONNECT, Request, ScriptedServer, Stream, ndjson, sse

from ancre.query.context import Context, Extract, Source
from ancre.query.enrich import enrich_citations
from ancre.query.grounding import CONTROL_FACT, CONTROL_INVENTED, CONTROL_JUDGE, CONTROL_REFUSAL, ground
from ancre.query.judge import Judge, parse_verdict
from ancre.query.llm import ChatClient, LlmError, ModelNotFoundError, OllamaChat, OpenAIChat, make_chat_client
from ancre.query.prompt import REFUSAL, ChatMessage, build_messages
from ancre.settings.query import JudgeConfig, LlmConfig

ROCHAT = "03_Contrat_Maintenance_Etude_Rochat.docx"
BAUMONT = "21_Contrat_Maintenance_Baumont_Industries.docx"
LOC = "\\\\SRV-FICHIERS\\Partage\\DIRECTION\\"
MESSAGES = [ChatMessage("system", "Tu réponds en français."), ChatMessage("user", "Bonjour ?")]


def _ctx() -> Context:
    texts = {
        ROCHAT: "Le périmètre couvre 20 postes. Le pare-feu OPNsense est inclus. Le forfait mensuel "
        "s'élève à CHF 3 840 HT.",
        BAUMONT: "Le périmètre couvre 35 postes. Le forfait mensuel s'élève à CHF 4 200 HT.",
    }
    extracts = tuple(
        Extract(name, f"partage:{name}", 0, text, LOC, f"DIRECTION/{name}", "documents", 0.03)
        for name, text in texts.items()
    )
    sources = tuple(
        Source(e.filename, e.doc_id, e.path, e.location, e.collection, "0" * 64, 0.03) for e in extracts
    )
    return Context(extracts, sources, True)


CASE1 = (
    f"Le contrat couvre 20 postes et le pare-feu OPNsense [{ROCHAT}]. Le forfait mensuel s'élève à "
    f"CHF 3 840 HT [{ROCHAT}]."
)
CASE2 = (
    "Le contrat couvre 20 postes et un pare-feu pfSense [22_Contrat_Maintenance_Étude_Rochat.docx]. "
    "Le forfait mensuel s'élève à CHF 3 000 HT [22_Contrat_Maintenance_Étude_Rochat.docx]."
)


@pytest.fixture
def srv() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def _ollama_answer(content: str, thinking: str | None = None) -> tuple[int, dict]:
    msg = {"role": "assistant", "content": content}
    if thinking is not None:
        msg["thinking"] = thinking
    return 200, {"model": "m", "message": msg, "done": True, "done_reason": "stop"}


# ----------------------------------------------------------------------------- Ollama


def test_ollama_chat_request_and_answer(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/chat", _ollama_answer("Bonjour.", thinking="je salue"))
    client = OllamaChat(srv.url, keep_alive="45m", num_ctx=8192)
    result = client.chat(MESSAGES, temperature=0.2)
    client.close()
    assert result.content == "Bonjour." and result.thinking == "je salue"
    (req,) = srv.requests_to("/api/chat")
    assert req.json == {
        "model": "qwen2.5:14b",
        "messages": [
            {"role": "system", "content": "Tu réponds en français."},
            {"role": "user", "content": "Bonjour ?"},
        ],
        "stream": False,
        "keep_alive": "45m",
        "options": {"temperature": 0.2, "num_ctx": 8192},
    }


def test_answer_temperature_is_clamped_to_0_3(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/chat", _ollama_answer("ok"))
    srv.route("POST", "/v1/chat/completions", (200, {"choices": [{"message": {"content": "ok"}}]}))
    ollama, openai = OllamaChat(srv.url), OpenAIChat(srv.url, "qwen")
    ollama.chat(MESSAGES, temperature=0.9)
    openai.chat(MESSAGES, temperature=1.5)
    ollama.chat(MESSAGES, temperature=-1)
    assert [r.json["options"]["temperature"] for r in srv.requests_to("/api/chat")] == [0.3, 0.0]
    assert srv.requests_to("/v1/chat/completions")[0].json["temperature"] == 0.3
    ollama.close()
    openai.close()


def test_ollama_streams_ndjson(srv: ScriptedServer) -> None:
    srv.route(
        "POST",
        "/api/chat",
        lambda req: ndjson(
            [
                {"message": {"role": "assistant", "content": "Le forfait "}, "done": False},
                {"message": {"role": "assistant", "content": ""}, "done": False},
                {"message": {"role": "assistant", "content": "est de CHF 3 840 HT."}, "done": False},
                {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"},
            ]
        ),
    )
    client = OllamaChat(srv.url)
    pieces = list(client.stream(MESSAGES, temperature=0.9))
    client.close()
    assert pieces == ["Le forfait ", "est de CHF 3 840 HT."]
    (req,) = srv.requests_to("/api/chat")
    assert req.json["stream"] is True and req.json["options"]["temperature"] == 0.3


def test_ollama_stream_errors(srv: ScriptedServer) -> None:
    client = OllamaChat(srv.url)
    srv.route("POST", "/api/chat", lambda req: ndjson([{"message": {"content": "a"}, "done": False}, {"error": "model crashed"}]))
    with pytest.raises(LlmError, match="model crashed"):
        list(client.stream(MESSAGES, temperature=0.2))
    srv.route(
        "POST",
        "/api/chat",
        lambda req: Stream([b'{"message": {"content": "a"}, "done": false}\n'], content_type="application/x-ndjson", truncated=True),
    )
    with pytest.raises(LlmError):
        list(client.stream(MESSAGES, temperature=0.2))
    # docs/api/errors.mdx of ollama/ollama: 404 for a model that does not exist
    srv.route("POST", "/api/chat", (404, {"error": "model 'qwen2.5:14b' not found"}))
    with pytest.raises(ModelNotFoundError, match=r"not on the ollama server .*`ollama pull qwen2.5:14b`"):
        list(client.stream(MESSAGES, temperature=0.2))
    client.close()


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        ((500, {"error": "llama runner process has terminated"}), "HTTP 500: llama runner"),
        (DISCONNECT, "qwen2.5:14b"),
        ((200, "pas du JSON"), "unreadable"),
        ((200, {"done": True}), "without a message"),
    ],
)
def test_ollama_failures_raise_llm_error(srv: ScriptedServer, answer: object, match: str) -> None:
    srv.route("POST", "/api/chat", answer)
    client = OllamaChat(srv.url)
    with pytest.raises(LlmError, match=match):
        client.chat(MESSAGES, temperature=0.2)
    client.close()


def test_ollama_timeout_raises_llm_error(srv: ScriptedServer) -> None:
    release = threading.Event()

    def slow(req: Request) -> tuple[int, dict]:
        release.wait(10)
        return _ollama_answer("trop tard")

    srv.route("POST", "/api/chat", slow)
    client = OllamaChat(srv.url, timeout_s=0.2)
    try:
        with pytest.raises(LlmError, match=r"no answer within 0.2 s"):
            client.chat(MESSAGES, temperature=0.2)
    finally:
        release.set()
        client.close()


def test_unreachable_server_raises_llm_error() -> None:
    with ScriptedServer() as s:
        url = s.url
    client = OllamaChat(url, connect_timeout_s=1)
    with pytest.raises(LlmError):
        client.chat(MESSAGES, temperature=0.2)
    client.close()


# ----------------------------------------------------------------------------- OpenAI-compatible


@pytest.mark.parametrize("suffix", ["", "/v1", "/v1/"])
def test_openai_chat_request_and_answer(srv: ScriptedServer, suffix: str) -> None:
    srv.route(
        "POST",
        "/v1/chat/completions",
        (200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "{}", "reasoning_content": "r"}}]}),
    )
    client = OpenAIChat(srv.url + suffix, "Qwen/Qwen2.5-14B-Instruct", api_key="secret")
    result = client.chat(MESSAGES, temperature=0.2, format="json", think=False)
    client.close()
    assert result.content == "{}" and result.thinking == "r"
    (req,) = srv.requests_to("/v1/chat/completions")
    assert req.headers["authorization"] == "Bearer secret"
    assert req.json == {
        "model": "Qwen/Qwen2.5-14B-Instruct",
        "messages": [
            {"role": "system", "content": "Tu réponds en français."},
            {"role": "user", "content": "Bonjour ?"},
        ],
        "temperature": 0.2,
        "stream": False,
        "response_format": {"type": "json_object"},
        "chat_template_kwargs": {"enable_thinking": False},
    }


def test_openai_streams_sse(srv: ScriptedServer) -> None:
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        {"choices": [{"index": 0, "delta": {"content": "Le forfait "}}]},
        {"choices": [{"index": 0, "delta": {"content": "est de CHF 3 840 HT."}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    srv.route("POST", "/v1/chat/completions", lambda req: sse(chunks))
    client = OpenAIChat(srv.url, "qwen")
    assert "".join(client.stream(MESSAGES, temperature=0.2)) == "Le forfait est de CHF 3 840 HT."
    (req,) = srv.requests_to("/v1/chat/completions")
    assert req.json["stream"] is True and req.headers["accept"] == "text/event-stream"
    srv.route("POST", "/v1/chat/completions", (500, {"error": {"message": "CUDA out of memory"}}))
    with pytest.raises(LlmError, match="HTTP 500: CUDA out of memory"):
        list(client.stream(MESSAGES, temperature=0.2))
    srv.route("POST", "/v1/chat/completions", lambda req: sse([{"error": "boom"}], done=False))
    with pytest.raises(LlmError, match="boom"):
        list(client.stream(MESSAGES, temperature=0.2))
    client.close()


def test_openai_failures_raise_llm_error(srv: ScriptedServer) -> None:
    client = OpenAIChat(srv.url, "qwen")
    srv.route("POST", "/v1/chat/completions", (401, {"error": {"message": "invalid api key"}}))
    with pytest.raises(LlmError, match="HTTP 401: invalid api key"):
        client.chat(MESSAGES, temperature=0.2)
    srv.route("POST", "/v1/chat/completions", (200, {"choices": []}))
    with pytest.raises(LlmError, match="without choices"):
        client.chat(MESSAGES, temperature=0.2)
    client.close()


def test_make_chat_client_kinds(srv: ScriptedServer) -> None:
    assert make_chat_client(LlmConfig()) is None
    ollama = make_chat_client(LlmConfig(kind="ollama", url=srv.url))
    openai = make_chat_client(LlmConfig(kind="openai", url=srv.url, model="qwen"))
    assert isinstance(ollama, OllamaChat) and ollama.model == "qwen2.5:14b"
    assert isinstance(openai, OpenAIChat) and isinstance(openai, ChatClient)
    for c in (ollama, openai):
        c.close()


# ----------------------------------------------------------------------------- judge


def _judge(srv: ScriptedServer, **cfg: object) -> Judge:
    return Judge.from_config(JudgeConfig(url=srv.url, **cfg))  # type: ignore[arg-type]


JUDGE_SHAPES = [
    # (content, thinking, ancree, unsourced)
    ('{"ancree": true, "affirmations_non_sourcees": []}', None, True, ()),
    (
        ('<think>Le montant {"ancree": true} semble…</think>\n{"ancree": false, '
         '"affirmations_non_sourcees": ["CHF 3 000 HT"]}'),
        None,
        False,
        ("CHF 3 000 HT",),
    ),
    ('Voici mon verdict :\n```json\n{"ancree": false, "affirmations_non_sourcees": ["pfSense"]}\n```', None, False, ("pfSense",)),
    ("", 'Je vérifie... {"ancree": true, "affirmations_non_sourcees": []}', True, ()),
    ('{"ancree": true, "affirmations_non_sourcees": ["OPNsense"]}', None, False, ("OPNsense",)),
]


@pytest.mark.parametrize(("content", "thinking", "ancree", "unsourced"), JUDGE_SHAPES)
def test_judge_output_shapes(
    srv: ScriptedServer, content: str, thinking: str | None, ancree: bool, unsourced: tuple[str, ...]
) -> None:
    srv.route("POST", "/api/chat", _ollama_answer(content, thinking))
    judge = _judge(srv)
    v = ground("Forfait Rochat ?", CASE1, _ctx(), judge)
    judge.close()
    assert v.ancree is ancree and v.verification == "effectuee" and v.unsourced == unsourced
    assert v.controls == (() if ancree else (CONTROL_JUDGE,))
    assert v.cited == (ROCHAT,)


def test_judge_request_body(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/chat", _ollama_answer('{"ancree": true, "affirmations_non_sourcees": []}'))
    judge = _judge(srv)
    ground("Quel est le forfait de l'étude Rochat ?", CASE1, _ctx(), judge)
    judge.close()
    (req,) = srv.requests_to("/api/chat")
    body = req.json
    assert body["model"] == "qwen3:4b" and body["format"] == "json" and body["think"] is False
    assert body["options"]["temperature"] == 0 and body["keep_alive"] == "2h" and body["stream"] is False
    system, user = body["messages"]
    assert system["role"] == "system" and "Baumont" in system["content"] and "Rochat" in system["content"]
    assert f"[{ROCHAT}]\nLe périmètre couvre 20 postes" in user["content"]
    assert "Quel est le forfait de l'étude Rochat ?" in user["content"] and CASE1 in user["content"]


@pytest.mark.parametrize(
    "answer",
    [
        _ollama_answer("Je ne peux pas juger."),
        _ollama_answer('{"ancree": "true", "affirmations_non_sourcees": []}'),
        _ollama_answer('{"verdict": "ok"}'),
        _ollama_answer(""),
        (500, {"error": "model requires more system memory"}),
        DISCONNECT,
    ],
    ids=["garbage", "string-bool", "wrong-keys", "empty", "http-500", "disconnect"],
)
def test_unusable_judge_means_non_effectuee(srv: ScriptedServer, answer: object) -> None:
    srv.route("POST", "/api/chat", answer)
    judge = _judge(srv)
    v = ground("Forfait Rochat ?", CASE1, _ctx(), judge)
    judge.close()
    assert v.ancree is None and v.verification == "non_effectuee" and v.controls == ()
    assert len(srv.requests_to("/api/chat")) == 1


def test_judge_timeout_means_non_effectuee(srv: ScriptedServer) -> None:
    release = threading.Event()

    def slow(req: Request) -> tuple[int, dict]:
        release.wait(10)
        return _ollama_answer('{"ancree": true, "affirmations_non_sourcees": []}')

    srv.route("POST", "/api/chat", slow)
    judge = _judge(srv, timeout_s=0.2)
    try:
        v = ground("Forfait Rochat ?", CASE1, _ctx(), judge)
    finally:
        release.set()
        judge.close()
    assert v.ancree is None and v.verification == "non_effectuee"


def test_judge_is_not_called_when_a_deterministic_control_decides(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/chat", _ollama_answer('{"ancree": true, "affirmations_non_sourcees": []}'))
    judge = _judge(srv)
    invented = ground("Fais pareil pour l'étude Rochat", CASE2, _ctx(), judge)
    refusal = ground("Capitale de l'Australie ?", REFUSAL, _ctx(), judge)
    judge.close()
    # control 3, and control 5 on the sentences that cite only the invented file
    assert invented.ancree is False and invented.controls == (CONTROL_INVENTED, CONTROL_FACT)
    assert invented.invented == ("22_Contrat_Maintenance_Étude_Rochat.docx",)
    assert refusal.ancree is True and refusal.controls == (CONTROL_REFUSAL,)
    assert srv.requests_to("/api/chat") == []


def test_parse_verdict_prefers_content_then_last_verdict_of_thinking() -> None:
    assert parse_verdict('{"ancree": false}').ancree is False  # type: ignore[union-attr]
    v = parse_verdict("", '{"ancree": true} puis, tout bien pesé, {"ancree": false, "affirmations_non_sourcees": ["x"]}')
    assert v is not None and v.ancree is False and v.affirmations_non_sourcees == ("x",)
    assert parse_verdict("réponse</think>{\"ancree\": true}") is not None
    assert parse_verdict("{ pas json") is None and parse_verdict("", "") is None


# ----------------------------------------------------------------------------- pieces together


def _two_models(answer: str, verdict: str):
    """One Ollama serving the answering model and the judge, told apart by the requested model."""

    def handler(req: Request) -> tuple[int, dict]:
        return _ollama_answer(verdict if req.json["model"] == "qwen3:4b" else answer)

    return handler


def test_seed_case1_grounded_then_enriched(srv: ScriptedServer) -> None:
    srv.route("POST", "/api/chat", _two_models(CASE1, '{"ancree": true, "affirmations_non_sourcees": []}'))
    ctx = _ctx()
    llm = make_chat_client(LlmConfig(kind="ollama", url=srv.url))
    assert llm is not None
    raw = llm.chat(build_messages("Quel est le forfait mensuel de l'étude Rochat ?", ctx), temperature=0.2).content
    judge = Judge.from_config(JudgeConfig(), LlmConfig(kind="ollama", url=srv.url))
    verdict = ground("Quel est le forfait mensuel de l'étude Rochat ?", raw, ctx, judge)
    shown = enrich_citations(raw, ctx.sources)
    llm.close()
    judge.close()
    assert verdict.ancree is True and verdict.verification == "effectuee" and verdict.controls == ()
    # the judge saw the raw citations, the user sees the enriched ones
    judged = [r for r in srv.requests_to("/api/chat") if r.json["model"] == "qwen3:4b"]
    assert f"[{ROCHAT}]." in judged[0].json["messages"][1]["content"]
    assert shown.count(f"[{ROCHAT} : `{LOC}`]") == 2
    assert not srv.errors


# ----------------------------------------------------------------------------- the documented fakes


def test_ollama_client_reads_what_ollama_documents(srv: ScriptedServer) -> None:
    from support.model_servers import FakeOllama, Model, chatml, tokens

    FakeOllama(srv, {"qwen3:4b": Model("Bonjour.", 40960, "qwen3", thinking="je salue")})
    client = OllamaChat(srv.url, "qwen3:4b", num_ctx=8192, max_tokens=64)
    info = client.info()
    assert info.present is True and info.context_length == 40960  # model_info["qwen3.context_length"]
    assert client.models() == ("qwen3:4b",)
    res = client.chat(MESSAGES, temperature=0.2)
    wire = [{"role": m.role, "content": m.content} for m in MESSAGES]
    assert res.content == "Bonjour." and res.thinking == "je salue" and res.done_reason == "stop"
    assert res.prompt_tokens == len(tokens(chatml(wire)))
    stream = client.stream(MESSAGES, temperature=0.2)
    assert "".join(stream) == "Bonjour." and stream.done_reason == "stop" and stream.prompt_tokens == res.prompt_tokens
    assert client.preload() is True and srv.requests_to("/api/chat")[-1].json["messages"] == []
    missing = OllamaChat(srv.url, "qwen2.5:14b")
    assert missing.info().present is False
    with pytest.raises(ModelNotFoundError):
        missing.chat(MESSAGES, temperature=0.2)
    for c in (client, missing):
        c.close()


def test_openai_client_reads_what_vllm_documents(srv: ScriptedServer) -> None:
    from support.model_servers import FakeVllm, Model

    FakeVllm(srv, {"Qwen/Qwen3-4B": Model("Bonjour.", 32768, "qwen3", thinking="je salue")})
    client = OpenAIChat(f"{srv.url}/v1", "Qwen/Qwen3-4B", max_tokens=64)
    assert client.info().context_length == 32768 and client.models() == ("Qwen/Qwen3-4B",)
    counted = client.count_tokens(MESSAGES)
    res = client.chat(MESSAGES, temperature=0.2)
    assert res.content == "Bonjour." and res.thinking == "je salue"  # "reasoning" (vLLM docs, "Reasoning Outputs")
    assert res.done_reason == "stop" and res.prompt_tokens == counted
    stream = client.stream(MESSAGES, temperature=0.2)
    assert "".join(stream) == "Bonjour." and stream.done_reason == "stop" and stream.prompt_tokens == counted
    assert srv.requests_to("/v1/chat/completions")[-1].json["stream_options"] == {"include_usage": True}
    assert not client.server_is_ollama() and client.preload() is False
    missing = OpenAIChat(srv.url, "Qwen/Qwen2.5-14B-Instruct")
    assert missing.info().present is False
    with pytest.raises(ModelNotFoundError, match="vllm serve"):
        missing.chat(MESSAGES, temperature=0.2)
    for c in (client, missing):
        c.close()
