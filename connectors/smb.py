"""SMB connector: a Windows (or Samba) share read with smbprotocol, NT ACLs from the server.

- **Listing** walks the share with :func:`list_dir` (FILE_ID_FULL_DIRECTORY_INFORMATION): each
  file gives its FileId (the server's stable file id, ``native_id = "fid:<16 hex>"``; the relative
  path when the server returns 0), its size (EndOfFile, bytes) and mtime (LastWriteTime, epoch
  seconds). Ignore rules, include/exclude globs and NFC paths as in the folder connector. Symbolic
  links and junctions (reparse points) are never followed: each is listed as an item with
  ``skip`` set (``symlink`` / ``junction``: status ``skipped`` in ``ancre status``), as in the folder
  connector. DFS links are followed through their referral (smbclient) unless ``dfs = false``,
  which leaves them out (listed as ``skipped: dfs link (dfs = false)``). A DFS link whose referral can't be followed (target
  down, refused, unknown) while the share itself still answers is recorded in
  :attr:`SmbConnector.unreachable` and skipped: the sync engine keeps what it indexed under it.
- **Rights**, fetched lazily per file: one compound CREATE(READ_CONTROL) + QUERY_INFO(security:
  OWNER|GROUP|DACL, [MS-SMB2] 2.2.37) + CLOSE, parsed by :mod:`ancre.acl.sd_parse` and reduced by
  the ACL engine; then intersected with the share-level permissions (:func:`intersect_share`).
  Unreadable (ACCESS_DENIED on READ_CONTROL, malformed, server gone) → ``Acl.nobody(reason)``.
- **Resilience**: every call runs on a pooled session; a connection-level failure (socket closed,
  refused reconnection, expired or deleted session, ...) drops the pooled connection and retries
  the call once on a new one; a second failure raises :class:`SourceUnavailableError` (never an
  empty or partial listing: a folder that can't be listed fails the whole listing, naming it, so
  the sync engine purges nothing; only an unfollowable DFS link is left out, see above).
- **Changes**: :meth:`SmbConnector.watch` — SMB2 CHANGE_NOTIFY on the share root with
  WATCH_TREE, see :mod:`ancre.connectors.smb_notify`.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

import smbclient
from smbclient._io import SMBDirectoryIO, SMBFileTransaction, SMBRawIO
from smbclient._os import SMBDirEntryInformation
from smbprotocol import MAX_PAYLOAD_SIZE
from smbprotocol.exceptions import (
    SMBAuthenticationError,
    SMBConnectionClosed,
    SMBException,
    SMBOSError,
    SMBResponseException,
)
from smbprotocol.file_info import FileAttributes, FileInformationClass, InfoType
from smbprotocol.header import NtStatus
from smbprotocol.open import FilePipePrinterAccessMask, SMB2QueryInfoRequest, SMB2QueryInfoResponse
from pydantic import Field, SecretStr, model_validator

from ancre.acl.directory import Directory
from ancre.acl.engine import SHARE_ADMITS_NONE_RULE, SecurityDescriptor, acl_problem, read_acl
from ancre.acl.sd_parse import acl_from_descriptor, parse_security_descriptor
from ancre.connectors.base import (
    ChangeCallback,
    CollectionFromConfig,
    Connector,
    SourceCheck,
    SourceContext,
    SourceKind,
)
from ancre.connectors.folder import is_ignored, nfc, path_selected, unc_folder
from ancre.errors import AclError, ConfigError, DirectoryError, SourceUnavailableError
from ancre.models import AUTHENTICATED_USERS, EVERYONE, Acl, SourceItem
from ancre.settings import resolve_secret
from ancre.settings.sources import SourceSettings

log = logging.getLogger("ancre.connectors.smb")


class SmbSourceConfig(SourceSettings):
    """A ``kind = "smb"`` source: one SMB share (Windows or Samba), read with smbprotocol."""

    kind: Literal["smb"]
    server: str
    """The file server's host name or address (``srv-fichiers.axonix.ch``); required."""
    port: int = Field(445, ge=1, le=65535)
    share: str
    """The share name (``Partage``); the source is the whole share. Required."""
    username: str | None = None
    """The service account, ``DOMAIN\\user`` or a UPN. It needs read access (data and
    READ_CONTROL) on the whole share. Unset with ``auth = "kerberos"``: the process's ticket cache."""
    password: SecretStr | None = None
    """The service account's password (prefer ``password_env``)."""
    password_env: str | None = None
    """Name of an environment variable holding the password."""
    auth: Literal["ntlm", "kerberos", "negotiate"] = "ntlm"
    """Authentication protocol (``kerberos`` needs the ``gssapi`` Python package)."""
    share_allow: tuple[str, ...] = ()
    """Share-level permissions — principals (``sid:…`` or directory names) the share grants read
    to. Empty = no share-level restriction (the Windows default, Everyone)."""
    share_deny: tuple[str, ...] = ()
    """Principals the share denies."""
    require_signing: bool = True
    encrypt: bool = False
    """Require SMB3 encryption of the session."""
    dfs: bool = True
    """Follow DFS referrals; ``false`` leaves DFS link folders out of the source."""
    timeout_s: float = Field(30.0, gt=0)
    """Connection timeout in seconds."""

    @model_validator(mode="after")
    def _one_password(self) -> "SmbSourceConfig":
        if not self.server or not self.share:
            raise ValueError("server and share are required for an smb source")
        if self.password is not None and self.password_env:
            raise ValueError("set password or password_env, not both")
        return self

T = TypeVar("T")

# Security information of the QUERY_INFO ([MS-SMB2] 2.2.37, [MS-DTYP] 2.4.7)
OWNER_SECURITY_INFORMATION = 0x1
GROUP_SECURITY_INFORMATION = 0x2
DACL_SECURITY_INFORMATION = 0x4

# Reparse tags ([MS-FSCC] 2.1.2.1); FILE_ID_FULL_DIRECTORY_INFORMATION carries the tag in EaSize
IO_REPARSE_TAG_MOUNT_POINT = 0xA0000003
IO_REPARSE_TAG_SYMLINK = 0xA000000C
IO_REPARSE_TAG_DFS = 0x8000000A

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

SHARE_REFRESH_S = 60.0
"""The live ACL check (:meth:`SmbConnector.read_acls`) re-resolves ``share_allow`` /
``share_deny`` and group nesting at most this often (a sync pass does it once per pass)."""


class _Gone(Exception):
    """The path does not exist on the share (any more)."""


FAIL_FAST_S = 10.0
"""After a failed reconnection, content and ACL reads fail at once for this many seconds (a pass
over thousands of files against a dead server must not wait a timeout per file); listings and
``get_item`` always try again."""


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


# --------------------------------------------------------------------------------------------------
def intersect_share(
    ntfs: Acl,
    share_allow: frozenset[str] | None,
    share_deny: frozenset[str],
    nested: Callable[[str, str], bool] | None = None,
) -> Acl:
    """Share permissions ∩ NTFS permissions as one ``Acl``: a user needs both.

    Exact semantics: ``(ntfs.allow ∩ P ≠ ∅) ∧ (share_allow ∩ P ≠ ∅) ∧ P ∩ (ntfs.deny ∪ share_deny) = ∅``.
    The deny part is exact (union). ``share_allow`` ``None`` means no share-level allow restriction
    (Windows' default share permission, Everyone); so does a ``share_allow`` holding Everyone or
    Authenticated Users (every resolved P(user) holds both).

    Otherwise the allow set is the union, over pairs (NTFS principal ``a``, share principal ``s``),
    of a principal whose holders provably hold both:

    - ``a`` is Everyone/Authenticated Users → ``s``;  ``a == s`` → ``a``;
    - ``nested(a, s)`` (``a`` is transitively a member of ``s``) → ``a``;
      ``nested(s, a)`` → ``s``.

    Any other pair contributes nothing: a user who holds ``a`` and ``s`` by unrelated routes is
    refused (fail closed). ``nested(member, group)`` takes ``sid:`` principals; ``None`` = only the
    exact rules. An NTFS result that is already *nobody* stays as it is.
    """
    if not ntfs.allow:
        return Acl(ntfs.allow, ntfs.deny | share_deny, ntfs.reason)
    deny = ntfs.deny | share_deny
    if share_allow is None or share_allow & {EVERYONE, AUTHENTICATED_USERS}:
        return Acl(ntfs.allow, deny, ntfs.reason)
    allow: set[str] = set()
    for a in ntfs.allow:
        if a in (EVERYONE, AUTHENTICATED_USERS):
            allow |= share_allow
            continue
        for s in share_allow:
            if a == s or (nested is not None and nested(a, s)):
                allow.add(a)
            elif nested is not None and nested(s, a):
                allow.add(s)
    if not allow:
        return Acl.nobody(SHARE_ADMITS_NONE_RULE)
    return Acl(frozenset(allow), deny, ntfs.reason)


def list_dir(unc_path: str, search_pattern: str = "*", **kwargs: Any) -> list[SMBDirEntryInformation]:
    """The entries of the folder ``unc_path`` matching ``search_pattern`` (``.``/``..`` left out),
    from SMB2 QUERY_DIRECTORY with FILE_ID_FULL_DIRECTORY_INFORMATION ([MS-FSCC] 2.4.18; EaSize
    holds the reparse tag of a reparse point). ``kwargs``: smbclient session arguments.

    Unlike ``smbclient.scandir``, which opens a tree for every entry's path (and so, once a DFS
    referral to a dead server is cached, fails on the folder holding the link), only the folder
    itself is opened (its own referral, if any, is followed). Raises ``SMBOSError`` or
    connection errors."""
    out: list[SMBDirEntryInformation] = []
    with SMBDirectoryIO(unc_path, share_access="rwd", **kwargs) as fd:
        for raw in fd.query_directory(search_pattern, FileInformationClass.FILE_ID_FULL_DIRECTORY_INFORMATION):
            name = raw["file_name"].get_value().decode("utf-16-le")
            if name in (".", ".."):
                continue
            out.append(
                SMBDirEntryInformation(
                    creation_time=raw["creation_time"].get_value(),
                    last_access_time=raw["last_access_time"].get_value(),
                    last_write_time=raw["last_write_time"].get_value(),
                    change_time=raw["change_time"].get_value(),
                    end_of_file=raw["end_of_file"].get_value(),
                    allocation_size=raw["allocation_size"].get_value(),
                    file_attributes=raw["file_attributes"].get_value(),
                    ea_size=raw["ea_size"].get_value(),
                    file_id=raw["file_id"].get_value(),
                    file_name=name,
                )
            )
    return out


def read_security_descriptor(
    unc_path: str,
    *,
    security_information: int = OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
    **kwargs: Any,
) -> bytes:
    """The raw self-relative SECURITY_DESCRIPTOR (``security_information``, by default
    OWNER|GROUP|DACL; the SACL would need ACCESS_SYSTEM_SECURITY) of a file or folder, in one
    compound CREATE (READ_CONTROL; opens files and folders alike) + QUERY_INFO
    (SMB2_0_INFO_SECURITY, [MS-SMB2] 2.2.37) + CLOSE. ``kwargs``: smbclient session arguments.
    Output buffer 65536 bytes (the single-credit payload; an ACL is at most 65535 bytes).
    Raises ``SMBOSError`` (ACCESS_DENIED, OBJECT_NAME_NOT_FOUND, ...) or connection errors."""
    raw = SMBRawIO(
        unc_path,
        mode="r",
        share_access="rwd",
        desired_access=FilePipePrinterAccessMask.READ_CONTROL,
        create_options=0,
        **kwargs,
    )
    request = SMB2QueryInfoRequest()
    request["info_type"] = InfoType.SMB2_0_INFO_SECURITY
    request["output_buffer_length"] = MAX_PAYLOAD_SIZE
    request["additional_information"] = security_information
    request["file_id"] = raw.fd.file_id

    def receive(sent: Any) -> bytes:
        response = raw.fd.connection.receive(sent)
        answer = SMB2QueryInfoResponse()
        answer.unpack(response["data"].get_value())
        return bytes(answer["buffer"].get_value())

    with SMBFileTransaction(raw) as transaction:
        transaction += (request, receive)
    return transaction.results[0]  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------------
class SmbConnector(CollectionFromConfig):
    """A :class:`~ancre.connectors.base.Connector` over one SMB share; also
    :class:`~ancre.connectors.base.Watchable`, :class:`~ancre.connectors.base.SubtreeListing`,
    :class:`~ancre.connectors.base.ReportsUnreachable`, :class:`~ancre.connectors.base.Closeable`
    and :class:`~ancre.connectors.base.Checkable`.

    ``cfg``: a ``kind = "smb"`` source (server, port, share, username, password or password_env,
    auth, require_signing, encrypt, dfs, timeout_s, share_allow/share_deny, include/exclude,
    unc_root for citations — default ``\\\\server\\share``). ``directory`` resolves
    share_allow/share_deny names and, when it offers ``is_nested`` (LDAP), group nesting for the
    share intersection. Raises :class:`ConfigError` on a missing server/share or password variable.
    Thread-safe: the sync engine and the watcher may run at once (the watcher has its own session).
    """

    notify_buffer_size = 65536
    """Bytes the server may return per CHANGE_NOTIFY (more changes → STATUS_NOTIFY_ENUM_DIR → rescan)."""

    def __init__(self, cfg: SmbSourceConfig, *, directory: Directory | None, ignore: tuple[str, ...]) -> None:
        if not cfg.server or not cfg.share:
            raise ConfigError(f"sources.{cfg.id}: server and share are required for an smb source")
        self.cfg = cfg
        self.source_id = cfg.id
        self.collection = cfg.collection
        self.directory = directory
        self.ignore = ignore
        self.unc = f"\\\\{cfg.server}\\{cfg.share}"
        """The share as smbclient addresses it."""
        self.unc_root = cfg.unc_root or self.unc
        """The share's UNC root as users know it (citations)."""
        self._password = resolve_secret(cfg.password, cfg.password_env, f"sources.{cfg.id}.password")
        self._cache: dict[str, Any] = {}
        self._cache_lock = threading.Lock()
        self._down_until = 0.0
        self._share: tuple[frozenset[str] | None, frozenset[str]] | None = None
        self._nesting: dict[tuple[str, str], bool] = {}
        self._share_at = time.monotonic()
        self._session_lock = threading.Lock()
        self.watch_ready = threading.Event()
        """Set while :meth:`watch` has its CHANGE_NOTIFY requests armed on the server."""
        self._wire: dict[str, str] = {}
        """NFC relative path → the path as the server spells it, for the paths whose names are not
        NFC on the share (written NFD by a macOS client): listings and stats fill it."""
        self.unreachable: tuple[str, ...] = ()
        """Relative paths (NFC, ``/``-separated) of the DFS links whose referral the last
        :meth:`list_items` could not follow: nothing of the listing lies under them, and what was
        indexed there must be kept (the sync engine purges nothing under these prefixes)."""

    # ---------------------------------------------------------------- sessions
    def session_kwargs(self, cache: dict[str, Any] | None = None) -> dict[str, Any]:
        """smbclient keyword arguments of this source (credentials, port, security, the
        connection cache — this connector's own unless ``cache`` is given)."""
        return {
            "username": self.cfg.username,
            "password": self._password,
            "port": self.cfg.port,
            "auth_protocol": self.cfg.auth,
            "require_signing": self.cfg.require_signing,
            "encrypt": True if self.cfg.encrypt else None,
            "connection_timeout": self.cfg.timeout_s,
            "connection_cache": self._cache if cache is None else cache,
        }

    @staticmethod
    def drop_connections(cache: dict[str, Any]) -> None:
        """Close every connection of ``cache`` without waiting for the server (it may be gone)."""
        for key in list(cache):
            conn = cache.pop(key, None)
            if conn is None:
                continue
            try:
                conn.disconnect(close=False)
            except Exception as e:  # noqa: BLE001 - a dead connection may fail in any way
                log.debug("dropping SMB connection %s: %s", key, e)

    def _call(self, what: str, fn: Callable[[dict[str, Any]], T], *, fail_fast: bool = False) -> T:
        """Run ``fn(session_kwargs)``; on a connection-level error drop the pooled connection and
        retry once. Raises :class:`SourceUnavailableError` when that fails too (or on bad
        credentials); any other exception (file-level ``SMBOSError``…) propagates."""
        if fail_fast and time.monotonic() < self._down_until:
            raise SourceUnavailableError(f"source {self.source_id}: {self.unc} unreachable (recent failure): {what}")
        for attempt in (0, 1):
            try:
                result = fn(self.session_kwargs())
                self._down_until = 0.0
                return result
            except Exception as e:
                if is_auth_error(e):
                    raise SourceUnavailableError(
                        f"source {self.source_id}: authentication to {self.unc} failed: {e}"
                    ) from None
                if not is_connection_error(e):
                    raise
                with self._cache_lock:
                    self.drop_connections(self._cache)
                if attempt:
                    self._down_until = time.monotonic() + FAIL_FAST_S
                    raise SourceUnavailableError(
                        f"source {self.source_id}: {self.unc} unreachable ({what}): {type(e).__name__}: {e}"
                    ) from None
                log.info("source %s: %s: connection lost (%s), reconnecting", self.source_id, what, e)
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close this connector's SMB connections."""
        with self._cache_lock:
            self.drop_connections(self._cache)

    def unc_of(self, rel_path: str) -> str:
        """``"CLIENTS/x.docx"`` → ``\\\\server\\share\\CLIENTS\\x.docx`` (``""`` → the share)."""
        rel = rel_path.strip("/")
        return self.unc + ("\\" + rel.replace("/", "\\") if rel else "")

    def _remember(self, rel: str, wire: str) -> None:
        if rel != wire:
            self._wire[rel] = wire
        else:
            self._wire.pop(rel, None)

    def _wire_of(self, rel: str, kw: dict[str, Any]) -> str:
        """The server's spelling of the NFC relative path ``rel``: remembered from a listing, else
        found folder by folder among the entries whose NFC form matches (the name as given when
        there is none: the caller then gets the server's not-found)."""
        if rel in self._wire or rel.isascii():
            return self._wire.get(rel, rel)
        parent, _, name = rel.rpartition("/")
        wire_parent = self._wire_of(parent, kw) if parent else ""
        try:
            entries = list_dir(self.unc_of(wire_parent), **kw)
        except Exception as e:
            if is_not_found(e) and not is_connection_error(e):
                return rel
            raise
        hits = [str(e.file_name) for e in entries if nfc(e.file_name) == name]
        if not hits:
            return f"{wire_parent}/{name}" if wire_parent else name
        wire = f"{wire_parent}/{hits[0]}" if wire_parent else hits[0]
        self._remember(rel, wire)
        return wire

    # ---------------------------------------------------------------- listing
    def _item(self, rel: str, info: Any, skip: str | None = None) -> SourceItem:
        fid = int(info.file_id or 0)
        native = f"fid:{fid:016x}" if fid else rel
        size = 0 if skip else int(info.end_of_file)
        return SourceItem(self.source_id, native, rel, size, info.last_write_time.timestamp(), skip=skip)

    def _link_reason(self, info: Any) -> str | None:
        """Why an entry is reported instead of read: ``symlink`` / ``junction`` for those reparse
        points, ``dfs link (dfs = false)``; ``None`` for a plain entry, a followed DFS link or
        another reparse tag (deduplicated or cloud files are plain files)."""
        if not info.file_attributes & FileAttributes.FILE_ATTRIBUTE_REPARSE_POINT:
            return None
        tag = int(info.ea_size)
        if tag == IO_REPARSE_TAG_SYMLINK:
            return "symlink"
        if tag == IO_REPARSE_TAG_MOUNT_POINT:
            return "junction"
        if tag == IO_REPARSE_TAG_DFS and not self.cfg.dfs:
            return "dfs link (dfs = false)"
        return None

    def _descend(self, info: Any) -> bool:
        """Whether a folder entry is walked: not a symlink/junction; a DFS link only with ``dfs``."""
        if not info.file_attributes & FileAttributes.FILE_ATTRIBUTE_REPARSE_POINT:
            return True
        tag = int(info.ea_size)
        if tag == IO_REPARSE_TAG_DFS:
            return self.cfg.dfs
        return tag not in (IO_REPARSE_TAG_SYMLINK, IO_REPARSE_TAG_MOUNT_POINT)

    def _walk(self, rel_dir: str, kw: dict[str, Any], out: list[SourceItem], unreachable: list[str]) -> None:
        """Append the indexable files under ``rel_dir`` (depth first, sorted by name) to ``out``.

        A folder that can't be listed raises :class:`SourceUnavailableError` naming it, except a
        plain folder that vanished meanwhile (skipped). A DFS link whose referral can't be followed
        (any error: target refused or down, referral to nowhere) is appended to ``unreachable`` and
        skipped, provided the share itself still answers (checked at once; if it does not, the
        error propagates as the connection error it is)."""
        stack = [(rel_dir, self._wire_of(rel_dir, kw) if rel_dir else "", False)]
        while stack:
            cur, wire_cur, is_link = stack.pop()
            try:
                entries = sorted(list_dir(self.unc_of(wire_cur), **kw), key=lambda e: e.file_name)
            except Exception as e:
                if is_link and self._share_answers(kw):
                    log.warning(
                        "source %s: DFS link %r unreachable (%s: %s): left as indexed",
                        self.source_id, cur, type(e).__name__, e,
                    )
                    unreachable.append(cur)
                    continue
                if is_connection_error(e) or is_auth_error(e):
                    raise
                if cur != rel_dir and not is_link and is_not_found(e):
                    continue  # removed between its parent's listing and its own
                what = "DFS link" if is_link else "folder"
                raise SourceUnavailableError(
                    f"source {self.source_id}: {what} {cur or '(share root)'!r} can't be listed "
                    f"({type(e).__name__}: {e}); nothing under it is purged"
                ) from None
            subdirs: list[tuple[str, str, bool]] = []
            for info in entries:
                name = nfc(info.file_name)
                rel = f"{cur}/{name}" if cur else name
                wire = f"{wire_cur}/{info.file_name}" if wire_cur else str(info.file_name)
                self._remember(rel, wire)
                reason = self._link_reason(info)
                if info.file_attributes & FileAttributes.FILE_ATTRIBUTE_DIRECTORY:
                    if self._descend(info):
                        link = bool(info.file_attributes & FileAttributes.FILE_ATTRIBUTE_REPARSE_POINT)
                        subdirs.append((rel, wire, link and int(info.ea_size) == IO_REPARSE_TAG_DFS))
                    elif reason is not None:
                        out.append(self._item(rel, info, skip=reason))
                    continue
                if is_ignored(name, self.ignore) or not path_selected(rel, self.cfg.include, self.cfg.exclude):
                    continue
                out.append(self._item(rel, info, skip=reason))
            stack.extend(reversed(subdirs))

    def _share_answers(self, kw: dict[str, Any]) -> bool:
        """Whether the share's root can still be read (after a DFS link failed: its target is at
        fault, not this server)."""
        try:
            smbclient.stat(self.unc, **kw)
        except Exception as e:  # noqa: BLE001 - any failure: the server itself is in doubt
            log.debug("source %s: share root check failed: %s", self.source_id, e)
            return False
        return True

    def list_items(self) -> Iterator[SourceItem]:
        """Every indexable file of the share, except those under a DFS link whose referral can't
        be followed: those links are in :attr:`unreachable` once this returns. Raises
        :class:`SourceUnavailableError` when the share, or any folder in it, can't be listed
        (the message names the folder)."""
        self._share = None  # share principals and nesting are re-resolved once per full pass
        self._nesting = {}

        def walk(kw: dict[str, Any]) -> tuple[list[SourceItem], list[str]]:
            out: list[SourceItem] = []
            unreachable: list[str] = []
            self._walk("", kw, out, unreachable)
            return out, unreachable

        items, unreachable = self._call("list the share", walk)
        self.unreachable = tuple(unreachable)
        return iter(items)

    def list_under(self, prefix: str) -> list[SourceItem]:
        """The indexable files below the folder ``prefix`` (``[]`` when it is not an existing
        folder). Used by the sync engine for folder events (an ACL change on a folder re-reads
        the ACLs of its subtree); files under an unfollowable DFS link are left out (the engine
        purges nothing it can't ``get_item``). Raises :class:`SourceUnavailableError`."""
        rel = nfc(prefix.strip("/"))
        if not rel:
            return list(self.list_items())

        def walk(kw: dict[str, Any]) -> list[SourceItem]:
            out: list[SourceItem] = []
            try:
                self._walk(rel, kw, out, [])
            except SourceUnavailableError as e:
                # the prefix itself missing or a file: nothing below it
                try:
                    info = self._stat(rel, kw)
                except Exception:  # noqa: BLE001 - re-raise the listing error below
                    info = None
                if info is None or not info.file_attributes & FileAttributes.FILE_ATTRIBUTE_DIRECTORY:
                    return []
                raise e
            return out

        return self._call(f"list {rel!r}", walk)

    def _stat(self, rel: str, kw: dict[str, Any]) -> Any:
        """The directory entry information of ``rel`` (via its parent's listing, so that size and
        mtime are exactly those of :meth:`list_items`), ``None`` if it does not exist."""
        parent, _, name = rel.rpartition("/")
        wire_parent = self._wire_of(parent, kw) if parent else ""
        try:
            found = list_dir(self.unc_of(wire_parent), name, **kw)
            if not found and not name.isascii():  # the server may spell it NFD: compare NFC forms
                found = list_dir(self.unc_of(wire_parent), **kw)
            hits = [e for e in found if nfc(e.file_name).casefold() == name.casefold()]
        except Exception as e:
            if is_not_found(e) and not is_connection_error(e):
                return None
            raise
        exact = [e for e in hits if nfc(e.file_name) == name]
        info = (exact or hits or [None])[0]
        if info is not None:
            wire = f"{wire_parent}/{info.file_name}" if wire_parent else str(info.file_name)
            self._remember(f"{parent}/{nfc(info.file_name)}" if parent else nfc(info.file_name), wire)
        return info

    def get_item(self, path: str) -> SourceItem | None:
        """The listing entry of one relative path; ``None`` when it is absent, a folder, ignored or
        excluded; a symlink or junction gives an item with ``skip`` set (never read). Raises :class:`SourceUnavailableError` when the share can't be reached."""
        rel = nfc(path.strip("/"))
        if not rel or any(p in ("", ".", "..") for p in rel.split("/")):
            return None
        name = rel.rsplit("/", 1)[-1]
        if is_ignored(name, self.ignore) or not path_selected(rel, self.cfg.include, self.cfg.exclude):
            return None

        def stat(kw: dict[str, Any]) -> SourceItem | None:
            info = self._stat(rel, kw)
            if info is None:
                return None
            reason = self._link_reason(info)
            if info.file_attributes & FileAttributes.FILE_ATTRIBUTE_DIRECTORY and (reason is None or self._descend(info)):
                return None
            parent = rel.rpartition("/")[0]
            real = nfc(info.file_name)
            return self._item(f"{parent}/{real}" if parent else real, info, skip=reason)

        try:
            return self._call(f"stat {rel!r}", stat)
        except SMBOSError as e:
            raise SourceUnavailableError(f"source {self.source_id}: {rel!r} can't be read: {e}") from None

    # ---------------------------------------------------------------- content and rights
    def fetch_content(self, item: SourceItem) -> bytes:
        """The file's bytes. Raises ``OSError`` (e.g. ``SMBOSError``: deleted, sharing
        violation, access denied) or :class:`SourceUnavailableError`."""

        def read(kw: dict[str, Any]) -> bytes:
            with smbclient.open_file(self.unc_of(self._wire_of(item.path, kw)), mode="rb", share_access="rwd", **kw) as fh:
                return fh.read()  # type: ignore[no-any-return]

        return self._call(f"read {item.path!r}", read, fail_fast=True)

    def security_descriptor(self, rel_path: str) -> SecurityDescriptor:
        """The parsed security descriptor of a file or folder (``""``: the share root), for
        ``ancre acl explain``. Raises :class:`AclError` when unreadable or malformed,
        :class:`SourceUnavailableError` when the share can't be reached."""
        rel = nfc(rel_path.strip("/"))
        try:
            raw = self._call(
                f"read the security of {rel!r}",
                lambda kw: read_security_descriptor(self.unc_of(self._wire_of(rel, kw)), **kw),
            )
        except SMBOSError as e:
            if is_not_found(e):
                raise AclError(f"{rel!r} does not exist on {self.unc_root}") from None
            if e.ntstatus == NtStatus.STATUS_ACCESS_DENIED:
                raise AclError(f"access denied on READ_CONTROL for {rel!r} (the service account can't read its ACL)") from None
            raise AclError(f"{rel!r}: {e}") from None
        return parse_security_descriptor(raw)

    def fetch_acl(self, item: SourceItem) -> Acl:
        """Who may read the file: NTFS DACL ∩ share permissions. An unreadable or malformed
        descriptor gives ``Acl.nobody(reason)``; a server that can't be reached raises
        :class:`SourceUnavailableError` (the pass stops as suspect instead of revoking rights)."""
        try:
            return self._acl_at(item.path)
        except _Gone as e:
            return Acl.nobody(f"acl_unreadable: {e}")

    def _acl_at(self, rel: str) -> Acl:
        """:meth:`fetch_acl` of a relative path; raises :class:`_Gone` when it does not exist."""
        try:
            raw = self._call(
                f"read the security of {rel!r}",
                lambda kw: read_security_descriptor(self.unc_of(self._wire_of(rel, kw)), **kw),
                fail_fast=True,
            )
        except SourceUnavailableError:
            raise
        except SMBOSError as e:
            if e.ntstatus == NtStatus.STATUS_ACCESS_DENIED:
                return Acl.nobody("acl_unreadable: access denied on READ_CONTROL")
            if is_not_found(e):
                raise _Gone(str(e)) from None
            return Acl.nobody(f"acl_unreadable: {e}")
        except Exception as e:  # noqa: BLE001 - whatever went wrong, fail closed
            return Acl.nobody(f"acl_unreadable: {type(e).__name__}: {e}")
        return self._with_share(acl_from_descriptor(raw))

    def read_acls(self, paths: Sequence[str]) -> Mapping[str, Acl]:
        """The current ACL of each relative path, as :meth:`fetch_acl` computes it (one compound
        CREATE + QUERY_INFO + CLOSE per path, NTFS DACL ∩ share permissions), for the query
        core's live check (see :meth:`ancre.connectors.base.Connector.read_acls`). A path the
        server no longer has is left out. Raises :class:`SourceUnavailableError` when the share
        can't be reached (at once for :data:`FAIL_FAST_S` seconds after a failed reconnection).
        Share principals and group nesting are re-resolved at most every
        :data:`SHARE_REFRESH_S` seconds. Thread-safe: concurrent batches share one session."""
        with self._session_lock:
            now = time.monotonic()
            if now - self._share_at > SHARE_REFRESH_S:
                self._share, self._nesting, self._share_at = None, {}, now
            # one session for the concurrent batches (smbclient's pool is not safe against two
            # threads registering the same server at once)
            self._call("connect", lambda kw: smbclient.register_session(self.cfg.server or "", **kw), fail_fast=True)
        out: dict[str, Acl] = {}
        for path in paths:
            try:
                out[path] = self._acl_at(nfc(path.strip("/")))
            except _Gone:
                continue
        return out

    def acl_of_descriptor(self, sd: SecurityDescriptor | None, reason: str | None = None) -> Acl:
        """``read_acl(sd)`` ∩ the share permissions (what :meth:`fetch_acl` computes)."""
        return self._with_share(read_acl(sd, unreadable_reason=reason))

    # ---------------------------------------------------------------- share permissions
    def share_principals(self) -> tuple[frozenset[str] | None, frozenset[str]]:
        """``(share_allow, share_deny)`` as ``sid:`` principals (``share_allow`` ``None`` when not
        configured). Raises :class:`AclError` for a name the directory does not know."""
        if self._share is None:
            allow = frozenset(self._resolve(n, "share_allow") for n in self.cfg.share_allow) if self.cfg.share_allow else None
            deny = frozenset(self._resolve(n, "share_deny") for n in self.cfg.share_deny)
            self._share = (allow, deny)
        return self._share

    def _resolve(self, name: str, key: str) -> str:
        if name.startswith("sid:"):
            return name
        if self.directory is None:
            raise AclError(f"sources.{self.source_id}.{key}: {name!r} needs a directory to resolve")
        sid = self.directory.sid_of(name)
        if sid is None:
            raise AclError(f"sources.{self.source_id}.{key}: {name!r} is not known to the directory")
        return f"sid:{sid}"

    def _nested(self, member: str, group: str) -> bool:
        key = (member, group)
        if key not in self._nesting:
            d: Any = self.directory
            d = getattr(d, "inner", d)  # a CachedDirectory's directory
            check = getattr(d, "is_nested", None)
            try:
                self._nesting[key] = bool(check(member, group)) if callable(check) else False
            except DirectoryError as e:
                log.warning("source %s: nesting %s in %s unknown (%s): not counted", self.source_id, member, group, e)
                return False  # not cached: asked again next time
        return self._nesting[key]

    def _with_share(self, acl: Acl) -> Acl:
        if not self.cfg.share_allow and not self.cfg.share_deny:
            return acl
        try:
            allow, deny = self.share_principals()
        except (AclError, DirectoryError) as e:
            return Acl.nobody(f"acl_unreadable: share permissions: {e}")
        return intersect_share(acl, allow, deny, self._nested)

    # ---------------------------------------------------------------- placement
    def location(self, item: SourceItem) -> str:
        """UNC folder of the item under ``unc_root``, with a trailing backslash."""
        return unc_folder(self.unc_root, item.path)

    # ---------------------------------------------------------------- changes
    def watch(self, on_change: ChangeCallback, stop: threading.Event) -> None:
        """Block until ``stop`` is set, reporting changes from SMB2 CHANGE_NOTIFY (recursive, on
        its own session): see :class:`ancre.connectors.smb_notify.ShareWatcher`."""
        from ancre.connectors.smb_notify import ShareWatcher

        ShareWatcher(self, on_change, stop).run()

    # ---------------------------------------------------------------- ancre check
    def check(self) -> SourceCheck:
        """``ancre check`` of the share: list its root, read the root's security descriptor and
        reduce it to a usable ACL (share permissions applied). Never raises."""
        where = self.unc_of("")
        try:
            entries = list_dir(where, **self.session_kwargs())
        except Exception as e:  # noqa: BLE001 - a check reports, it does not crash
            fix = (
                f"check sources.{self.source_id}.username and its password (password / password_env)"
                if is_auth_error(e) else f"check sources.{self.source_id}.server / share / port and that the server answers"
            )
            return SourceCheck(False, f"{where}: can't list the share root: {type(e).__name__}: {e}", fix)
        try:
            sd = self.security_descriptor("")
        except AclError as e:
            return SourceCheck(
                False, f"{where}: {len(entries)} entries; the root's security descriptor: {e}",
                "the service account needs READ_CONTROL (read permissions) on the whole share",
            )
        acl = self.acl_of_descriptor(sd)
        issue = acl_problem(acl)
        if issue is not None:
            return SourceCheck(
                False, f"{where}: the root's ACL can't be used: {issue}",
                f"check sources.{self.source_id}.share_allow / share_deny and the directory",
            )
        return SourceCheck(True, f"{where}: {len(entries)} entries at the root; its DACL read ({len(sd.dacl or ())} ACEs)")


def build(cfg: SourceSettings, ctx: SourceContext) -> Connector:
    """The :class:`SmbConnector` of a ``kind = "smb"`` source; the directory (share_allow /
    share_deny names, group nesting over LDAP) is built only when share permissions are set.
    Raises :class:`ConfigError` when ``cfg`` is not an :class:`SmbSourceConfig` or its password
    variable is unset."""
    if not isinstance(cfg, SmbSourceConfig):
        raise ConfigError(f"sources.{cfg.id}: not an smb source")
    directory = ctx.directory() if (cfg.share_allow or cfg.share_deny) else None
    return SmbConnector(cfg, directory=directory, ignore=ctx.ignore)


KIND = SourceKind("smb", SmbSourceConfig, build)
"""The ``smb`` source kind (:data:`ancre.connectors.registry.REGISTRY`)."""


__all__ = [
    "KIND",
    "SmbConnector",
    "SmbSourceConfig",
    "intersect_share",
    "is_auth_error",
    "is_connection_error",
    "is_not_found",
    "list_dir",
    "read_security_descriptor",
]
