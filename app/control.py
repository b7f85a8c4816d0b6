"""Serving the local control API (:mod:`ancre.api.control`) on its Unix domain socket, next to the
daemon in the process that owns the index (``ancre daemon``, ``ancre serve``).

The socket (path: :func:`~ancre.settings.daemon.control_socket_path`) is bound by this module,
made mode 0660 and given the group ``daemon.admin_group`` when that group exists (else it stays
the service's: owner and root only), then served by uvicorn (``loop.create_server(sock=…)``).
Nothing listens on TCP. Each connection's peer credentials (``SO_PEERCRED``, socket(7)) are put
in the ASGI ``state`` of its requests (``request.state.peer``), where the control API reads who
is asking.
"""

from __future__ import annotations

import errno
import grp
import logging
import os
import socket
import stat
import struct
import threading
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

from ancre.api.control import ControlParts, PeerCred, create_control_app
from ancre.app.runtime import Runtime
from ancre.app.server import h11_protocol, redact_access_log, serve_in_thread
from ancre.daemon.progress import index_status
from ancre.daemon.service import Daemon
from ancre.errors import ControlError
from ancre.models import COLLECTIONS
from ancre.settings.api import ApiConfig
from ancre.settings.daemon import control_socket_path, owned_data_dir

log = logging.getLogger("ancre.control")

SOCKET_MODE = 0o660
_UCRED = struct.Struct("3i")


def peer_credentials(sock: Any) -> PeerCred | None:
    """``SO_PEERCRED`` of a connected Unix socket (``None`` for any other socket)."""
    if sock is None or getattr(sock, "family", None) != socket.AF_UNIX:
        return None
    pid, uid, gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return PeerCred(pid, uid, gid)


def _protocol(header_timeout_s: float) -> type:
    base = h11_protocol(header_timeout_s)

    class _PeerCredProtocol(base):  # type: ignore[misc, valid-type]  # the base is uvicorn's H11Protocol subclass built at run time
        app_state: dict[str, Any]  # uvicorn's H11Protocol attribute, unseen through the dynamic base

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            # per connection: every request of it gets scope["state"]["peer"]
            self.app_state = {**self.app_state, "peer": peer_credentials(transport.get_extra_info("socket"))}

    return _PeerCredProtocol


def bind_control_socket(path: Path, admin_group: str) -> socket.socket:
    """A listening Unix socket at ``path`` (parent made 0750 if missing), mode 0660, group
    ``admin_group`` when it exists. A socket file left by a dead process is replaced; raises
    :class:`~ancre.errors.ControlError` when a live process answers on it."""
    path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise ControlError(f"{path} exists and is not a socket; remove it or set daemon.control_socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError as e:
            if e.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                raise
            path.unlink(missing_ok=True)  # stale: its process is gone
        else:
            raise ControlError(f"another ancre process answers on the control socket {path}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, SOCKET_MODE)
        try:
            gid = grp.getgrnam(admin_group).gr_gid
        except KeyError:
            log.info("admin group %r does not exist: the control socket is for root and the service user only", admin_group)
        else:
            try:
                os.chown(path, -1, gid)
            except PermissionError:
                log.warning("cannot give the control socket to group %r (the service user is not in it)", admin_group)
        sock.listen(64)
    except BaseException:
        sock.close()
        path.unlink(missing_ok=True)
        raise
    sock.set_inheritable(False)
    return sock


class ControlServer:
    """uvicorn serving ``app`` on the Unix socket ``path`` from a daemon thread. :meth:`start`
    binds (see :func:`bind_control_socket`) and returns once uvicorn accepts connections;
    :meth:`stop` ends it and removes the socket file."""

    def __init__(self, app: FastAPI, path: Path, admin_group: str, limits: ApiConfig | None = None) -> None:
        self.app, self.path, self.admin_group = app, path, admin_group
        self.limits = limits if limits is not None else ApiConfig()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 30.0) -> ControlServer:
        """Bind and serve (``RuntimeError`` when uvicorn did not start within ``timeout`` s)."""
        sock = bind_control_socket(self.path, self.admin_group)
        redact_access_log()  # its lines carry no query string (user names, questions)
        config = uvicorn.Config(
            # access_log=False would make uvicorn cut "uvicorn.access" off process-wide (no handlers,
            # no propagation): the API's access log under `ancre serve` would vanish with it
            self.app, log_config=None, lifespan="off", access_log=True, server_header=False,
            http=_protocol(self.limits.header_timeout_s), timeout_keep_alive=self.limits.keep_alive_s,
            timeout_graceful_shutdown=2,
            # the HTTP API's connection limit (uvicorn answers 503 once len(connections) >= limit)
            limit_concurrency=self.limits.max_connections + 1,
        )
        self._server, self._thread = serve_in_thread(
            config, sock, name="control", timeout=timeout, what=f"the control socket could not be served at {self.path}"
        )
        log.info("control socket at %s", self.path, extra={"control_socket": str(self.path)})
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and remove the socket file."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self.path.unlink(missing_ok=True)


def control_parts(rt: Runtime, daemon: Daemon | None) -> ControlParts:
    """The control API's services over ``rt`` (and the running ``daemon``, if any)."""
    from ancre.app.explain import explain_lines
    from ancre.app.reports import exposure

    return ControlParts(
        query=rt.query_core,
        index_status=lambda: index_status(rt.state, rt.bm25.current_generation()),
        store_points=lambda: sum(rt.store.count(c) for c in COLLECTIONS),
        explain=lambda path, user, source, private: explain_lines(rt, path, user, source, private=private),
        daemon=daemon,
        admin_group=rt.settings.daemon.admin_group,
        limits=rt.settings.api,
        exposure=lambda sources, explain: exposure(rt, sources, explain=explain).model_dump(mode="json"),
        data_dir=owned_data_dir(rt.settings.data_dir),
    )


def serve_control(rt: Runtime, daemon: Daemon | None) -> ControlServer:
    """Bind and serve the control socket of ``rt``'s settings; sets ``daemon.control_socket``."""
    settings = rt.settings
    path = control_socket_path(settings.daemon, Path(settings.data_dir))
    _ = rt.query_core.answers  # built here, not racing in the first requests
    server = ControlServer(create_control_app(control_parts(rt, daemon)), path, settings.daemon.admin_group, settings.api).start()
    if daemon is not None:
        daemon.control_socket = str(path)
    return server


__all__ = ["ControlServer", "bind_control_socket", "control_parts", "peer_credentials", "serve_control"]
