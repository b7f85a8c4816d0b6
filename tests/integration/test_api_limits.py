"""The API under clients that hold connections open, against
a real uvicorn server on 127.0.0.1 started by the test (:class:`ancre.app.server.ApiServer`),
spoken to with raw sockets. No query core is needed: nothing here reaches one."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from ancre.api.app import create_app
from ancre.app.server import ApiServer
from ancre.config import load_settings

KEY = "limits-test-key"
SECRET_IN_URL = "s3cr3t-key-in-the-url"


@contextmanager
def api(**limits: Any) -> Iterator[ApiServer]:
    settings = load_settings(None, api={"api_key": KEY, **limits})
    server = ApiServer(create_app(object(), settings), limits=settings.api).start()
    try:
        yield server
    finally:
        server.stop()


def connect(server: ApiServer) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return s


def closed_within(s: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Read until the server closes the connection (``True``) or ``seconds`` pass (``False``);
    returns what was received."""
    s.settimeout(0.2)
    got = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            data = s.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return True, got
        if not data:
            return True, got
        got += data
    return False, got


def models_request(keep_alive: bool = True) -> bytes:
    conn = b"keep-alive" if keep_alive else b"close"
    return (b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + KEY.encode()
            + b"\r\nConnection: " + conn + b"\r\n\r\n")


def test_a_body_that_never_arrives_gets_408_and_the_connection_is_closed() -> None:
    with api(body_timeout_s=1.0) as server:
        s = connect(server)
        s.sendall(b"POST /query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\nAuthorization: Bearer " + KEY.encode() + b"\r\n\r\n{\"question\": ")
        t0 = time.monotonic()
        closed, got = closed_within(s, 10)
        s.close()
        assert closed and time.monotonic() - t0 < 5
        assert got.startswith(b"HTTP/1.1 408 ") and b"api.body_timeout_s" in got


def test_a_slow_trickle_of_body_is_cut_at_the_deadline() -> None:
    """The deadline covers the whole body, not each read: one byte a second never gets through."""
    with api(body_timeout_s=1.5) as server:
        s = connect(server)
        s.sendall(b"POST /query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 50\r\n\r\n")
        t0 = time.monotonic()
        got = b""
        for _ in range(8):
            try:
                s.sendall(b" ")
            except OSError:
                break
            closed, part = closed_within(s, 0.4)
            got += part
            if closed:
                break
        s.close()
        assert got.startswith(b"HTTP/1.1 408 ") and time.monotonic() - t0 < 5


def test_headers_that_never_arrive_and_idle_keep_alive_are_closed() -> None:
    with api(header_timeout_s=1.0, keep_alive_s=1) as server:
        silent = connect(server)  # connects and says nothing
        half = connect(server)
        half.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never ends its headers
        idle = connect(server)
        idle.sendall(models_request())
        t0 = time.monotonic()
        for s in (silent, half):
            closed, got = closed_within(s, 10)
            assert closed and got == b""
        closed, got = closed_within(idle, 10)  # answered, then closed once idle
        assert closed and got.startswith(b"HTTP/1.1 200 ")
        assert time.monotonic() - t0 < 6
        for s in (silent, half, idle):
            s.close()
        # the server still answers
        assert httpx.get(f"{server.url}/v1/models", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


def test_connections_are_bounded() -> None:
    with api(max_connections=3, header_timeout_s=30, body_timeout_s=30) as server:
        held = [connect(server) for _ in range(3)]
        for s in held:  # three requests whose bodies never come
            s.sendall(b"POST /query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n")
        time.sleep(0.3)
        extra = connect(server)
        extra.sendall(models_request())
        closed, got = closed_within(extra, 5)
        assert got.startswith(b"HTTP/1.1 503 ") and closed
        extra.close()
        for s in held:
            s.close()
        deadline = time.monotonic() + 5
        while True:  # once they are gone, requests are served again
            r = httpx.get(f"{server.url}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
            if r.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert r.status_code == 200


def test_the_access_log_never_shows_a_key_sent_in_the_url(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="uvicorn.access")
    with api() as server:
        h = {"Authorization": f"Bearer {KEY}"}
        assert httpx.get(f"{server.url}/v1/models?api_key={SECRET_IN_URL}", headers=h).status_code == 200
        assert httpx.get(f"{server.url}/v1/models?key={SECRET_IN_URL}").status_code == 401
        assert httpx.post(f"{server.url}/query?api_key={SECRET_IN_URL}", json={"question": "q"}).status_code == 401
        deadline = time.monotonic() + 5
        while len([r for r in caplog.records if r.name == "uvicorn.access"]) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    lines = [r.getMessage() for r in caplog.records if r.name == "uvicorn.access"]
    assert len(lines) == 3, lines
    assert all(SECRET_IN_URL not in line for line in lines), lines
    assert any('"GET /v1/models?[redacted] HTTP/1.1" 200' in line for line in lines), lines
    assert any('"POST /query?[redacted] HTTP/1.1" 401' in line for line in lines), lines
