"""Ops/debug HTTP endpoint of the daemon (stdlib :mod:`http.server`), off unless
``daemon.control_port`` is set, always bound to ``127.0.0.1``.

The embedded store has one owner, so while the daemon runs no other process can open it; this
endpoint lets an operator on the host (and the tests) look inside the running daemon:

- ``GET /status`` → the daemon status (the JSON also written to ``<data_dir>/daemon-status.json``);
- ``GET /search?q=…&as=…[&limit=10]`` → the permission-trimmed hybrid search of ``ancre search
  --json``, as user ``as`` (an unknown user gets nothing).

It answers as any user without authentication: keep it off in production, or on a host where
every local account may read everything indexed. The API (``ancre serve``) is the real front door.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

log = logging.getLogger("ancre.daemon.control")

StatusFn = Callable[[], dict[str, Any]]
SearchFn = Callable[[str, str, int], dict[str, Any]]


class ControlServer:
    """Serves ``/status`` and ``/search`` (see the module doc) on ``127.0.0.1:port`` (0: a free
    port) from a daemon thread. Raises ``OSError`` when the port can't be bound."""

    def __init__(self, port: int, status: StatusFn, search: SearchFn) -> None:
        handler = _make_handler(status, search)
        self._server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="control-http", daemon=True
        )

    def start(self) -> None:
        """Start serving."""
        self._thread.start()

    def close(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()


def _make_handler(status: StatusFn, search: SearchFn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "ancre-control"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            log.debug("control: " + format, *args)

        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - stdlib naming
            url = urlsplit(self.path)
            qs = parse_qs(url.query)
            try:
                if url.path == "/status":
                    self._send(200, status())
                elif url.path == "/search":
                    q, user = qs.get("q", [""])[0], qs.get("as", [""])[0]
                    if not q or not user:
                        self._send(400, {"error": "q and as are required"})
                        return
                    limit = max(1, min(int(qs.get("limit", ["10"])[0]), 1000))
                    self._send(200, search(q, user, limit))
                else:
                    self._send(404, {"error": "unknown path; try /status or /search?q=&as="})
            except ValueError as e:
                self._send(400, {"error": str(e)})
            except Exception as e:  # report, never kill the server thread
                log.exception("control endpoint failed")
                self._send(500, {"error": f"{type(e).__name__}: {e}"})

    return Handler


__all__ = ["ControlServer"]
