"""Running the API: ``ancre api`` (the API alone) and ``ancre serve`` (the sync daemon and the
API in one process, sharing one :class:`~ancre.app.runtime.Runtime`). The API is given the
runtime's :class:`~ancre.query.core.QueryCore` and its readiness check, never the runtime.

The embedded store (qdrant-edge) can be opened by one process only:
with it, run ``ancre serve``, or ``ancre api`` while no daemon runs. With a Qdrant server
(``store.kind = "qdrant"``) the daemon and ``ancre api`` run apart; the API reloads the BM25
snapshot whenever the daemon publishes a new generation (:meth:`Bm25Manager.get`).

uvicorn runs in a thread (:class:`ApiServer`) so that the main thread owns the signals:
Both pre-load the answering model and the judge at start, in the background
(:func:`~ancre.query.model_status.preload`: Ollama is sent an empty request with ``keep_alive`` and
the window questions use), so that the first question does not pay their 30–90 s load.
SIGTERM/SIGINT stop the API (in-flight requests get ``timeout_graceful_shutdown`` seconds) and
the daemon (current item finished, state flushed) together, and the process exits 0; SIGHUP queues a full
resync of every source (``ancre serve``; ignored by ``ancre api``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from ancre.api.identity import Secrets, identity_mode
from ancre.config import Settings
from ancre.query.model_status import preload
from ancre.settings.api import ApiConfig

log = logging.getLogger("ancre.api")

GRACEFUL_S = 5.0
"""Seconds in-flight requests get to finish when the API stops."""
ACCESS_LOGGER = "uvicorn.access"
"""uvicorn's access log (``'<client> - "<METHOD> <path> HTTP/1.1" <status>'``)."""


class RedactQueryString(logging.Filter):
    """Drops the query string from uvicorn's access log lines: ``/v1/models?api_key=…`` is logged
    as ``/v1/models?[redacted]``. No route of the API reads a query string, and a client that puts
    its service key in the URL must not get it written to the journal."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (*args[:2], args[2].split("?", 1)[0] + "?[redacted]", *args[3:])
        return True


def redact_access_log() -> None:
    """Install :class:`RedactQueryString` on uvicorn's access logger (once)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, RedactQueryString) for f in logger.filters):
        logger.addFilter(RedactQueryString())


def h11_protocol(header_timeout_s: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, plus a deadline of ``header_timeout_s`` seconds for each request's
    line and headers, counted from the connection's opening or from the previous response.
    uvicorn has none: its keep-alive timer is cancelled by any byte received, so a client that
    connects and sends nothing, or half a header, would otherwise hold the connection forever.
    When the deadline passes the connection is closed."""

    class _H11WithHeaderTimeout(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _arm_head_timer(self) -> None:
            self._cancel_head_timer()
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self._head_timer = self.loop.call_later(header_timeout_s, self._head_timeout)

        def _head_timeout(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm_head_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # a whole request head arrived
                self._cancel_head_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm_head_timer()  # the next request's head (not when one is already in)

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

    return _H11WithHeaderTimeout


def serve_in_thread(
    config: uvicorn.Config, sock: socket.socket, *, name: str, timeout: float, what: str
) -> tuple[uvicorn.Server, threading.Thread]:
    """Serve ``config`` on the bound socket ``sock`` (TCP or Unix) from a daemon thread named
    ``name``, and wait until uvicorn has started (at most ``timeout`` seconds). Raises
    ``RuntimeError(what)`` (the socket closed) when it does not start in time or its thread dies."""
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(what)
        time.sleep(0.02)
    return server, thread


class ApiServer:
    """uvicorn serving ``app`` on ``host:port`` (0: a free port) from a daemon thread.

    :meth:`start` binds the socket itself (``OSError`` at once when the address is taken) and
    returns once uvicorn accepts connections; :attr:`port` is the bound port. ``limits`` gives
    the connection limits (``header_timeout_s``, ``keep_alive_s``, ``max_connections``; the body
    deadline is the app's, :func:`~ancre.api.app.create_app`); default: ``ApiConfig()``'s. The
    access log never shows query strings (:class:`RedactQueryString`)."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, limits: ApiConfig | None = None) -> None:
        self.app, self.host, self.requested_port = app, host, port
        self.limits = limits if limits is not None else ApiConfig()
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 30.0) -> ApiServer:
        """Bind, serve, wait until started (``RuntimeError`` if uvicorn gave up within
        ``timeout`` seconds). Returns ``self``."""
        family, _, _, _, addr = socket.getaddrinfo(self.host, self.requested_port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(addr)
        except OSError:
            sock.close()
            raise
        sock.set_inheritable(False)
        self.port = int(sock.getsockname()[1])
        redact_access_log()
        lim = self.limits
        config = uvicorn.Config(
            self.app, host=self.host, port=self.port, log_config=None, lifespan="off",
            timeout_graceful_shutdown=int(GRACEFUL_S), server_header=False,
            http=h11_protocol(lim.header_timeout_s), timeout_keep_alive=lim.keep_alive_s,
            # uvicorn answers 503 once len(connections) >= limit, the new connection included
            limit_concurrency=lim.max_connections + 1,
        )
        self._server, self._thread = serve_in_thread(
            config, sock, name="api", timeout=timeout, what=f"the API could not start on {self.host}:{self.port}"
        )
        return self

    @property
    def url(self) -> str:
        """``http://<host>:<port>`` (IPv6 hosts bracketed)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def alive(self) -> bool:
        """Whether the uvicorn thread still runs."""
        return self._thread is not None and self._thread.is_alive()

    def request_stop(self) -> None:
        """Ask uvicorn to stop accepting and finish the in-flight requests (returns at once)."""
        if self._server is not None:
            self._server.should_exit = True

    def stop(self, timeout: float = GRACEFUL_S + 5.0) -> None:
        """:meth:`request_stop`, then wait for the thread (at most ``timeout`` seconds)."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout)


class _Signals:
    """SIGTERM/SIGINT → :attr:`term`; SIGHUP → :attr:`hup` (main thread only)."""

    def __init__(self) -> None:
        self.term = False
        self.hup = False
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_term)
            signal.signal(signal.SIGINT, self._on_term)
            signal.signal(signal.SIGHUP, self._on_hup)

    def _on_term(self, signum: int, frame: Any) -> None:
        self.term = True

    def _on_hup(self, signum: int, frame: Any) -> None:
        self.hup = True

    def serve(self, server: ApiServer, on_hup: Callable[[], None]) -> None:
        """Return once SIGTERM/SIGINT came (:attr:`term`) or ``server``'s thread ended, calling
        ``on_hup`` at each SIGHUP meanwhile (polled every 0.1 s)."""
        while not self.term and server.alive():
            time.sleep(0.1)
            if self.hup:
                self.hup = False
                on_hup()


def _listen(app: FastAPI, settings: Settings, host: str | None, port: int | None) -> ApiServer:
    server = ApiServer(app, host or settings.api.host, settings.api.port if port is None else port, settings.api).start()
    log.info("API listening on %s/v1 (model %s)", server.url, settings.api.model_id,
             extra={"host": server.host, "port": server.port})
    log.info("API identity: %s", identity_mode(settings.api, Secrets.from_config(settings.api)))
    return server


def run_api(settings: Settings, host: str | None = None, port: int | None = None) -> int:
    """``ancre api``: the API alone until SIGTERM/SIGINT; returns the exit status (0).

    Opens the store before listening, so that :class:`~ancre.errors.StoreLockedError` (another
    process owns the embedded store) is raised at once; raises
    :class:`~ancre.errors.ConfigError` without a service key, ``OSError`` when the port is taken."""
    from ancre.api.app import create_app
    from ancre.app.control import serve_control
    from ancre.app.runtime import Runtime
    from ancre.daemon.logs import setup_logging
    from ancre.settings.locations import check_paths
    from ancre.settings.secrets import check_secrets

    setup_logging(settings.daemon.log_format, settings.daemon.log_level, settings.logging.levels(settings.daemon.log_level))
    check_paths(settings)  # a file or folder it can't use: one line naming the key
    check_secrets(settings)  # a secret it can't read: the same, at start rather than at first use
    signals = _Signals()
    with Runtime(settings) as rt:
        core = rt.query_core  # opens the store now: StoreLockedError names the owner
        app = create_app(core, settings, not_ready=core.not_ready)
        _ = core.answers  # built here, not racing in the first requests
        preload(settings)  # in the background: the first question does not pay the model's load
        # with the embedded store this process owns the index: the admin's CLI goes through its
        # control socket (with a Qdrant server the daemon, running apart, serves it)
        control = serve_control(rt, None) if settings.store.kind == "edge" else None
        try:
            server = _listen(app, settings, host, port)
        except BaseException:
            if control is not None:
                control.stop()
            raise
        try:
            signals.serve(server, lambda: log.info("SIGHUP: nothing to resync in `ancre api` (no daemon in this process)"))
        finally:
            log.info("API stopping")
            server.stop()
            if control is not None:
                control.stop()
    return 0 if signals.term else 1


def run_api_via_daemon(settings: Settings, host: str | None = None, port: int | None = None) -> int:
    """``ancre api --via-daemon`` (``ancre-api.service``): the API in a process of its own that
    never opens the index — every question goes to the running daemon through its control
    socket (:class:`~ancre.query.remote.RemoteQueryCore`: answers streamed as the model writes
    them, a Stop in Open WebUI stops the model in the daemon, the audit written there with the
    identity received here). Runs until SIGTERM/SIGINT; returns the exit status (0).

    Raises :class:`~ancre.errors.ControlError` when no daemon answers on the control socket (the
    unit starts after ``ancre.service`` and is restarted until one does),
    :class:`~ancre.errors.ControlPermissionError` when this user may not use it,
    :class:`~ancre.errors.ConfigError` without a service key, ``OSError`` when the port is taken.
    While the daemon restarts, questions are answered 503 and ``/health`` says why."""
    from ancre.api.app import create_app
    from ancre.daemon.logs import setup_logging
    from ancre.errors import ControlError
    from ancre.query.remote import ControlClient, RemoteQueryCore
    from ancre.settings.daemon import control_socket_candidates

    setup_logging(settings.daemon.log_format, settings.daemon.log_level, settings.logging.levels(settings.daemon.log_level))
    client = ControlClient.find(settings)
    if client is None:
        where = ", ".join(str(p) for p in control_socket_candidates(settings.daemon, settings.data_dir))
        raise ControlError(f"no ancre daemon answers on its control socket ({where}): `ancre api --via-daemon` answers "
                           "through the running daemon — start it first (systemctl start ancre), or run `ancre serve`")
    signals = _Signals()
    with RemoteQueryCore(client) as core:
        app = create_app(core, settings, not_ready=core.not_ready)
        server = _listen(app, settings, host, port)
        log.info("API answering through the daemon's control socket %s", client.path)
        try:
            signals.serve(
                server, lambda: log.info("SIGHUP: nothing to resync in `ancre api` (the daemon syncs: systemctl reload ancre)")
            )
        finally:
            log.info("API stopping")
            server.stop()
    return 0 if signals.term else 1


def run_serve(settings: Settings, host: str | None = None, port: int | None = None) -> int:
    """``ancre serve``: the sync daemon and the API in one process over one Runtime, until
    SIGTERM/SIGINT (SIGHUP: full resync); returns the exit status (0 after a signal).

    The daemon starts first (initial sync on its worker; :class:`~ancre.errors.StoreLockedError`
    when another process owns the embedded store), then the API listens. On stop, both stop
    together and the Runtime is closed after the last request; if the daemon's current item did
    not finish in time, the process ends at once with status 0 (the state is crash-safe), as
    ``ancre daemon`` does."""
    from ancre.api.app import create_app
    from ancre.app.control import ControlServer, serve_control
    from ancre.app.daemon import make_daemon
    from ancre.app.runtime import Runtime
    from ancre.daemon.logs import setup_logging
    from ancre.settings.locations import check_paths
    from ancre.settings.secrets import check_secrets

    setup_logging(settings.daemon.log_format, settings.daemon.log_level, settings.logging.levels(settings.daemon.log_level))
    check_paths(settings)  # a file or folder it can't use: one line naming the key
    check_secrets(settings)  # a secret it can't read: the same, at start rather than at first use
    signals = _Signals()
    rt = Runtime(settings)
    try:
        daemon = make_daemon(rt)  # opens the store: StoreLockedError names the owner
    except BaseException:
        rt.close()
        raise
    server: ApiServer | None = None
    control: ControlServer | None = None
    clean = True
    try:
        core = rt.query_core
        app = create_app(core, settings, not_ready=core.not_ready, registries=[daemon.metrics.registry])
        control = serve_control(rt, daemon)
        daemon.start()
        _ = core.answers  # built here, not racing in the first requests
        preload(settings)  # in the background: the first question does not pay the model's load
        server = _listen(app, settings, host, port)
        signals.serve(server, daemon.request_resync)
        if not signals.term:
            log.error("the API thread ended unexpectedly; stopping")
    finally:
        if server is not None:
            server.request_stop()  # in-flight requests finish while the daemon stops
        clean = daemon.stop()
        if server is not None:
            server.stop()
        if control is not None:
            control.stop()
        if clean:
            rt.close()
    if not clean:
        logging.shutdown()
        sys.stdout.flush()
        os._exit(0)
    return 0 if signals.term else 1


__all__ = ["ApiServer", "RedactQueryString", "h11_protocol", "redact_access_log", "run_api", "run_api_via_daemon", "run_serve"]
