"""The control API's rule on who may do what (:mod:`ancre.api.control`): the caller's Unix identity
(peer credentials) decides whether it may choose the user to search or ask as; anything else may
only ask as itself, and never read the status nor request passes. The peer credentials are put in
the ASGI ``state`` as the control server does (:mod:`ancre.app.control`)."""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Mapping
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ancre.api.control import ControlParts, PeerCred, create_control_app, is_admin

NOBODY = pwd.getpwnam("nobody")


class RecordingQuery:
    """A query side that records who it was asked for (the rule is under test, not retrieval)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str | None]] = []

    def search(self, question: str, user: str, *, limit: int | None = None) -> Any:
        self.calls.append(("search", user, None))
        return {"question": question, "user": user, "hits": []}

    def ask(self, question: str, user: str, *, asked_by: str | None = None) -> Any:
        self.calls.append(("ask", user, asked_by))
        return {"reponse": "ok"}

    def stream(self, question: str, user: str, *, asked_by: str | None = None) -> Any:
        self.calls.append(("stream", user, asked_by))
        return iter(["Le forfait ", "est de CHF 3 840."])

    def probe_directory(self) -> None:
        self.calls.append(("directory", "", None))

    def principals(self, user: str) -> frozenset[str]:
        return frozenset()

    def account(self, user: str) -> str | None:
        return None

    def not_ready(self) -> str | None:
        return None

    def points(self) -> Mapping[str, int]:
        return {"documents": 0}


def _client(peer: PeerCred | None, query: RecordingQuery) -> TestClient:
    parts = ControlParts(
        query=query, index_status=lambda: {"counts": []}, store_points=lambda: 0,
        explain=lambda path, user, source, private: [f"user: {user}"], daemon=None, admin_group="ancre-test-no-such-group",
    )
    app = create_control_app(parts)

    async def with_peer(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if peer is not None:
            scope["state"] = {**scope.get("state", {}), "peer": peer}
        await app(scope, receive, send)

    return TestClient(with_peer)  # type: ignore[arg-type]


def test_root_and_the_service_user_are_admins_others_are_not() -> None:
    assert is_admin(PeerCred(1, 0, 0), "ancre-test-no-such-group")
    assert is_admin(PeerCred(1, os.getuid(), os.getgid()), "ancre-test-no-such-group")
    assert not is_admin(PeerCred(1, NOBODY.pw_uid, NOBODY.pw_gid), "ancre-test-no-such-group")


def test_an_admin_asks_as_anyone_and_the_audit_names_it() -> None:
    q = RecordingQuery()
    c = _client(PeerCred(1, 0, 0), q)
    assert c.post("/v1/ask", json={"question": "q", "user": "alice"}).status_code == 200
    assert c.post("/v1/search", json={"question": "q", "user": "bruno"}).status_code == 200
    assert c.get("/v1/status").status_code == 200
    assert q.calls == [("ask", "alice", "unix:root"), ("search", "bruno", None)]


@pytest.mark.skipif(os.getuid() == NOBODY.pw_uid, reason="runs as nobody")
def test_anyone_else_may_only_ask_as_itself() -> None:
    q = RecordingQuery()
    c = _client(PeerCred(1, NOBODY.pw_uid, NOBODY.pw_gid), q)
    r = c.post("/v1/ask", json={"question": "q", "user": "alice"})
    assert r.status_code == 403 and r.json()["type"] == "ControlPermissionError"
    assert "may only search and ask as itself" in r.json()["error"]
    assert c.post("/v1/search", json={"question": "q", "user": "alice"}).status_code == 403
    assert c.post("/v1/acl/explain", json={"path": "x", "user": "alice"}).status_code == 403
    assert c.get("/v1/status").status_code == 403
    assert c.post("/v1/sync", json={}).status_code == 403
    assert q.calls == []
    assert c.post("/v1/ask", json={"question": "q", "user": "nobody"}).status_code == 200
    assert q.calls == [("ask", "nobody", "unix:nobody")]


def test_the_services_own_process_gives_the_identity_it_received_others_cannot() -> None:
    """The RAG API of ancre-api.service (same user as the daemon) passes the e-mail Open WebUI
    forwarded; the audit then names it, as ``ancre serve`` does. From root or anyone else,
    ``asked_by`` is not taken: the audit names the Unix user who asked."""
    q = RecordingQuery()
    service = _client(PeerCred(1, os.getuid(), os.getgid()), q)
    assert service.post("/v1/ask", json={"question": "q", "user": "alice", "asked_by": "alice.martin@axonix.ch"}
                        ).status_code == 200
    r = service.post("/v1/ask/stream", json={"question": "q", "user": "alice", "asked_by": "alice.martin@axonix.ch"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    assert [json.loads(line) for line in r.text.splitlines()] == [{"text": "Le forfait "}, {"text": "est de CHF 3 840."}]
    assert service.get("/v1/directory").json() == {"ok": True}
    assert q.calls[:2] == [("ask", "alice", "alice.martin@axonix.ch"), ("stream", "alice", "alice.martin@axonix.ch")]
    if os.getuid() != NOBODY.pw_uid:
        q.calls.clear()
        other = _client(PeerCred(1, NOBODY.pw_uid, NOBODY.pw_gid), q)
        assert other.post("/v1/ask", json={"question": "q", "user": "nobody", "asked_by": "alice.martin@axonix.ch"}
                          ).status_code == 200
        assert q.calls == [("ask", "nobody", "unix:nobody")]


def test_without_peer_credentials_nothing_is_answered() -> None:
    q = RecordingQuery()
    r = _client(None, q).post("/v1/search", json={"question": "q", "user": "alice"})
    assert r.status_code == 403 and "Unix socket only" in r.json()["error"]
    assert q.calls == []


# ----------------------------------------------------------------------------- the HTTP API's limits


def _limited(query: RecordingQuery, **limits: Any) -> TestClient:
    from ancre.settings.api import ApiConfig

    parts = ControlParts(
        query=query, index_status=dict, store_points=lambda: 0,
        explain=lambda path, user, source, private: [], daemon=None, admin_group="ancre-test-no-such-group",
        limits=ApiConfig(**limits),
    )
    app = create_control_app(parts)

    async def with_peer(scope: dict[str, Any], receive: Any, send: Any) -> None:
        scope["state"] = {**scope.get("state", {}), "peer": PeerCred(1, 0, 0)}
        await app(scope, receive, send)

    return TestClient(with_peer)  # type: ignore[arg-type]


def test_the_socket_has_the_http_limits_question_length_body_size_and_text() -> None:
    """A 1 MB question through the socket stalled every question of the process: the socket
    refuses what HTTP refuses, with the same messages, before anything is asked."""
    q = RecordingQuery()
    c = _limited(q, max_question_chars=4000, max_body_bytes=64 * 1024)
    long = "mot " * 1001
    for path in ("/v1/ask", "/v1/search"):
        r = c.post(path, json={"question": long, "user": "alice"})
        assert r.status_code == 422, r.text
        assert r.json()["error"] == (f"question: the question is {len(long.strip())} characters long; "
                                     "the limit is 4000 (api.max_question_chars)")
    r = c.post("/v1/ask", json={"question": "x" * (70 * 1024), "user": "alice"})
    assert r.status_code == 413 and "api.max_body_bytes" in r.json()["error"]["message"]
    r = c.post("/v1/ask", content=b'{"question": "forfait \\ud800 ?", "user": "alice"}',
               headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["error"].startswith("question: "), r.text
    r = c.post("/v1/ask", json={"question": "   ", "user": "alice"})
    assert r.status_code == 422 and r.json()["error"] == "question: the question is empty"
    assert q.calls == []
    assert c.post("/v1/ask", json={"question": "forfait ?", "user": "alice"}).status_code == 200
    assert q.calls == [("ask", "alice", "unix:root")]


def test_a_client_that_never_sends_its_body_is_answered_408_on_the_socket() -> None:
    import asyncio

    from ancre.settings.api import ApiConfig

    parts = ControlParts(
        query=RecordingQuery(), index_status=dict, store_points=lambda: 0,
        explain=lambda path, user, source, private: [], daemon=None, admin_group="x",
        limits=ApiConfig(body_timeout_s=0.2),
    )
    app = create_control_app(parts)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)  # the body never comes
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/ask", "raw_path": b"/v1/ask", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"content-length", b"100")],
             "state": {"peer": PeerCred(1, 0, 0)}, "asgi": {"version": "3.0"}, "http_version": "1.1",
             "scheme": "http", "server": ("ancre", 80), "client": None, "root_path": ""}
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 20))  # without the limit: waits for ever
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 408


def test_the_exposure_report_is_for_admins() -> None:
    asked: list[tuple[list[str] | None, bool]] = []
    parts = ControlParts(
        query=RecordingQuery(), index_status=dict, store_points=lambda: 0, explain=lambda p, u, s, private: [],
        daemon=None, admin_group="ancre-test-no-such-group",
        exposure=lambda sources, explain: asked.append((sources, explain)) or {"exposed": 0},
    )
    app = create_control_app(parts)

    def client(peer: PeerCred) -> TestClient:
        async def with_peer(scope: dict[str, Any], receive: Any, send: Any) -> None:
            scope["state"] = {**scope.get("state", {}), "peer": peer}
            await app(scope, receive, send)

        return TestClient(with_peer)  # type: ignore[arg-type]

    r = client(PeerCred(1, 0, 0)).post("/v1/report/exposure", json={"sources": ["partage"], "explain": False})
    assert r.status_code == 200 and r.json() == {"exposed": 0} and asked == [(["partage"], False)]
    if os.getuid() != NOBODY.pw_uid:
        r = client(PeerCred(1, NOBODY.pw_uid, NOBODY.pw_gid)).post("/v1/report/exposure", json={})
        assert r.status_code == 403 and asked == [(["partage"], False)]
