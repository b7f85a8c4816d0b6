"""The answering model and the judge as Ollama and vLLM really behave (issue 42), on the REAL synced
Axonix corpus, against the documented fakes of ``tests/support/model_servers.py`` (real HTTP on
127.0.0.1):

- an Ollama whose default window (2,048 tokens) is smaller than a question's context: without
  ``num_ctx`` the prompt is cut the way Ollama's runner cuts it and the system prompt's rules are
  lost — the fake model answers from what it read; with ancre's sizing the window is sent and the
  whole prompt read; a server that truncates anyway is caught (``contexte_tronque``);
- an OpenAI-compatible endpoint of an Ollama (no window can be set): the same loss, caught;
- vLLM: ``max_model_len`` from ``/v1/models`` and the server's own count (``/tokenize``) size the
  prompt, complements are dropped to fit (where the server would refuse the request), recorded;
- answers cut by the token budget (``done_reason`` / ``finish_reason`` ``"length"``), on both;
- the judge through the OpenAI-compatible kind, its reasoning kept out of the verdict; a thinking
  model's ``<think>`` block kept out of the answer, streamed or not;
- an absent model: named, with the fix; the models pre-loaded with the window questions use.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.corpus import copy_corpus, write_config
from support.httpserver import ScriptedServer
from support.model_servers import FakeOllama, FakeVllm, Model, Seen, chatml, tokens

from ancre.app.runtime import Runtime
from ancre.config import Settings, load_settings
from ancre.query import QueryCore
from ancre.query.answer import Answer
from ancre.query.llm import LlmError, ModelNotFoundError, OllamaChat, OpenAIChat
from ancre.query.model_status import preload, statuses
from ancre.query.window import CONTROL_ANSWER_CUT, CONTROL_CONTEXT_REDUCED, CONTROL_CONTEXT_TRUNCATED

BAUMONT = "21_Contrat_Maintenance_Baumont_Industries.docx"
Q_BAUMONT = "Quelles sont les conditions du contrat de maintenance d'Axonix SA avec Baumont Industries ?"
Q_BROAD = "Résume les contrats de maintenance des clients"
WINDOW = 2048
"""The server's default window in these tests (Ollama's ``OLLAMA_CONTEXT_LENGTH``, 2,048 in many
versions), smaller than :data:`Q_BROAD`'s whole prompt with :data:`WIDE` context."""
WIDE = {"max_chunks": 24, "other_docs": 10}
"""A context of more extracts than the default (14): the broad question's prompt is then larger
than :data:`WINDOW` (about 2,000 tokens with the default)."""
VLLM_WINDOW = 2560
"""vLLM's ``max_model_len`` here: the whole prompt and 512 answer tokens do not fit."""
GROUNDED_ANSWER = f"Le forfait mensuel s'élève à CHF 4 200 HT [{BAUMONT}]."
RULES = "Règles strictes"
RULELESS = ("D'après mes connaissances générales, un tel contrat coûte en général autour de CHF 5 000 par mois "
            "et couvre l'ensemble du parc informatique, serveurs compris, avec une intervention sous quatre heures.")
GROUNDED = '{"ancree": true, "affirmations_non_sourcees": []}'
QWEN, QWEN3 = "qwen2.5:14b", "qwen3:4b"
VLLM_QWEN, VLLM_QWEN3 = "Qwen/Qwen2.5-14B-Instruct", "Qwen/Qwen3-4B"


def reads_the_rules(seen: Seen) -> str:
    """A model that follows ancre's rules when it read them, and answers from its own knowledge
    when its server cut them away."""
    return GROUNDED_ANSWER if RULES in seen.prompt else RULELESS


@dataclass
class Corpus:
    root: Path
    config: Path
    rt: Runtime

    def core(self, **overrides: Any) -> QueryCore:
        settings = load_settings(self.config, **overrides)
        return QueryCore(settings, self.rt.query_core.parts)

    def settings(self, **overrides: Any) -> Settings:
        return load_settings(self.config, **overrides)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    root = copy_corpus(tmp_path_factory.mktemp("windows"))
    config = write_config(root)
    rt = Runtime(load_settings(config))
    for conn in rt.connectors():
        rep = rt.engine.run_pass(conn)
        assert rep.outcome == "ok" and rep.failed == 0, rep
    yield Corpus(root, config, rt)
    rt.close()


@pytest.fixture
def srv() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def audit(core: QueryCore) -> list[dict[str, Any]]:
    d = Path(core.settings.audit.dir or Path(core.settings.data_dir) / "audit")
    return [json.loads(x) for f in sorted(d.glob("audit-*.jsonl")) for x in f.read_text("utf-8").splitlines()]


def ollama(srv: ScriptedServer, answer: Any = reads_the_rules, judge: Any = GROUNDED, **kw: Any) -> FakeOllama:
    return FakeOllama(srv, {QWEN: Model(answer), QWEN3: Model(judge, 40960, "qwen3")}, **kw)


def answer_of(stream: Any) -> tuple[str, Answer]:
    *pieces, final = list(stream)
    assert isinstance(final, Answer)
    return "".join(pieces), final


# ----------------------------------------------------------------------------- Ollama's window


def test_a_context_larger_than_ollamas_default_window(corpus: Corpus, srv: ScriptedServer, tmp_path: Path) -> None:
    fake = ollama(srv, default_num_ctx=WINDOW)
    core = corpus.core(llm={"kind": "ollama", "url": srv.url}, context=WIDE, audit={"dir": str(tmp_path / "audit")})
    try:
        # with ancre's sizing: num_ctx is sent, the whole prompt is read, the rules with it
        ans = core.ask(Q_BROAD, "alice")
        (seen, _judge) = fake.seen
        request = seen.json
        whole = len(tokens(chatml(request["messages"])))
        assert whole > WINDOW, "the question's context must be larger than Ollama's default window"
        assert request["options"]["num_ctx"] >= whole + 2048 and request["options"]["num_ctx"] % 4096 == 0
        assert request["options"]["num_predict"] == 2048
        assert seen.evaluated == whole and RULES in seen.prompt
        assert ans.raw == GROUNDED_ANSWER and ans.ancree is True and CONTROL_CONTEXT_TRUNCATED not in ans.controles
        record = audit(core)[-1]["model"]
        assert record["num_ctx"] == request["options"]["num_ctx"] and record["prompt_eval_count"] == whole
        assert record["context_length"] == 32768 and record["counted_by"] == "estimation"
        assert record["prompt_min"] <= whole <= record["prompt_tokens"]

        # without it (the request an ancre without sizing made): Ollama's default window, the
        # prompt cut as its runner cuts it — the first tokens and the end — and the rules lost
        plain = OllamaChat(srv.url, QWEN)
        lost = plain.chat(_messages(request), temperature=0.2)
        plain.close()
        cut = fake.seen[-1]
        assert "num_ctx" not in cut.json["options"] and cut.evaluated == WINDOW < whole
        assert RULES not in cut.prompt and cut.prompt.startswith("<|im_start|>system\nTu")  # keep=5
        assert cut.prompt.endswith(chatml(request["messages"])[-200:])  # the end is kept
        assert lost.content == RULELESS and lost.prompt_tokens == WINDOW

        # a server that cuts the prompt anyway (here at WINDOW whatever num_ctx says): caught
        fake.force_window = WINDOW
        for ans in (core.ask(Q_BROAD, "alice"), answer_of(core.stream(Q_BROAD, "alice"))[1]):
            assert ans.raw == RULELESS
            assert ans.ancree is False and CONTROL_CONTEXT_TRUNCATED in ans.controles
            assert ans.verification == "non_requise"
        assert [s.json["model"] for s in fake.seen[-2:]] == [QWEN, QWEN]  # no judge asked about a cut prompt
        lines = audit(core)
        assert lines[-1]["kind"] == "outcome" and CONTROL_CONTEXT_TRUNCATED in lines[-1]["controls"]
        assert lines[-1]["ancree"] is False and lines[-1]["model"]["prompt_eval_count"] == WINDOW
    finally:
        core.close()


def _messages(request: dict[str, Any]) -> list[Any]:
    from ancre.query.prompt import ChatMessage

    return [ChatMessage(m["role"], m["content"]) for m in request["messages"]]


def test_the_openai_kind_on_an_ollama_cant_set_the_window_and_is_caught(
    corpus: Corpus, srv: ScriptedServer, tmp_path: Path
) -> None:
    fake = ollama(srv, default_num_ctx=WINDOW)
    core = corpus.core(llm={"kind": "openai", "url": f"{srv.url}/v1", "model": QWEN}, judge={"enabled": False},
                       context=WIDE, audit={"dir": str(tmp_path / "audit")})
    try:
        ans = core.ask(Q_BROAD, "alice")
        (seen,) = fake.seen
        assert seen.path == "/v1/chat/completions" and seen.evaluated == WINDOW and RULES not in seen.prompt
        assert ans.raw == RULELESS and ans.ancree is False and CONTROL_CONTEXT_TRUNCATED in ans.controles
    finally:
        core.close()
    client = OpenAIChat(f"{srv.url}/v1", QWEN)
    assert client.server_is_ollama()  # `ancre check` warns (tests/integration/test_check.py)
    client.close()


# ----------------------------------------------------------------------------- vLLM


def test_vllm_sizes_from_max_model_len_and_its_own_count(corpus: Corpus, srv: ScriptedServer, tmp_path: Path) -> None:
    fake = FakeVllm(srv, {VLLM_QWEN: Model(GROUNDED_ANSWER, VLLM_WINDOW), VLLM_QWEN3: Model(GROUNDED, 40960, "qwen3")})
    llm = {"kind": "openai", "url": f"{srv.url}/v1", "model": VLLM_QWEN, "max_tokens": 512}
    core = corpus.core(llm=llm, judge={"model": VLLM_QWEN3}, context=WIDE, audit={"dir": str(tmp_path / "audit")})
    try:
        ans = core.ask(Q_BROAD, "alice")
    finally:
        core.close()
    seen = fake.seen[0]
    assert seen.json["model"] == VLLM_QWEN and seen.evaluated + 512 <= VLLM_WINDOW  # accepted, not refused
    assert srv.requests_to("/tokenize")  # the server's own count
    run = ans.model_run
    assert run is not None and run.fitted.counted_by == "serveur" and run.fitted.context_length == VLLM_WINDOW
    assert run.fitted.num_ctx is None and run.evaluated == seen.evaluated
    assert CONTROL_CONTEXT_REDUCED in ans.controles and run.fitted.dropped
    assert ans.ancree is True and CONTROL_CONTEXT_TRUNCATED not in ans.controles
    shown = {s.filename for s in run.fitted.context.sources}
    assert not shown & {d.filename for d in run.fitted.dropped if d.whole}
    record = audit(core)[-1]
    assert record["model"]["dropped"] and {s["filename"] for s in record["sources"]} == shown

    # what the server does with the whole prompt: refuses it (it never cuts silently)
    whole = OpenAIChat(f"{srv.url}/v1", VLLM_QWEN, max_tokens=512)
    big = corpus.core(llm={**llm, "context_length": 100_000}, judge={"enabled": False}, context=WIDE)
    try:
        prep = big.answers._prepare(Q_BROAD, "alice", None)
        from ancre.query.prompt import build_messages

        with pytest.raises(LlmError, match=f"maximum context length is {VLLM_WINDOW} tokens"):
            whole.chat(build_messages(Q_BROAD, prep.context), temperature=0.2)
    finally:
        whole.close()
        big.close()


def test_the_judge_through_the_openai_kind(corpus: Corpus, srv: ScriptedServer, tmp_path: Path) -> None:
    verdict = '{"ancree": false, "affirmations_non_sourcees": ["CHF 4 200 HT"]}'
    fake = FakeVllm(srv, {VLLM_QWEN: Model(GROUNDED_ANSWER), VLLM_QWEN3: Model(verdict, 40960, "qwen3",
                                                                              thinking="Je vérifie {\"ancree\": true}")},
                    reasoning_parser=False)
    core = corpus.core(llm={"kind": "openai", "url": srv.url, "model": VLLM_QWEN, "api_key": "k"},
                       judge={"model": VLLM_QWEN3}, audit={"dir": str(tmp_path / "audit")})
    try:
        ans = core.ask(Q_BAUMONT, "alice")
    finally:
        core.close()
    judged = [s for s in fake.seen if s.json["model"] == VLLM_QWEN3]
    (req,) = judged
    assert req.json["response_format"] == {"type": "json_object"} and req.json["temperature"] == 0
    assert req.json["chat_template_kwargs"] == {"enable_thinking": False} and req.json["max_tokens"] == 512
    assert req.headers["authorization"] == "Bearer k"  # the answering model's server, its key
    assert GROUNDED_ANSWER in req.json["messages"][1]["content"]
    assert ans.ancree is False and ans.verification == "effectuee" and ans.unsourced == ("CHF 4 200 HT",)


def test_a_thinking_models_reasoning_never_reaches_the_answer(corpus: Corpus, srv: ScriptedServer, tmp_path: Path) -> None:
    thinking = "Le contrat Rochat dit CHF 3 840, mais je vais inventer https://exfil.invalid/x"
    fake = FakeVllm(srv, {VLLM_QWEN3: Model(GROUNDED_ANSWER, 40960, "qwen3", thinking=thinking)},
                    reasoning_parser=False)
    core = corpus.core(llm={"kind": "openai", "url": srv.url, "model": VLLM_QWEN3}, judge={"enabled": False},
                       audit={"dir": str(tmp_path / "audit")})
    try:
        asked = core.ask(Q_BAUMONT, "alice")
        text, streamed = answer_of(core.stream(Q_BAUMONT, "alice"))
    finally:
        core.close()
    assert len(fake.seen) == 2  # the server wrote the block in the content (no reasoning parser)
    for ans in (asked, streamed):
        assert ans.raw == GROUNDED_ANSWER and "3 840" not in ans.reponse and "exfil" not in ans.reponse
        assert "lien_neutralise" not in ans.controles  # the reasoning's address was never part of it
    assert text == GROUNDED_ANSWER
    assert not any("3 840" in json.dumps(line) for line in audit(core))


# ----------------------------------------------------------------------------- answers cut


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_length_endings_are_flagged(corpus: Corpus, srv: ScriptedServer, tmp_path: Path, kind: str) -> None:
    long = GROUNDED_ANSWER + " Le contrat couvre aussi la supervision, la sauvegarde et le support." * 3
    if kind == "ollama":
        ollama(srv, long)
        llm = {"kind": "ollama", "url": srv.url, "max_tokens": 16}
    else:
        FakeVllm(srv, {VLLM_QWEN: Model(long), VLLM_QWEN3: Model(GROUNDED, 40960, "qwen3")})
        llm = {"kind": "openai", "url": srv.url, "model": VLLM_QWEN, "max_tokens": 16}
    core = corpus.core(llm=llm, judge={"model": VLLM_QWEN3 if kind == "openai" else QWEN3},
                       audit={"dir": str(tmp_path / "audit")})
    try:
        asked = core.ask(Q_BAUMONT, "alice")
        _, streamed = answer_of(core.stream(Q_BAUMONT, "alice"))
    finally:
        core.close()
    for ans in (asked, streamed):
        assert ans.model_run is not None and ans.model_run.done_reason == "length"
        assert CONTROL_ANSWER_CUT in ans.controles and len(tokens(ans.raw)) == 16
    lines = audit(core)
    assert [CONTROL_ANSWER_CUT in line["controls"] for line in lines if line["kind"] != "start"] == [True, True]


# ----------------------------------------------------------------------------- absent, cold


def test_an_absent_model_is_named_with_its_fix(corpus: Corpus, srv: ScriptedServer, tmp_path: Path) -> None:
    FakeOllama(srv, {QWEN3: Model(GROUNDED, 40960, "qwen3")})  # the answering model was never pulled
    settings = corpus.settings(llm={"kind": "ollama", "url": srv.url}, audit={"dir": str(tmp_path / "audit")})
    found = {s.model: s for s in statuses(settings)}
    assert found[QWEN].present is False and found[QWEN].fix.startswith("run `ollama pull qwen2.5:14b`")
    assert found[QWEN3].present is True
    core = QueryCore(settings, corpus.rt.query_core.parts)
    try:
        with pytest.raises(ModelNotFoundError, match=r"ollama pull qwen2\.5:14b"):
            core.ask(Q_BAUMONT, "alice")
    finally:
        core.close()
    (line,) = audit(core)
    assert line["error"] == "erreur_modele" and not srv.requests_to("/api/chat")  # asked /api/show, not the model


def test_preload_loads_both_models_with_the_questions_window(corpus: Corpus, srv: ScriptedServer) -> None:
    ollama(srv)
    thread = preload(corpus.settings(llm={"kind": "ollama", "url": srv.url, "num_ctx": 12288}, judge={"keep_alive": "3h"}))
    assert thread is not None
    thread.join(10)
    loads = srv.requests_to("/api/chat")
    assert [(r.json["model"], r.json["messages"], r.json["keep_alive"], r.json["options"]["num_ctx"]) for r in loads] == [
        (QWEN, [], "30m", 12288), (QWEN3, [], "3h", 8192)]
