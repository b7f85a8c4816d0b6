"""The control API's rule on who may do what (:mod:`ancre.api.control`): the caller's Unix identity
(peer credentials) decides whether it may choose the user to search or ask as; anything else may
only ask as itself, and never read the status nor request passes. The peer credentials are put in
the ASGI ``state`` as the control server does (:mod:`ancre.app.control`)."""

from __future__ import annotations

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
        explain=lambda path, user, source: [f"user: {user}"], daemon=None, admin_group="ancre-test-no-such-group",
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


def test_without_peer_credentials_nothing_is_answered() -> None:
    q = RecordingQuery()
    r = _client(None, q).post("/v1/search", json={"question": "q", "user": "alice"})
    assert r.status_code == 403 and "Unix socket only" in r.json()["error"]
    assert q.calls == []


def test_the_exposure_report_is_for_admins() -> None:
    asked: list[tuple[list[str] | None, bool]] = []
    parts = ControlParts(
        query=RecordingQuery(), index_status=lambda: {}, store_points=lambda: 0, explain=lambda p, u, s: [],
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
