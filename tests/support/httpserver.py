"""A small *real* HTTP server for tests, scripted route by route.

Built on the standard library's :class:`http.server.ThreadingHTTPServer`, bound to ``127.0.0.1`` on
an ephemeral port and served from a background thread. Clients under test talk real HTTP/1.1 to it
(keep-alive, ``Content-Length`` or chunked bodies), so timeouts, retries, status codes and streaming
are exercised for real — no mocks.

Usage::

    from support.httpserver import ScriptedServer, Response, Stream, ndjson, sse, sequence

    def embed(req):                          # req: Request (method, path, headers, json, ...)
        return 200, {"embeddings": [[1.0, 0.0] for _ in req.json["input"]]}

    with ScriptedServer() as srv:            # started on enter, stopped on exit
        srv.route("POST", "/api/embed", embed)
        client_under_test(srv.url)           # "http://127.0.0.1:<port>"
        assert srv.requests[0].json["model"] == "nomic-embed-text"
        assert srv.requests[0].headers["authorization"] == "Bearer k"   # header keys lower-cased

What a handler may return (a route can also be given one of these values directly instead of a
callable, to answer the same thing every time):

- ``(status, obj)`` or ``(status, obj, headers)``: ``obj`` is sent as JSON
  (``Content-Type: application/json``); ``obj`` may also be ``bytes``/``str``, sent as is
  (``application/octet-stream`` / ``text/plain``) unless ``headers`` sets ``Content-Type``.
- :class:`Response`: full control of status, body bytes and headers.
- :class:`Stream`, or any iterator/generator of ``bytes`` (then status 200,
  ``application/octet-stream``): sent with ``Transfer-Encoding: chunked``, **one HTTP chunk per
  item, flushed at once**, so a client sees each piece as soon as it is yielded (Ollama's NDJSON
  ``/api/chat`` stream, OpenAI's SSE ``/v1/chat/completions`` stream). :func:`ndjson` and
  :func:`sse` build the usual streams from dicts. ``Stream(..., truncated=True)`` drops the
  connection instead of ending the body properly (a server dying mid-stream).
- :data:`DISCONNECT`: close the connection without any answer (the client sees a protocol error,
  as with a server that crashed).

:func:`sequence` scripts successive answers (``sequence((503, {...}), (503, {...}), ok_handler)``:
two 503s, then ``ok_handler`` for every later request).

Unrouted requests get ``404 {"error": "no route for METHOD /path"}``. A handler that raises gets a
``500 {"error": "ScriptedServer handler raised ..."}`` answer and the exception is kept in
:attr:`ScriptedServer.errors`, so a test can ``assert not srv.errors``.

Every request is recorded, before its handler runs, in :attr:`ScriptedServer.requests`
(:class:`Request`: method, path, query, lower-cased headers, raw body, parsed JSON or ``None``).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Request:
    """One request as the server received it. ``headers`` keys are lower-cased; ``json`` is the
    parsed body when it is valid JSON, else ``None``; ``query`` is ``parse_qs`` of the query
    string; ``path`` excludes it."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    body: bytes
    json: Any


@dataclass(frozen=True)
class Response:
    """A complete (non-streamed) answer: ``body`` sent with ``Content-Length``."""

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Stream:
    """A streamed answer: each item of ``chunks`` is written as one HTTP chunk and flushed.
    Empty items are skipped (an empty chunk would end the body). ``truncated=True`` closes the
    connection after the last item without the terminating chunk."""

    chunks: Iterable[bytes]
    status: int = 200
    content_type: str = "application/octet-stream"
    headers: Mapping[str, str] = field(default_factory=dict)
    truncated: bool = False


class _Disconnect:
    def __repr__(self) -> str:
        return "DISCONNECT"


DISCONNECT = _Disconnect()
"""Handler return value: close the connection without answering."""

Handler = Callable[[Request], Any]


def ndjson(objs: Iterable[Any]) -> Stream:
    """A ``application/x-ndjson`` stream, one JSON document per line and per chunk (Ollama's
    streaming format). ``objs`` may be a generator (it is consumed while sending)."""
    return Stream((json.dumps(o).encode() + b"\n" for o in objs), content_type="application/x-ndjson")


def sse(objs: Iterable[Any], done: bool = True) -> Stream:
    """A ``text/event-stream`` stream: ``data: <json>\\n\\n`` per object (str objects are sent
    verbatim after ``data: ``), then ``data: [DONE]\\n\\n`` when ``done`` (OpenAI's format)."""

    def gen() -> Iterator[bytes]:
        for o in objs:
            payload = o if isinstance(o, str) else json.dumps(o)
            yield f"data: {payload}\n\n".encode()
        if done:
            yield b"data: [DONE]\n\n"

    return Stream(gen(), content_type="text/event-stream")


def sequence(*answers: Any) -> Handler:
    """A handler giving ``answers`` in turn, one per request; the last one answers every later
    request. Each answer is a handler (called with the request) or a fixed return value."""
    if not answers:
        raise ValueError("sequence() needs at least one answer")
    lock = threading.Lock()
    state = {"i": 0}

    def handler(req: Request) -> Any:
        with lock:
            i = min(state["i"], len(answers) - 1)
            state["i"] += 1
        a = answers[i]
        return a(req) if callable(a) else a

    return handler


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # streamed chunks leave at once (no Nagle/delayed-ACK stall)
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()  # CRLF after the chunk
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _handle(self) -> None:
        scripted = self.server.scripted
        split = urlsplit(self.path)
        body = self._read_body()
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        req = Request(
            method=self.command,
            path=split.path,
            query=parse_qs(split.query),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            json=parsed,
        )
        scripted._record(req)
        with scripted._lock:
            handler = scripted._routes.get((self.command, split.path))
        self._headers_sent = False
        if handler is None:
            self._send((404, {"error": f"no route for {req.method} {req.path}"}))
            return
        try:
            answer = handler(req) if callable(handler) else handler
            self._send(answer)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - a bug in the test's handler: answer 500 and keep it for the test
            with scripted._lock:
                scripted._errors.append(e)
            self.close_connection = True
            if self._headers_sent:  # failed mid-stream: the body can only be cut short
                return
            with contextlib.suppress(OSError):
                self._send((500, {"error": f"ScriptedServer handler raised {e!r}"}))

    def _send(self, answer: Any) -> None:
        if answer is DISCONNECT:
            self.close_connection = True
            return
        if isinstance(answer, tuple):
            status, obj, *rest = answer
            headers = dict(rest[0]) if rest else {}
            if isinstance(obj, bytes):
                body, ctype = obj, "application/octet-stream"
            elif isinstance(obj, str):
                body, ctype = obj.encode(), "text/plain; charset=utf-8"
            else:
                body, ctype = json.dumps(obj).encode(), "application/json"
            if not any(k.lower() == "content-type" for k in headers):
                headers["Content-Type"] = ctype
            answer = Response(status, body, headers)
        elif isinstance(answer, Iterator):
            answer = Stream(answer)
        if isinstance(answer, Response):
            self._headers_sent = True
            self.send_response(answer.status)
            for k, v in answer.headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)
            self.wfile.flush()
        elif isinstance(answer, Stream):
            self._headers_sent = True
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            for k, v in answer.headers.items():
                self.send_header(k, v)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            for chunk in answer.chunks:
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
            if answer.truncated:
                self.close_connection = True
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        else:
            raise TypeError(f"unsupported handler answer: {answer!r}")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    scripted: ScriptedServer


class ScriptedServer:
    """A real HTTP/1.1 server on ``127.0.0.1:<ephemeral port>`` answering from scripted routes.

    Use as a context manager (or call :meth:`start` / :meth:`stop`). Routes may be added or
    replaced at any time, also while it runs. Thread-safe: requests are served concurrently.
    """

    def __init__(self) -> None:
        self._routes: dict[tuple[str, str], Any] = {}
        self._requests: list[Request] = []
        self._errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        """Bind and serve in a daemon thread. Returns ``self``."""
        if self._httpd is not None:
            return self
        self._httpd = _Server(("127.0.0.1", 0), _RequestHandler)
        self._httpd.scripted = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="ScriptedServer",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket (the port then refuses connections)."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()
        self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting -----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (server must be started)."""
        if self._httpd is None:
            raise RuntimeError("ScriptedServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, no trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    def route(self, method: str, path: str, handler: Handler | Any) -> ScriptedServer:
        """Answer ``method path`` (exact path, query string ignored) with ``handler(request)``, or
        with ``handler`` itself when it is not callable (a fixed answer). Replaces an earlier route
        for the same method and path. Returns ``self`` for chaining."""
        with self._lock:
            self._routes[(method.upper(), path)] = handler
        return self

    # -- inspection ----------------------------------------------------------------------------

    def _record(self, req: Request) -> None:
        with self._lock:
            self._requests.append(req)

    @property
    def requests(self) -> list[Request]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str, method: str | None = None) -> list[Request]:
        """The recorded requests for ``path`` (and ``method`` when given)."""
        m = method.upper() if method else None
        return [r for r in self.requests if r.path == path and (m is None or r.method == m)]

    def clear(self) -> None:
        """Forget the recorded requests and handler errors (routes are kept)."""
        with self._lock:
            self._requests.clear()
            self._errors.clear()

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by handlers (each was answered with HTTP 500)."""
        with self._lock:
            return list(self._errors)


__all__ = [
    "DISCONNECT",
    "Handler",
    "Request",
    "Response",
    "ScriptedServer",
    "Stream",
    "ndjson",
    "sequence",
    "sse",
]
