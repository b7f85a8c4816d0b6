"""Many users at once: no question waits behind another's model call or query embedding. The
bundled corpus synced with e5-local, the answering model an Ollama ``/api/chat`` on 127.0.0.1 that
takes its time; questions asked from several threads through the query core are all in the model
at the same moment, and their query embeddings share engine calls."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from support.corpus import copy_corpus, write_config
from support.httpserver import Request, ScriptedServer

from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.query.prompt import REFUSAL

USERS = 6
QUESTION = "Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"


@pytest.fixture(scope="module")
def slow_model() -> Iterator[tuple[ScriptedServer, dict[str, int]]]:
    """A model that answers after 1.5 s, counting the requests in flight at once."""
    seen = {"now": 0, "max": 0}
    mu = threading.Lock()

    def answer(req: Request) -> tuple[int, dict]:
        with mu:
            seen["now"] += 1
            seen["max"] = max(seen["max"], seen["now"])
        time.sleep(1.5)
        with mu:
            seen["now"] -= 1
        msg = {"role": "assistant", "content": REFUSAL}
        return 200, {"model": req.json["model"], "message": msg, "done": True, "done_reason": "stop"}

    with ScriptedServer() as srv:
        srv.route("POST", "/api/chat", answer)
        yield srv, seen


@pytest.fixture(scope="module")
def rt(tmp_path_factory: pytest.TempPathFactory, slow_model) -> Iterator[Runtime]:
    srv, _ = slow_model
    root = copy_corpus(tmp_path_factory.mktemp("many"))
    runtime = Runtime(load_settings(write_config(root), llm={"kind": "ollama", "url": srv.url}, judge={"enabled": False}))
    for conn in runtime.connectors():
        assert runtime.engine.run_pass(conn).outcome == "ok"
    yield runtime
    runtime.close()


def test_questions_are_in_the_model_at_the_same_time(rt: Runtime, slow_model) -> None:
    srv, seen = slow_model
    core = rt.query_core
    answers: list[object] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(USERS)

    def ask() -> None:
        barrier.wait()
        try:
            answers.append(core.ask(QUESTION, "alice"))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=ask) for _ in range(USERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(answers) == USERS and len(srv.requests_to("/api/chat")) == USERS
    assert seen["max"] == USERS, "a question waited for another's model call"
