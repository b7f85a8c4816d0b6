"""The query core as a library: a third-party FastAPI service written here imports
``from ancre.query import QueryCore``, opens it on the bundled Axonix corpus synced for the module
(e5-local, embedded store, extractive mode) and serves ``GET /ask`` and ``GET /search`` from its
typed results. Who sees what is checked against ``visibility.json`` (computed independently of
the ACL engine by :func:`support.corpus.readable_paths`): chloe may read CLIENTS except
``test-deny-explicite.docx``, alice may read it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient
from support.corpus import copy_corpus, readable_paths, write_config

from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.query import QueryCore, SearchResult
from ancre.query.answer import Answer
from ancre.query.prompt import REFUSAL

Q = "Quel est le code d'accès de la salle serveur de Baumont Industries ?"
DENIED_TO_CHLOE = "test-deny-explicite.docx"
CODE = "4471-ZETA"


def third_party_app(core: QueryCore) -> FastAPI:
    """What another team's service on the same VM would write: nothing of ancre but QueryCore."""
    app = FastAPI()

    @app.get("/ask")
    def ask(q: str, user: str) -> dict[str, Any]:
        answer: Answer = core.ask(q, user, asked_by=f"intranet:{user}")
        return dataclasses.asdict(answer)

    @app.get("/search")
    def search(q: str, user: str) -> dict[str, Any]:
        result: SearchResult = core.search(q, user, limit=20)
        return dataclasses.asdict(result)

    return app


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus synced once by ancre itself; its runtime closed (the store's lock released)."""
    cfg = write_config(copy_corpus(tmp_path_factory.mktemp("query-core")))
    with Runtime(load_settings(cfg)) as rt:
        for conn in rt.connectors():
            rep = rt.engine.run_pass(conn)
            assert rep.outcome == "ok" and rep.failed == 0, rep
    return cfg


@pytest.fixture(scope="module")
def client(config: Path) -> Iterator[TestClient]:
    with QueryCore.open(config) as core, TestClient(third_party_app(core)) as c:
        assert core.not_ready() is None
        yield c


def test_search_is_trimmed_to_each_users_rights(client: TestClient) -> None:
    seen = {}
    for user in ("alice", "chloe"):
        r = client.get("/search", params={"q": Q, "user": user})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["account"] == user and body["hits"], body
        readable = readable_paths(user)
        for hit in body["hits"]:
            assert (hit["source"], hit["path"]) in readable, (user, hit["path"])
            assert hit["text"] and hit["location"] and hit["score"] > 0
        seen[user] = {hit["filename"] for hit in body["hits"]}
    assert DENIED_TO_CHLOE in seen["alice"]
    assert DENIED_TO_CHLOE not in seen["chloe"]


def test_ask_answers_alice_from_a_document_chloe_may_not_read_and_never_shows_it_to_chloe(client: TestClient) -> None:
    alice = client.get("/ask", params={"q": Q, "user": "alice"}).json()
    assert CODE in alice["reponse"] and alice["ancree"] is not False, alice
    assert DENIED_TO_CHLOE in {s["filename"] for s in alice["sources"]}
    assert ("partage", "CLIENTS/" + DENIED_TO_CHLOE) not in readable_paths("chloe")

    chloe = client.get("/ask", params={"q": Q, "user": "chloe"}).json()
    # the extractive gate counts words in what chloe may read only: the code's words are unknown to
    # her, so she gets what she may read of Baumont (or the refusal), never a hint of that note
    assert DENIED_TO_CHLOE not in {s["filename"] for s in chloe["sources"]}, chloe
    assert CODE not in str(chloe) and DENIED_TO_CHLOE not in str(chloe)


def test_an_unknown_user_gets_nothing(client: TestClient) -> None:
    body = client.get("/search", params={"q": Q, "user": "mallory"}).json()
    assert body == {"question": Q, "user": "mallory", "account": None, "hits": [], "unverified": []}
    answer = client.get("/ask", params={"q": Q, "user": "mallory"}).json()
    assert answer["reponse"] == REFUSAL and answer["sources"] == []
