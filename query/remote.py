"""The query core through the local control socket: when another process (``ancre daemon``,
``ancre serve``) owns the embedded index, :class:`RemoteQueryCore` asks it over its Unix socket
(:mod:`ancre.api.control`, docs/DEPLOY.md, "The admin commands") — same methods and same typed results
as the in-process :class:`~ancre.query.core.QueryCore`. :class:`ControlClient` is the HTTP client
under it (httpx over the Unix socket), also used by the CLI for ``status`` and ``sync``.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from pydantic import TypeAdapter

from ancre import errors
from ancre.config import Settings
from ancre.errors import AncreError, ControlError, ControlPermissionError
from ancre.models import Closing
from ancre.query.answer import Answer, AnswerStream
from ancre.query.core import SearchResult
from ancre.settings.daemon import control_socket_candidates, owned_data_dir

log = logging.getLogger("ancre.control")

TIMEOUT_S = 600.0
"""Read timeout of a control request (an ``ask`` may wait for a slow model); seconds."""
_NOT_THERE = (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR)


def probe_socket(path: Path) -> bool:
    """Whether a process answers on the Unix socket ``path``: ``True`` when a connection is
    accepted, ``False`` when no socket is there or nobody listens (a stale file). Raises
    :class:`~ancre.errors.ControlPermissionError` when the socket is there but this process may
    not open it (its mode and group are the access control)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(path))
        return True
    except PermissionError as e:
        if not os.path.lexists(path):  # a directory on the way is closed to us: look elsewhere
            return False
        raise ControlPermissionError(
            f"permission denied on the control socket {path}: the index is owned by a running ancre and only root, "
            "the service user and members of its admin group (daemon.admin_group) may use its socket"
        ) from e
    except OSError as e:
        if e.errno in _NOT_THERE:
            return False
        raise ControlError(f"control socket {path}: {e.strerror or e}") from e
    finally:
        s.close()


class ControlClient(Closing):
    """JSON requests to the control API on the Unix socket ``path`` (httpx, ``HTTPTransport(uds=)``).
    Errors come back as the :mod:`ancre.errors` class the owner raised (by name), else
    :class:`~ancre.errors.ControlError`; a refused connection is
    :class:`~ancre.errors.ControlPermissionError`."""

    def __init__(self, path: Path, *, timeout_s: float = TIMEOUT_S) -> None:
        self.path = Path(path)
        self._http = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.path)), base_url="http://ancre",
            timeout=httpx.Timeout(timeout_s, connect=10.0),
        )

    @classmethod
    def find(cls, settings: Settings) -> ControlClient | None:
        """A client of the process that owns ``settings``'s index, when one answers on a control
        socket (:func:`~ancre.settings.daemon.control_socket_candidates`) and says it owns this
        ``data_dir`` (``/v1/identity``); ``None`` otherwise. A socket of another instance (systemd's
        ``/run/ancre/control.sock`` serving another data folder) is passed over: its answers would
        rest on another index and its audit would record this caller's questions. Raises
        :class:`~ancre.errors.ControlPermissionError` (see :func:`probe_socket`), and
        :class:`~ancre.errors.ControlError` when ``daemon.control_socket`` names another
        instance's socket."""
        mine = owned_data_dir(settings.data_dir)
        for path in control_socket_candidates(settings.daemon, Path(settings.data_dir)):
            if not probe_socket(path):
                continue
            client = cls(path)
            owner = client.owner()
            if owner == mine:
                return client
            client.close()
            theirs = owner or "unknown (an ancre that does not say)"
            if settings.daemon.control_socket is not None:
                raise ControlError(f"daemon.control_socket: {path} is served by the ancre whose data_dir is {theirs}, "
                                   f"not {mine}: name this instance's socket")
            log.info("control socket %s passed over: it serves data_dir %s, not %s", path, theirs, mine)
        return None

    def owner(self) -> str | None:
        """The data folder whose index the process on this socket owns (``/v1/identity``), or
        ``None`` when it does not say (an older ancre, or an error). Raises
        :class:`~ancre.errors.ControlPermissionError` when this user may not use the socket."""
        try:
            body = self.request("GET", "/v1/identity")
        except ControlPermissionError:
            raise
        except AncreError:
            return None
        owner = body.get("data_dir") if isinstance(body, dict) else None
        return owner if isinstance(owner, str) and owner else None

    def request(self, method: str, url: str, *, json: Any = None, params: dict[str, Any] | None = None) -> Any:
        """One request; the decoded JSON answer. Raises as described in the class doc."""
        try:
            r = self._http.request(method, url, json=json, params=params)
        except httpx.TransportError as e:
            if isinstance(e.__cause__, PermissionError) or "Permission denied" in str(e):
                probe_socket(self.path)  # raises the clear permission error
            raise ControlError(f"the running ancre stopped answering on {self.path}: {e}") from e
        try:
            body = r.json()
        except ValueError:
            body = {"error": r.text[:200]}
        if r.is_success:
            return body
        message = body.get("error", r.reason_phrase) if isinstance(body, dict) else r.reason_phrase
        if isinstance(message, dict):  # the body limits answer in the HTTP API's shape
            message = message.get("message", r.reason_phrase)
        raise error_of(body.get("type") if isinstance(body, dict) else None, str(message))

    @contextmanager
    def stream(self, method: str, url: str, body: dict[str, Any]) -> Iterator[httpx.Response]:
        """One streamed request on a connection of its own (never a pooled one: closing or
        shutting it down ends this request only); the response once its status is a success,
        else raises as :meth:`request`."""
        with httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.path)), base_url="http://ancre", timeout=self._http.timeout,
        ) as http:
            try:
                with http.stream(method, url, json=body) as r:
                    if not r.is_success:
                        r.read()
                        try:
                            data = r.json()
                        except ValueError:
                            data = {"error": r.text[:200]}
                        raise error_of(data.get("type"), str(data.get("error", r.reason_phrase)))
                    yield r
            except httpx.TransportError as e:
                if isinstance(e.__cause__, PermissionError) or "Permission denied" in str(e):
                    probe_socket(self.path)
                raise ControlError(f"the running ancre stopped answering on {self.path}: {e}") from e

    def get(self, url: str, **params: Any) -> Any:
        """``GET url?params`` (see :meth:`request`)."""
        return self.request("GET", url, params=params or None)

    def post(self, url: str, body: dict[str, Any] | None = None) -> Any:
        """``POST url`` with a JSON body (see :meth:`request`)."""
        return self.request("POST", url, json=body or {})

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()


def _ask_body(question: str, user: str, asked_by: str | None, history: Sequence[str] | None) -> dict[str, object]:
    body: dict[str, object] = {"question": question, "user": user}
    if history is not None:
        body["history"] = list(history)
    if asked_by is not None:
        body["asked_by"] = asked_by
    return body


_ANSWER = TypeAdapter(Answer)
_SEARCH = TypeAdapter(SearchResult)


def error_of(type_name: object, message: str) -> AncreError:
    """The error the owner raised, rebuilt from its class name (:mod:`ancre.errors`, or the
    answering model's :class:`~ancre.query.llm.LlmError` family); :class:`ControlError` for a
    name this client does not know."""
    from ancre.query import llm

    name = str(type_name or "")
    cls = getattr(errors, name, None) or getattr(llm, name, None)
    if not (isinstance(cls, type) and issubclass(cls, AncreError)):
        cls = ControlError
    return cls(message)


class RemoteQueryCore(Closing):
    """The query core of the process owning the index, through its control socket: the methods
    of :class:`~ancre.query.core.QueryCore` (``search``, ``ask``, ``stream``, ``principals``,
    ``account``, ``not_ready``, ``points``, ``close``, context manager) with the same typed results. Who may ask as whom is
    decided by the owner from this process's Unix identity (:mod:`ancre.api.control`)."""

    def __init__(self, client: ControlClient) -> None:
        self.client = client
        self._ready = False

    def search(self, question: str, user: str, *, limit: int | None = None) -> SearchResult:
        """See :meth:`QueryCore.search <ancre.query.core.QueryCore.search>`."""
        data = self.client.post("/v1/search", {"question": question, "user": user, "limit": limit})
        return _SEARCH.validate_python(data)

    def ask(
        self, question: str, user: str, *, asked_by: str | None = None, history: Sequence[str] | None = None
    ) -> Answer:
        """See :meth:`QueryCore.ask <ancre.query.core.QueryCore.ask>`. The audit line names this
        process's Unix user as the one who asked; ``asked_by`` (the identity this process
        received) is taken by the owner only from a process of the service's own user (the RAG
        API of ``ancre-api.service``); from anyone else the audit names the Unix user."""
        return _ANSWER.validate_python(self.client.post("/v1/ask", _ask_body(question, user, asked_by, history)))

    def principals(self, user: str) -> frozenset[str]:
        """See :meth:`QueryCore.principals <ancre.query.core.QueryCore.principals>`."""
        return frozenset(self.client.get("/v1/principals", user=user)["principals"])

    def account(self, user: str) -> str | None:
        """See :meth:`QueryCore.account <ancre.query.core.QueryCore.account>`."""
        account = self.client.get("/v1/principals", user=user)["account"]
        return str(account) if account is not None else None

    def stream(
        self, question: str, user: str, *, asked_by: str | None = None, history: Sequence[str] | None = None
    ) -> AnswerStream:
        """See :meth:`QueryCore.stream <ancre.query.core.QueryCore.stream>`: the owner's pieces as
        they come (``POST /v1/ask/stream``, NDJSON), then the :class:`~ancre.query.answer.Answer`;
        errors as the owner raised them (:func:`error_of`). :meth:`AnswerStream.cancel
        <ancre.query.answer.AnswerStream.cancel>` shuts this request's connection down: the owner
        then stops the model call and audits the answer ``interrompue``; the reading thread's
        ``next()`` raises :class:`~ancre.query.llm.ModelCallAborted`."""
        from ancre.query.llm import Abort

        abort = Abort()
        return AnswerStream(self._pieces(_ask_body(question, user, asked_by, history), abort), abort)

    def _pieces(self, body: dict[str, object], abort: Any) -> Iterator[str | Answer]:
        from ancre.query.llm import ModelCallAborted

        with self.client.stream("POST", "/v1/ask/stream", body) as r:
            stream = r.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                abort.register(sock)  # cancel() shuts it down: the owner sees its caller leave
            try:
                for line in r.iter_lines():
                    if not line.strip():
                        continue
                    item = json.loads(line)
                    if "text" in item:
                        yield str(item["text"])
                    elif "answer" in item:
                        yield _ANSWER.validate_python(item["answer"])
                    else:
                        raise error_of(item.get("type"), str(item.get("error", "the answer failed")))
            except (httpx.TransportError, OSError) as e:
                if abort.cancelled:
                    raise ModelCallAborted("the answer was abandoned: its request to the owner was closed") from None
                raise ControlError(f"the running ancre stopped answering on {self.client.path}: {e}") from e

    def probe_directory(self) -> None:
        """See :meth:`QueryCore.probe_directory <ancre.query.core.QueryCore.probe_directory>`
        (the owner reads its directory once)."""
        self.client.get("/v1/directory")

    def not_ready(self) -> str | None:
        """See :meth:`QueryCore.not_ready <ancre.query.core.QueryCore.not_ready>` (once ready,
        stays ready: not asked again)."""
        if self._ready:
            return None
        reason = self.client.get("/v1/ready")["not_ready"]
        self._ready = reason is None
        return str(reason) if reason is not None else None

    def points(self) -> Mapping[str, int]:
        """See :meth:`QueryCore.points <ancre.query.core.QueryCore.points>`."""
        return {str(k): int(v) for k, v in self.client.get("/v1/ready")["points"].items()}

    def close(self) -> None:
        """Close the connection to the owner."""
        self.client.close()


__all__ = ["ControlClient", "RemoteQueryCore", "probe_socket"]
