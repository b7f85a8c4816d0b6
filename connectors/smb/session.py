"""Sessions of the SMB source: the smbclient arguments of a source, the classification of SMB
errors (authentication, connection, not found) and the retry policy.

Every call runs on a pooled session (:class:`SmbSession`); a connection-level failure (socket
closed, refused reconnection, expired or deleted session, ...) drops the pooled connection and
retries the call once on a new one; a second failure raises :class:`SourceUnavailableError` and,
for :data:`FAIL_FAST_S` seconds, calls made with ``fail_fast`` fail at once (a pass over
thousands of files against a dead server must not wait a timeout per file). Bad credentials
raise :class:`SourceUnavailableError` at once: a retry won't help.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from smbprotocol.exceptions import (
    SMBAuthenticationError,
    SMBConnectionClosed,
    SMBException,
    SMBOSError,
    SMBResponseException,
)
from smbprotocol.header import NtStatus

from ancre.errors import SourceUnavailableError
from ancre.settings.sources import SmbSourceConfig

log = logging.getLogger("ancre.connectors.smb")

T = TypeVar("T")

_ENOENT_STATUSES = frozenset(
    {
        NtStatus.STATUS_OBJECT_NAME_NOT_FOUND,
        NtStatus.STATUS_OBJECT_PATH_NOT_FOUND,
        NtStatus.STATUS_NOT_FOUND,
        NtStatus.STATUS_NO_SUCH_FILE,
        NtStatus.STATUS_NOT_A_DIRECTORY,
        NtStatus.STATUS_DELETE_PENDING,
    }
)
_DEAD_SESSION_STATUSES = frozenset(
    {
        0xC0000203,  # STATUS_USER_SESSION_DELETED
        0xC000035C,  # STATUS_NETWORK_SESSION_EXPIRED
        0xC00000C9,  # STATUS_NETWORK_NAME_DELETED
        0xC000020C,  # STATUS_CONNECTION_DISCONNECTED
        0xC000020D,  # STATUS_CONNECTION_RESET
        0xC0000241,  # STATUS_CONNECTION_ABORTED
        0xC000023C,  # STATUS_NETWORK_UNREACHABLE
        0xC00000B5,  # STATUS_IO_TIMEOUT
        0xC0000466,  # STATUS_SERVER_UNAVAILABLE
        0xC00000BE,  # STATUS_BAD_NETWORK_PATH
        0xC00000CC,  # STATUS_BAD_NETWORK_NAME (share gone)
        0xC0000205,  # STATUS_INSUFF_SERVER_RESOURCES
        0xC000009A,  # STATUS_INSUFFICIENT_RESOURCES
        0xC0000128,  # STATUS_FILE_CLOSED (handle lost with its session)
    }
)
"""NTSTATUS codes meaning the session, tree or connection is gone rather than the file."""
_AUTH_STATUSES = frozenset({0xC000006D, 0xC000006A, 0xC0000064, 0xC0000071, 0xC0000072, 0xC0000234, 0xC000006E})
"""LOGON_FAILURE, WRONG_PASSWORD, NO_SUCH_USER, PASSWORD_EXPIRED, ACCOUNT_DISABLED,
ACCOUNT_LOCKED_OUT, ACCOUNT_RESTRICTION: a retry won't help."""

FAIL_FAST_S = 10.0
"""After a failed reconnection, content and ACL reads fail at once for this many seconds (a pass
over thousands of files against a dead server must not wait a timeout per file); listings and
``get_item`` always try again."""


class Gone(Exception):
    """The path does not exist on the share (any more)."""


class Blocked(Gone):
    """The path lies under (or is) a DFS link that is not followed: no item, no ACL, no content."""


def _status(e: BaseException) -> int | None:
    if isinstance(e, SMBOSError):
        return int(e.ntstatus)
    if isinstance(e, SMBResponseException):
        return int(e.status)
    return None


def is_auth_error(e: BaseException) -> bool:
    """Whether ``e`` is an authentication failure (bad credentials, disabled account)."""
    return isinstance(e, SMBAuthenticationError) or _status(e) in _AUTH_STATUSES


def is_connection_error(e: BaseException) -> bool:
    """Whether ``e`` means the connection or session is unusable (as opposed to an error about one
    file, e.g. ACCESS_DENIED or OBJECT_NAME_NOT_FOUND). smbprotocol reports a refused
    (re)connection as ``ValueError("Failed to connect to …")``."""
    status = _status(e)
    if status is not None:
        return status in _DEAD_SESSION_STATUSES
    if isinstance(e, SMBConnectionClosed | ConnectionError | TimeoutError | socket.timeout | socket.gaierror):
        return True
    if isinstance(e, ValueError):
        return str(e).startswith("Failed to connect")
    if isinstance(e, SMBException):
        return not isinstance(e, SMBAuthenticationError)
    return isinstance(e, OSError)


def is_not_found(e: BaseException) -> bool:
    """Whether ``e`` says the path does not exist (or a parent is not a folder)."""
    return isinstance(e, FileNotFoundError) or _status(e) in _ENOENT_STATUSES


def is_access_denied(e: SMBOSError) -> bool:
    """Whether ``e`` is STATUS_ACCESS_DENIED."""
    return bool(e.ntstatus == NtStatus.STATUS_ACCESS_DENIED)


def drop_connections(cache: dict[str, Any]) -> None:
    """Close every connection of ``cache`` (an smbclient connection cache) without waiting for
    the server (it may be gone)."""
    for key in list(cache):
        conn = cache.pop(key, None)
        if conn is None:
            continue
        try:
            conn.disconnect(close=False)
        except Exception as e:  # a dead connection may fail in any way
            log.debug("dropping SMB connection %s: %s", key, e)


class SmbSession:
    """The pooled SMB session of one source: ``cfg`` (server, port, username, auth,
    require_signing, encrypt, timeout_s) with ``password`` (already resolved; ``None`` for
    Kerberos), ``unc`` (``\\\\server\\share``, for messages). Its connection cache is its own
    (:attr:`cache`). Thread-safe."""

    def __init__(self, cfg: SmbSourceConfig, password: str | None, unc: str) -> None:
        self.cfg = cfg
        self.source_id = cfg.id
        self.unc = unc
        self._password = password
        self.cache: dict[str, Any] = {}
        """smbclient's connection cache of this session (``connection_cache``)."""
        self._lock = threading.Lock()
        self._down_until = 0.0

    def kwargs(self, cache: dict[str, Any] | None = None) -> dict[str, Any]:
        """smbclient keyword arguments of this source (credentials, port, security, the
        connection cache — this session's own unless ``cache`` is given)."""
        return {
            "username": self.cfg.username,
            "password": self._password,
            "port": self.cfg.port,
            "auth_protocol": self.cfg.auth,
            "require_signing": self.cfg.require_signing,
            "encrypt": True if self.cfg.encrypt else None,
            "connection_timeout": self.cfg.timeout_s,
            "connection_cache": self.cache if cache is None else cache,
        }

    def call(self, what: str, fn: Callable[[dict[str, Any]], T], *, fail_fast: bool = False) -> T:
        """Run ``fn(kwargs)``; on a connection-level error drop the pooled connection and retry
        once. Raises :class:`SourceUnavailableError` when that fails too (or on bad credentials;
        with ``fail_fast``, at once within :data:`FAIL_FAST_S` seconds of a failed
        reconnection); any other exception (file-level ``SMBOSError``…) propagates. ``what``
        names the call in messages."""
        if fail_fast and time.monotonic() < self._down_until:
            raise SourceUnavailableError(f"source {self.source_id}: {self.unc} unreachable (recent failure): {what}")
        for attempt in (0, 1):
            try:
                result = fn(self.kwargs())
                self._down_until = 0.0
                return result
            except Exception as e:
                if is_auth_error(e):
                    raise SourceUnavailableError(
                        f"source {self.source_id}: authentication to {self.unc} failed: {e}"
                    ) from None
                if not is_connection_error(e):
                    raise
                self.close()
                if attempt:
                    self._down_until = time.monotonic() + FAIL_FAST_S
                    raise SourceUnavailableError(
                        f"source {self.source_id}: {self.unc} unreachable ({what}): {type(e).__name__}: {e}"
                    ) from None
                log.info("source %s: %s: connection lost (%s), reconnecting", self.source_id, what, e)
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close this session's SMB connections (the next call makes new ones)."""
        with self._lock:
            drop_connections(self.cache)


__all__ = [
    "FAIL_FAST_S",
    "Blocked",
    "Gone",
    "SmbSession",
    "drop_connections",
    "is_access_denied",
    "is_auth_error",
    "is_connection_error",
    "is_not_found",
]
