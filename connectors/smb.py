"""SMB connector: a Windows (or Samba) share read with smbprotocol, NT ACLs from the server.

- **Listing** walks the share with :func:`list_dir` (FILE_ID_FULL_DIRECTORY_INFORMATION): each
  file gives its FileId (the server's stable file id, ``native_id = "fid:<16 hex>"``; the relative
  path when the server returns 0), its size (EndOfFile, bytes) and mtime (LastWriteTime, epoch
  seconds). Ignore rules, include/exclude globs and NFC paths as in the folder connector. Symbolic
  links and junctions (reparse points) are never followed: each is listed as an item with
  ``skip`` set (``symlink`` / ``junction``: status ``skipped`` in ``ancre status``), as in the folder
  connector.
- **DFS links** (a link is never a way around an ACL): each link met is asked for its
  referral (FSCTL_DFS_GET_REFERRALS on ``IPC$``, :func:`dfs_referral`) and followed (by
  smbclient) only when every target lies inside the source — the same share on the same server
  (:func:`dfs_target_inside`: same name, or names resolving to a common address). A link to
  another share or server, a loop, or a link whose referral can't be read is never followed: it
  is listed as a skipped item (``dfs link outside the share (\\\\srv\\share\\path)``, ``dfs link
  loop (…)``, ``dfs link referral unreadable (…)``), and a path at or under it gives no item, no
  ACL and no content (``get_item``, ``list_under``, ``read_acls``, ``fetch_*``: on a DFS root
  share, one referral request per path unless its folder was walked by the last listing; a share
  without the DFS capability needs none).
  ``dfs = false`` follows none (``skipped: dfs link (dfs = false)``). An inside link that can't
  be followed (target folder gone, server down) while the share itself still answers is
  recorded in :attr:`SmbConnector.unreachable` and skipped: the sync engine keeps what it
  indexed under it.
- **Rights**, fetched lazily per file: one compound CREATE(READ_CONTROL) + QUERY_INFO(security:
  OWNER|GROUP|DACL, [MS-SMB2] 2.2.37) + CLOSE, parsed by :mod:`ancre.acl.sd_parse` and walked by
  the ACL engine for FILE_GENERIC_READ with the server's network-logon token
  (:class:`~ancre.acl.token.TokenRules`: its local groups and domains read over LSA/SAMR, or
  configured with ``local_groups``); the parent folder's descriptor too when the file's own DACL
  does not decide FILE_READ_ATTRIBUTES like the other bits; then joined with the share's own
  security descriptor (SRVSVC NetShareGetInfo 502, or ``share_allow`` / ``share_deny``), walked
  with the same token (:mod:`ancre.acl.share`). Both are re-read once per pass, and every
  :data:`SHARE_REFRESH_S` seconds for the live check (:mod:`ancre.connectors.smb_rpc`).
  Unreadable (ACCESS_DENIED on READ_CONTROL, malformed, server gone, share descriptor withheld) →
  ``Acl.nobody(reason)``.
- **Resilience**: every call runs on a pooled session; a connection-level failure (socket closed,
  refused reconnection, expired or deleted session, ...) drops the pooled connection and retries
  the call once on a new one; a second failure raises :class:`SourceUnavailableError` (never an
  empty or partial listing: a folder that can't be listed fails the whole listing, naming it, so
  the sync engine purges nothing; only an inside DFS link that can't be followed is left out,
  see above).
- **Changes**: :meth:`SmbConnector.watch` — SMB2 CHANGE_NOTIFY on the share root with
  WATCH_TREE, see :mod:`ancre.connectors.smb_notify`.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import smbclient
from smbclient._io import SMBDirectoryIO, SMBFileTransaction, SMBRawIO
from smbclient._os import SMBDirEntryInformation
from smbprotocol import MAX_PAYLOAD_SIZE
from smbprotocol.dfs import DFSReferralRequest, DFSReferralResponse, DFSServerTypes
from smbprotocol.exceptions import (
    SMBAuthenticationError,
    SMBConnectionClosed,
    SMBException,
    SMBOSError,
    SMBResponseException,
)
from smbprotocol.file_info import FileAttributes, FileInformationClass, InfoType
from smbprotocol.header import NtStatus
from smbprotocol.ioctl import CtlCode, IOCTLFlags, SMB2IOCTLRequest, SMB2IOCTLResponse
from smbprotocol.open import FilePipePrinterAccessMask, SMB2QueryInfoRequest, SMB2QueryInfoResponse
from smbprotocol.tree import TreeConnect

from ancre.acl.directory import Directory, directory_domain_sid
from ancre.acl.engine import (
    FILE_READ_ATTRIBUTES,
    READ_ACCESS,
    ReadRights,
    SecurityDescriptor,
    acl_problem,
    compile_read,
)
from ancre.acl.explain import AclTrace, ShareLayer, canonical_path
from ancre.acl.sd_parse import parse_security_descriptor
from ancre.acl.share import configured_share_descriptor, share_rights
from ancre.acl.token import BUILTIN_NAMES, WELL_KNOWN_SIDS, LocalGroups, TokenRules
from ancre.connectors.base import (
    ChangeCallback,
    CollectionFromConfig,
    Connector,
    SourceCheck,
    SourceContext,
    SourceKind,
)
from ancre.connectors.folder import is_ignored, path_selected, unc_folder
from ancre.connectors.smb_rpc import RpcError, RpcTarget, ServerAccounts, server_accounts, share_descriptor
from ancre.errors import AclError, ConfigError, DirectoryError, SourceUnavailableError
from ancre.models import Acl, SourceItem, nfc
from ancre.settings import resolve_secret
from ancre.settings.sources import SmbSourceConfig

log = logging.getLogger("ancre.connectors.smb")

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
"""The live ACL check (:meth:`SmbConnector.read_acls`) re-reads the share permissions and the
file server's local groups at most this often, in seconds (a sync pass does it once per pass)."""


class _Gone(Exception):
    """The path does not exist on the share (any more)."""


class _Blocked(_Gone):
    """The path lies under (or is) a DFS link that is not followed: no item, no ACL, no content."""


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
MAX_DFS_HOPS = 8
"""Links followed one after the other (a link whose target holds another link) before a path is
refused as a chain too long."""


@dataclass(frozen=True)
class DfsTarget:
    """One target of a DFS referral: ``\\\\server\\share\\path`` ([MS-DFSC] 2.2.5.3, the
    NetworkAddress of a referral entry). ``path`` is backslash-separated, ``""`` for the share root."""

    server: str
    share: str
    path: str = ""

    @classmethod
    def parse(cls, network_address: str) -> DfsTarget:
        """``"\\srv\\share\\a\\b"`` (one or two leading backslashes) → ``DfsTarget("srv",
        "share", "a\\b")``. Raises ``ValueError`` when the server or share is missing."""
        parts = [p for p in network_address.split("\\") if p]
        if len(parts) < 2:
            raise ValueError(f"DFS target {network_address!r} names no server and share")
        return cls(parts[0], parts[1], "\\".join(parts[2:]))

    @property
    def unc(self) -> str:
        """``\\\\srv\\share\\a\\b``, as reported in skip reasons."""
        return "\\\\" + "\\".join(p for p in (self.server, self.share, self.path) if p)

    @property
    def rel(self) -> str:
        """The target path as a relative path of its share (``/``-separated, NFC)."""
        return nfc(self.path.replace("\\", "/").strip("/"))


def host_addresses(host: str) -> frozenset[str]:
    """The addresses ``host`` resolves to (``socket.getaddrinfo``, any family). Raises ``OSError``
    (``socket.gaierror``) or ``UnicodeError`` when it can't be resolved."""
    return frozenset(str(info[4][0]) for info in socket.getaddrinfo(host, None))


def _ascii_lower(text: str) -> str:
    # names compared without Unicode case folding (a lookalike never matches; a miss fails closed)
    return text.translate({c: c + 32 for c in range(ord("A"), ord("Z") + 1)})


def dfs_target_inside(
    server: str,
    share: str,
    target: DfsTarget,
    resolve: Callable[[str], Iterable[str]] = host_addresses,
) -> bool:
    """Whether a DFS referral ``target`` lies inside the source ``\\\\server\\share`` (the rule:
    a link is never a way around an ACL, so a link is followed only inside the source's root).

    Inside = the same share name (compared case-insensitively, ASCII only: SMB share names are
    case-insensitive, [MS-SMB2] 3.3.5.7) on the same server: the same name (ASCII
    case-insensitive), or names that ``resolve`` (host → addresses; by default
    :func:`host_addresses`) maps to at least one common address (``localhost`` and
    ``127.0.0.1``). A name that can't be resolved (any exception) counts as another server:
    outside (fail closed). Pure apart from ``resolve``."""
    if _ascii_lower(target.share) != _ascii_lower(share):
        return False
    if _ascii_lower(target.server) == _ascii_lower(server):
        return True
    try:
        ours = frozenset(resolve(server))
        theirs = frozenset(resolve(target.server))
    except Exception as e:  # noqa: BLE001 - any resolution failure: another server
        log.debug("DFS target %s: %s does not resolve (%s): outside", target.unc, target.server, e)
        return False
    return bool(ours & theirs)


def dfs_referral(tree: TreeConnect, path: str) -> DFSReferralResponse:
    """Ask the server for the DFS referral of ``path`` (``\\server\\share\\a\\b``, one leading
    backslash): FSCTL_DFS_GET_REFERRALS ([MS-SMB2] 2.2.31, [MS-DFSC] 2.2.2 REQ_GET_DFS_REFERRAL)
    sent on ``tree`` (the server's ``IPC$``). The answer's ``path_consumed`` (bytes, UTF-16) and
    referral entries (each with ``dfs_path`` and ``network_address``: the target) are those of
    the link the path lies under. Raises ``SMBResponseException`` (STATUS_OBJECT_PATH_NOT_FOUND
    / STATUS_NOT_FOUND: no link on that path) or connection errors."""
    request = DFSReferralRequest()
    request["request_file_name"] = path
    ioctl = SMB2IOCTLRequest()
    ioctl["ctl_code"] = CtlCode.FSCTL_DFS_GET_REFERRALS
    ioctl["file_id"] = b"\xff" * 16
    ioctl["max_output_response"] = 56 * 1024
    ioctl["flags"] = IOCTLFlags.SMB2_0_IOCTL_IS_FSCTL
    ioctl["buffer"] = request
    connection = tree.session.connection
    sent = connection.send(ioctl, sid=tree.session.session_id, tid=tree.tree_connect_id)
    answer = SMB2IOCTLResponse()
    answer.unpack(connection.receive(sent)["data"].get_value())
    response = DFSReferralResponse()
    response.unpack(answer["buffer"].get_value())
    return response


@dataclass(frozen=True)
class _DfsLink:
    """The DFS link a path lies under: its path in the share (``/``-separated) and its targets."""

    rel: str
    targets: tuple[DfsTarget, ...]


@dataclass(frozen=True)
class _Reach:
    """Where a relative path leads once the DFS links on it are resolved: ``real`` (its path in
    the source's own share), or ``blocked`` (the skip reason of the link that is not followed)."""

    real: str
    blocked: str | None = None


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
        transaction += (request, receive)  # noqa: PLW2901 - smbprotocol's idiom: += queues a request on the transaction
    return transaction.results[0]


# --------------------------------------------------------------------------------------------------
ShareLayerInfo = tuple[str, SecurityDescriptor | None, str | None, ReadRights]
"""``(description, descriptor, problem, rights)`` of a source's share permissions."""


@dataclass
class _ServerRights:
    """One source's token rules and share permissions as last read (``at``: monotonic seconds);
    ``accounts`` holds the SAMR session the local groups' members are read over."""

    at: float
    rules: TokenRules
    accounts: ServerAccounts | None
    share_layer: ShareLayerInfo | None = None


_SERVER_RIGHTS: dict[tuple[object, ...], _ServerRights] = {}
"""Per source (:meth:`SmbConnector._rights_key`), shared by the connectors of one process."""
_SERVER_LOCK = threading.Lock()
_RETIRED: list[tuple[float, ServerAccounts]] = []
"""Replaced entries' SAMR sessions, closed a while later (a walk may still be reading members)."""


def _retire(entry: _ServerRights | None) -> None:
    """Queue ``entry``'s session for closing; close those retired more than twice
    :data:`SHARE_REFRESH_S` ago. Call with :data:`_SERVER_LOCK` held."""
    now = time.monotonic()
    if entry is not None and entry.accounts is not None:
        _RETIRED.append((now, entry.accounts))
    while _RETIRED and now - _RETIRED[0][0] > 2 * SHARE_REFRESH_S:
        _RETIRED.pop(0)[1].close()


class SmbConnector(CollectionFromConfig[SmbSourceConfig]):
    """A :class:`~ancre.connectors.base.Connector` over one SMB share; also
    :class:`~ancre.connectors.base.Watchable`, :class:`~ancre.connectors.base.SubtreeListing`,
    :class:`~ancre.connectors.base.ReportsUnreachable`, :class:`~ancre.connectors.base.Closeable`
    and :class:`~ancre.connectors.base.Checkable`.

    ``cfg``: a ``kind = "smb"`` source (server, port, share, username, password or password_env,
    auth, require_signing, encrypt, dfs, timeout_s, share_allow/share_deny, local_groups,
    read_local_groups, server_sid, this_organization, include/exclude, unc_root for citations —
    default ``\\\\server\\share``). ``directory`` resolves share_allow/share_deny/local_groups
    names and gives the users' domain SID. Raises :class:`ConfigError` on a missing server/share or password variable.
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
        self._password = resolve_secret(cfg.password, f"sources.{cfg.id}.password")
        self._cache: dict[str, Any] = {}
        self._cache_lock = threading.Lock()
        self._addr_cache: dict[str, frozenset[str]] = {}
        self._listed_dirs: dict[str, str] = {}
        """Folders (relative paths as listed) the last listing walked, each with the path it leads
        to in the share: their DFS links were checked by that listing, so :meth:`fetch_acl` and
        :meth:`fetch_content` of its items need no referral request of their own."""
        self._down_until = 0.0
        self._share: tuple[frozenset[str] | None, frozenset[str]] | None = None

        self._share_at = time.monotonic()
        self._rights_lock = threading.Lock()
        self._parents: dict[str, tuple[float, SecurityDescriptor | None]] = {}
        self._session_lock = threading.Lock()
        self.watch_ready = threading.Event()
        """Set while :meth:`watch` has its CHANGE_NOTIFY requests armed on the server."""
        self._wire: dict[str, str] = {}
        """NFC relative path → the path as the server spells it, for the paths whose names are not
        NFC on the share (written NFD by a macOS client): listings and stats fill it."""
        self.unreachable: tuple[str, ...] = ()
        """Relative paths (NFC, ``/``-separated) of the DFS links inside the share whose referral
        the last :meth:`list_items` could not follow: nothing of the listing lies under them, and what was
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

    @staticmethod
    def _is_dfs(info: Any) -> bool:
        reparse = bool(info.file_attributes & FileAttributes.FILE_ATTRIBUTE_REPARSE_POINT)
        return reparse and int(info.ea_size) == IO_REPARSE_TAG_DFS

    # ---------------------------------------------------------------- DFS links
    def _tree(self, share: str, kw: dict[str, Any]) -> TreeConnect:
        """The pooled tree connect of ``\\\\server\\<share>`` on this source's session (made if
        needed). Raises connection errors."""
        server = self.cfg.server or ""
        session = smbclient.register_session(server, **kw)
        name = f"\\\\{server}\\{share}"
        tree = next((t for t in list(session.tree_connect_table.values()) if t.share_name == name), None)
        if tree is None:
            tree = TreeConnect(session, name)
            tree.connect()
        return tree

    def _referral(self, real: str, kw: dict[str, Any]) -> _DfsLink | None:
        """The DFS link the share path ``real`` lies under (or is), from the server's referral
        (:func:`dfs_referral` on ``IPC$``); ``None`` when the server says no link covers it.
        Raises :class:`_Blocked` when the referral can't be read or makes no sense (fail
        closed), connection errors as they are."""
        base = f"\\{self.cfg.server}\\{self.cfg.share}"
        request = base + ("\\" + real.replace("/", "\\") if real else "")
        try:
            response = dfs_referral(self._tree("IPC$", kw), request)
        except Exception as e:
            if is_connection_error(e) or is_auth_error(e):
                raise
            if is_not_found(e):
                return None
            raise _Blocked(f"dfs link referral unreadable ({type(e).__name__}: {e})") from None
        try:
            entries = list(response["referral_entries"].get_value())
            if not entries:
                raise ValueError("no referral entry")
            if all(e["server_type"].get_value() & DFSServerTypes.ROOT_TARGETS for e in entries):
                return None  # the share's own root referral: no link on the path
            dfs_path = getattr(entries[0], "dfs_path", None)
            if dfs_path is None:  # a V1 entry: PathConsumed (bytes of UTF-16) tells the link's extent
                dfs_path = request[: int(response["path_consumed"].get_value()) // 2]
            link = "/".join([p for p in str(dfs_path).split("\\") if p][2:])
            targets = tuple(DfsTarget.parse(str(e.network_address)) for e in entries)
        except Exception as e:  # noqa: BLE001 - a referral we can't read: not followed
            raise _Blocked(f"dfs link referral unreadable ({type(e).__name__}: {e})") from None
        if not link:
            return None
        return _DfsLink(nfc(link), targets)

    def _link_target(self, link: _DfsLink) -> tuple[str | None, str]:
        """``(reason, target)`` for a DFS link met on the way: ``reason`` ``None`` and the
        target's path in this share when every referral target is inside the share
        (:func:`dfs_target_inside`; a link with several targets is followed only if all are, since
        smbclient tries them in turn); otherwise the skip reason naming the first target outside."""
        if not self.cfg.dfs:
            return "dfs link (dfs = false)", ""
        server, share = self.cfg.server or "", self.cfg.share or ""
        for target in link.targets:
            if not dfs_target_inside(server, share, target, self._addresses):
                return f"dfs link outside the share ({target.unc})", ""
        target = link.targets[0]
        mine, theirs = link.rel.casefold(), target.rel.casefold()
        if theirs in ("", mine) or mine.startswith(theirs + "/") or theirs.startswith(mine + "/"):
            return f"dfs link loop ({target.unc})", ""
        return None, target.rel

    def _addresses(self, host: str) -> frozenset[str]:
        with self._cache_lock:
            hit = self._addr_cache.get(host)
        if hit is None:
            hit = host_addresses(host)
            with self._cache_lock:
                self._addr_cache[host] = hit
        return hit

    def _reach(self, rel: str, kw: dict[str, Any]) -> _Reach:
        """Resolve the DFS links on the relative path ``rel`` as smbclient would follow them: on a
        share that is not a DFS root (no SMB2_SHARE_CAP_DFS) nothing redirects; otherwise one
        referral request per link crossed. A link that is not followed (outside the share,
        ``dfs = false``, loop, unreadable referral, chain over :data:`MAX_DFS_HOPS`) gives
        ``blocked``. Raises connection errors."""
        if not rel or not self._tree(self.cfg.share or "", kw).is_dfs_share:
            return _Reach(rel)
        real = rel
        for _ in range(MAX_DFS_HOPS):
            try:
                link = self._referral(real, kw)
            except _Blocked as e:
                return _Reach(real, str(e))
            if link is None:
                return _Reach(real)
            depth = link.rel.count("/") + 1
            parts = real.split("/")
            if depth > len(parts) or "/".join(parts[:depth]).casefold() != link.rel.casefold():
                return _Reach(real, f"dfs link referral unreadable (answered for {link.rel!r})")
            rest = parts[depth:]
            reason, target = self._link_target(link)
            if reason is not None:
                return _Reach(real, reason)
            real = "/".join(p for p in (target, *rest) if p)
        return _Reach(real, f"dfs link chain longer than {MAX_DFS_HOPS} links")

    def _guard(self, rel: str, kw: dict[str, Any], *, listed: bool = False) -> None:
        """Raise :class:`_Blocked` when ``rel`` is, or lies under, a DFS link that is not followed.
        ``listed``: ``rel`` is an item of this connector's listing; when its folder was walked by
        the last listing (whose links were checked then), no referral is asked again."""
        if listed:
            with self._cache_lock:
                if rel.rpartition("/")[0] in self._listed_dirs:
                    return
        reach = self._reach(rel, kw)
        if reach.blocked is not None:
            raise _Blocked(f"{rel!r}: {reach.blocked}")

    def _descend(self, info: Any) -> bool:
        """Whether a folder entry is walked: not a symlink/junction; a DFS link only with ``dfs``."""
        if not info.file_attributes & FileAttributes.FILE_ATTRIBUTE_REPARSE_POINT:
            return True
        tag = int(info.ea_size)
        if tag == IO_REPARSE_TAG_DFS:
            return self.cfg.dfs
        return tag not in (IO_REPARSE_TAG_SYMLINK, IO_REPARSE_TAG_MOUNT_POINT)

    def _walk(
        self, rel_dir: str, kw: dict[str, Any], out: list[SourceItem], unreachable: list[str], real_dir: str | None = None
    ) -> None:
        """Append the indexable files under ``rel_dir`` (depth first, sorted by name) to ``out``;
        ``real_dir``: where ``rel_dir`` leads in the share once DFS links are followed (default
        ``rel_dir``).

        A folder that can't be listed raises :class:`SourceUnavailableError` naming it, except a
        plain folder that vanished meanwhile (skipped). A DFS link is followed only when its
        referral targets lie inside the share (:meth:`_dfs_entry`); any other is listed as a
        skipped item naming why. A followed link that can't be listed (any error: target refused or
        down, folder gone) is appended to ``unreachable`` and skipped, provided the share itself
        still answers (checked at once; if it does not, the error propagates as the connection
        error it is)."""
        # (path as listed, its spelling on the server (NFD names), path it leads to in the share,
        # through a link?, targets followed on the way)
        stack: list[tuple[str, str, str, bool, tuple[str, ...]]] = [
            (rel_dir, self._wire_of(rel_dir, kw) if rel_dir else "", rel_dir if real_dir is None else real_dir, False, ())
        ]
        while stack:
            cur, wire_cur, real, is_link, via = stack.pop()
            try:
                entries = sorted(list_dir(self.unc_of(wire_cur), **kw), key=lambda e: e.file_name)
                with self._cache_lock:
                    self._listed_dirs[cur] = real
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
            subdirs: list[tuple[str, str, str, bool, tuple[str, ...]]] = []
            for info in entries:
                name = nfc(info.file_name)
                rel = f"{cur}/{name}" if cur else name
                wire = f"{wire_cur}/{info.file_name}" if wire_cur else str(info.file_name)
                self._remember(rel, wire)
                child = f"{real}/{name}" if real else name
                if self._is_dfs(info) and self.cfg.dfs:
                    reason, target = self._dfs_entry(child, kw)
                    folded = target.casefold()
                    if reason is None and any(folded == v or v.startswith(folded + "/") for v in via):
                        reason = f"dfs link loop (leads back to {target!r})"
                    elif reason is None and len(via) >= MAX_DFS_HOPS:
                        reason = f"dfs link chain longer than {MAX_DFS_HOPS} links"
                    if reason is None:
                        subdirs.append((rel, wire, target, True, (*via, folded)))
                    else:
                        log.info("source %s: %r not followed: %s", self.source_id, rel, reason)
                        out.append(self._item(rel, info, skip=reason))
                    continue
                reason = self._link_reason(info)
                if info.file_attributes & FileAttributes.FILE_ATTRIBUTE_DIRECTORY:
                    if self._descend(info):
                        subdirs.append((rel, wire, child, False, via))
                    elif reason is not None:
                        out.append(self._item(rel, info, skip=reason))
                    continue
                if is_ignored(name, self.ignore) or not path_selected(rel, self.cfg.include, self.cfg.exclude):
                    continue
                out.append(self._item(rel, info, skip=reason))
            stack.extend(reversed(subdirs))

    def _dfs_entry(self, real: str, kw: dict[str, Any]) -> tuple[str | None, str]:
        """For a DFS link entry at the share path ``real``: ``(None, target path in the share)``
        when it is followed, else ``(skip reason, "")`` — outside the share, loop, or a referral
        that can't be read or does not answer for this very link (fail closed: not followed)."""
        if not self.cfg.dfs:
            return "dfs link (dfs = false)", ""
        try:
            link = self._referral(real, kw)
        except _Blocked as e:
            return str(e), ""
        if link is None or link.rel.casefold() != real.casefold():
            answered = "no link" if link is None else repr(link.rel)
            return f"dfs link referral unreadable (the server answered {answered})", ""
        return self._link_target(link)

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
        self._refresh_server_rights()  # share permissions and local groups re-read once per full pass
        with self._cache_lock:  # DFS targets are checked afresh too
            self._addr_cache, self._listed_dirs = {}, {}

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
        purges nothing it can't ``get_item``), and a ``prefix`` at or under a DFS link that is not
        followed gives ``[]``. Raises :class:`SourceUnavailableError`."""
        rel = nfc(prefix.strip("/"))
        if not rel:
            return list(self.list_items())

        def walk(kw: dict[str, Any]) -> list[SourceItem]:
            out: list[SourceItem] = []
            reach = self._reach(rel, kw)
            if reach.blocked is not None:
                return []  # under (or at) a DFS link that is not followed: nothing of it is listed
            try:
                self._walk(rel, kw, out, [], reach.real)
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
        excluded, or under a DFS link that is not followed; a symlink, a junction or a DFS link
        that is not followed gives an item with ``skip`` set (never read), as in the listing.
        Raises :class:`SourceUnavailableError` when the share can't be reached."""
        rel = nfc(path.strip("/"))
        if not rel or any(p in ("", ".", "..") for p in rel.split("/")):
            return None
        name = rel.rsplit("/", 1)[-1]
        if is_ignored(name, self.ignore) or not path_selected(rel, self.cfg.include, self.cfg.exclude):
            return None

        def stat(kw: dict[str, Any]) -> SourceItem | None:
            parent = rel.rpartition("/")[0]
            reach = self._reach(parent, kw)
            if reach.blocked is not None:
                return None  # under a DFS link that is not followed
            info = self._stat(rel, kw)
            if info is None:
                return None
            real = nfc(info.file_name)
            if self._is_dfs(info) and self.cfg.dfs:
                reason, _ = self._dfs_entry(f"{reach.real}/{real}" if reach.real else real, kw)
                if reason is None:
                    return None  # a followed link: a folder
                return self._item(f"{parent}/{real}" if parent else real, info, skip=reason)
            reason = self._link_reason(info)
            if info.file_attributes & FileAttributes.FILE_ATTRIBUTE_DIRECTORY and (reason is None or self._descend(info)):
                return None
            return self._item(f"{parent}/{real}" if parent else real, info, skip=reason)

        try:
            return self._call(f"stat {rel!r}", stat)
        except SMBOSError as e:
            raise SourceUnavailableError(f"source {self.source_id}: {rel!r} can't be read: {e}") from None

    # ---------------------------------------------------------------- content and rights
    def fetch_content(self, item: SourceItem) -> bytes:
        """The file's bytes. Raises ``OSError`` (e.g. ``SMBOSError``: deleted, sharing
        violation, access denied; ``PermissionError`` for a path under a DFS link that is not
        followed) or :class:`SourceUnavailableError`."""

        def read(kw: dict[str, Any]) -> bytes:
            self._guard(item.path, kw, listed=True)
            with smbclient.open_file(self.unc_of(self._wire_of(item.path, kw)), mode="rb", share_access="rwd", **kw) as fh:
                return fh.read()

        try:
            return self._call(f"read {item.path!r}", read, fail_fast=True)
        except _Blocked as e:
            raise PermissionError(f"source {self.source_id}: {e}") from None

    def security_descriptor(self, rel_path: str) -> SecurityDescriptor:
        """The parsed security descriptor of a file or folder (``""``: the share root), for
        ``ancre acl explain``. Raises :class:`AclError` when unreadable or malformed, or at or
        under a DFS link that is not followed,
        :class:`SourceUnavailableError` when the share can't be reached."""
        rel = nfc(rel_path.strip("/"))

        def read(kw: dict[str, Any]) -> bytes:
            self._guard(rel, kw)
            return read_security_descriptor(self.unc_of(self._wire_of(rel, kw)), **kw)

        try:
            raw = self._call(f"read the security of {rel!r}", read)
        except _Blocked as e:
            raise AclError(f"{e} on {self.unc_root}") from None
        except SMBOSError as e:
            if is_not_found(e):
                raise AclError(f"{rel!r} does not exist on {self.unc_root}") from None
            if e.ntstatus == NtStatus.STATUS_ACCESS_DENIED:
                raise AclError(f"access denied on READ_CONTROL for {rel!r} (the service account can't read its ACL)") from None
            raise AclError(f"{rel!r}: {e}") from None
        return parse_security_descriptor(raw)

    def fetch_acl(self, item: SourceItem) -> Acl:
        """Who may read the file: its DACL walked for FILE_GENERIC_READ with the server's token ∩
        the share permissions (:meth:`read_rights`). An unreadable or malformed descriptor gives
        ``Acl.nobody(reason)``; a server that can't be reached raises
        :class:`SourceUnavailableError` (the pass stops as suspect instead of revoking rights)."""
        try:
            return self._acl_at(item.path, listed=True)
        except _Gone as e:
            return Acl.nobody(f"acl_unreadable: {e}")

    def _acl_at(self, rel: str, *, listed: bool = False) -> Acl:
        """:meth:`fetch_acl` of a relative path (``listed``: see :meth:`_guard`); raises
        :class:`_Gone` when it does not exist or lies under a DFS link that is not followed
        (:class:`_Blocked`)."""
        return self.read_rights(rel, listed=listed).acl()

    def read_rights(self, rel: str, *, listed: bool = False) -> ReadRights:
        """The compiled read rights of a relative path (``""``: the share root): its descriptor
        (and its parent's, when FILE_READ_ATTRIBUTES depends on it) walked with
        :meth:`token_rules`, joined with :meth:`share_layer`. Raises :class:`_Gone` (absent, or
        under a DFS link that is not followed) and :class:`SourceUnavailableError`."""
        sd, reason = self._descriptor_at(rel, listed=listed)
        if sd is None:
            return ReadRights.nobody(f"acl_unreadable: {reason}")
        rules = self.token_rules()
        rights = compile_read(sd, rules=rules)
        if rel and rights.clauses and (
            compile_read(sd, rules=rules, desired=READ_ACCESS & ~FILE_READ_ATTRIBUTES).clauses != rights.clauses
        ):
            rights = compile_read(sd, rules=rules, parent=self._parent_descriptor(rel))
        return rights.both(self.share_layer()[3])

    def _descriptor_at(self, rel: str, *, listed: bool = False) -> tuple[SecurityDescriptor | None, str | None]:
        """The parsed descriptor of ``rel``, or ``(None, why)`` when it can't be read or parsed.
        Raises :class:`_Gone` and :class:`SourceUnavailableError`."""
        def read(kw: dict[str, Any]) -> bytes:
            self._guard(rel, kw, listed=listed)
            return read_security_descriptor(self.unc_of(self._wire_of(rel, kw)), **kw)

        try:
            raw = self._call(f"read the security of {rel!r}", read, fail_fast=True)
        except (SourceUnavailableError, _Gone):
            raise
        except SMBOSError as e:
            if e.ntstatus == NtStatus.STATUS_ACCESS_DENIED:
                return None, "access denied on READ_CONTROL"
            if is_not_found(e):
                raise _Gone(str(e)) from None
            return None, str(e)
        except Exception as e:  # noqa: BLE001 - whatever went wrong, fail closed
            return None, f"{type(e).__name__}: {e}"
        try:
            return parse_security_descriptor(raw), None
        except AclError as e:
            return None, str(e)

    PARENT_TTL_S = 5.0
    """A parent folder's descriptor (for FILE_READ_ATTRIBUTES) is reused this many seconds."""

    def _parent_descriptor(self, rel: str) -> SecurityDescriptor | None:
        """The descriptor of ``rel``'s parent folder, ``None`` when it can't be read (then it
        grants nothing: the safe side)."""
        parent = rel.rpartition("/")[0]
        now = time.monotonic()
        with self._rights_lock:
            hit = self._parents.get(parent)
        if hit is not None and now - hit[0] < self.PARENT_TTL_S:
            return hit[1]
        try:
            sd, _ = self._descriptor_at(parent)
        except _Gone:
            sd = None
        with self._rights_lock:
            if len(self._parents) > 4096:
                self._parents.clear()
            self._parents[parent] = (now, sd)
        return sd

    def read_acls(self, paths: Sequence[str]) -> Mapping[str, Acl]:
        """The current ACL of each relative path, as :meth:`fetch_acl` computes it (one compound
        CREATE + QUERY_INFO + CLOSE per path, NTFS DACL ∩ share permissions), for the query
        core's live check (see :meth:`ancre.connectors.base.Connector.read_acls`). A path the
        server no longer has, or one at or under a DFS link that is not followed, is left out
        (on a DFS root share, one referral request per path tells). Raises :class:`SourceUnavailableError` when the share
        can't be reached (at once for :data:`FAIL_FAST_S` seconds after a failed reconnection).
        The share permissions and the server's local groups are re-read at most every
        :data:`SHARE_REFRESH_S` seconds. Thread-safe: concurrent batches share one session."""
        with self._session_lock:
            now = time.monotonic()
            if now - self._share_at > SHARE_REFRESH_S:
                self._refresh_server_rights()
                with self._cache_lock:
                    self._addr_cache = {}  # DFS target names resolved afresh as well
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

    def acl_of_descriptor(
        self, sd: SecurityDescriptor | None, reason: str | None = None, parent: SecurityDescriptor | None = None
    ) -> Acl:
        """``sd`` walked with the server's token ∩ the share permissions (what :meth:`fetch_acl`
        computes, given the parent's descriptor)."""
        rules = self.token_rules()
        return compile_read(sd, rules=rules, parent=parent, unreadable_reason=reason).both(self.share_layer()[3]).acl()

    # ---------------------------------------------------------------- acl explain (AclExplainable)
    def explain_path(self, path: str) -> str:
        """See :meth:`ancre.connectors.base.AclExplainable.explain_path`: relative to the share, or a
        UNC path / URL under ``unc_root`` (default ``\\\\server\\share``)."""
        return canonical_path(path, unc_root=self.unc_root)

    def explain_acl(self, path: str) -> AclTrace:
        """See :meth:`ancre.connectors.base.AclExplainable.explain_acl`: the security descriptor
        read from the server now (``unreadable`` when absent, denied or malformed), its parent's,
        the server's token rules and the share permissions (read from the server, or configured).
        Raises :class:`SourceUnavailableError` when the share can't be reached."""
        description, share_sd, share_problem, _ = self.share_layer()
        share = ShareLayer(description, share_sd, share_problem)
        rules = self.token_rules()
        try:
            sd = self.security_descriptor(path)
        except AclError as e:
            return AclTrace(self.source_id, path, unreadable=str(e), share=share, rules=rules)
        parent = self._parent_descriptor(path) if path else None
        return AclTrace(self.source_id, path, descriptor=sd, share=share, rules=rules, parent=parent)

    # ---------------------------------------------------------------- the server's token and share permissions
    def _rpc_target(self) -> RpcTarget:
        return RpcTarget(
            self.cfg.server or "", self.cfg.port, self.cfg.username, self._password,
            kerberos=self.cfg.auth == "kerberos", timeout_s=self.cfg.timeout_s,
        )

    def _rights_key(self) -> tuple[object, ...]:
        """What the server's token rules and share permissions depend on: this source's server,
        share, account and rights settings, and its directory."""
        c = self.cfg
        groups = tuple(sorted((k, tuple(v)) for k, v in c.local_groups.items()))
        return ((c.server or "").lower(), c.port, (c.share or "").lower(), c.username, c.auth, c.share_allow,
                c.share_deny, groups, c.read_local_groups, c.server_sid, c.this_organization, id(self.directory))

    def _server_rights(self) -> _ServerRights:
        """The entry of :data:`_SERVER_RIGHTS` for this source, a fresh one when missing or older
        than :data:`SHARE_REFRESH_S` (connectors of one source in one process — a pass's and the
        live check's — share it)."""
        key = self._rights_key()
        with _SERVER_LOCK:
            entry = _SERVER_RIGHTS.get(key)
            if entry is not None and time.monotonic() - entry.at < SHARE_REFRESH_S:
                return entry
        rules, accounts = self._read_token_rules()
        entry = _ServerRights(time.monotonic(), rules, accounts)
        with _SERVER_LOCK:
            old = _SERVER_RIGHTS.get(key)
            _SERVER_RIGHTS[key] = entry
            _retire(old)
        return entry

    def _refresh_server_rights(self) -> None:
        """Forget the share permissions and the token rules: read again at next use."""
        with _SERVER_LOCK:
            _retire(_SERVER_RIGHTS.pop(self._rights_key(), None))
        with self._rights_lock:
            self._share = None
            self._parents = {}
            self._share_at = time.monotonic()

    def token_rules(self) -> TokenRules:
        """How the file server builds a session's token (:class:`~ancre.acl.token.TokenRules`):
        its account and primary domains (LSA) and local groups (SAMR), ``local_groups`` over
        them, ``this_organization``. Read once per pass (and every :data:`SHARE_REFRESH_S` s for
        the live check); when the server refuses, its local groups are undecided. Never raises."""
        return self._server_rights().rules

    def _read_token_rules(self) -> tuple[TokenRules, ServerAccounts | None]:
        primary: str | None = None
        try:
            primary = directory_domain_sid(self.directory)
        except DirectoryError as e:
            log.warning("source %s: the directory's domain SID can't be read: %s", self.source_id, e)
        account, groups, problem = self.cfg.server_sid, None, None
        found: ServerAccounts | None = None
        if self.cfg.read_local_groups:
            try:
                found = server_accounts(self._rpc_target())
                account, groups = found.account_domain, found.local_groups
                primary = found.primary_domain or primary
            except RpcError as e:
                problem = f"{e} (set sources.{self.source_id}.local_groups)"
                log.warning("source %s: the file server's local groups can't be read: %s", self.source_id, e)
        else:
            problem = f"not read (sources.{self.source_id}.read_local_groups = false)"
        if self.cfg.local_groups:
            try:
                stated = {self._local_group_sid(k): frozenset(self._member_sid(m, k) for m in v)
                          for k, v in self.cfg.local_groups.items()}
            except (AclError, DirectoryError) as e:
                return TokenRules.network(None, account_domain=account, primary_domain=primary,
                                          problem=f"sources.{self.source_id}.local_groups: {e}",
                                          this_organization=self.cfg.this_organization), found
            origin = f"sources.{self.source_id}.local_groups"
            groups = groups.merged(stated, origin) if groups is not None else LocalGroups(stated, origin=origin, complete=False)
        return TokenRules.network(groups, account_domain=account, primary_domain=primary, problem=problem,
                                  this_organization=self.cfg.this_organization), found

    def _local_group_sid(self, name: str) -> str:
        bare = name.removeprefix("sid:")
        if bare.upper().startswith("S-1-"):
            return "S" + bare[1:]
        short = bare.rpartition("\\")[2].casefold()
        for sid, builtin in BUILTIN_NAMES.items():
            if builtin.casefold() == short:
                return sid
        raise AclError(f"{name!r}: give a local group by SID, or a BUILTIN group by name")

    def _member_sid(self, name: str, group: str) -> str:
        bare = name.removeprefix("sid:")
        if bare.upper().startswith("S-1-"):
            return "S" + bare[1:]
        short = bare.rpartition("\\")[2].casefold()
        for sid, (known, _) in WELL_KNOWN_SIDS.items():
            if known.casefold() == short:
                return sid
        return self._resolve(name, f"local_groups.{group}")[4:]

    def share_layer(self) -> ShareLayerInfo:
        """``(description, descriptor, problem, rights)`` of the share permissions: the share's
        security descriptor read from the server (SRVSVC NetShareGetInfo 502), or stated by
        ``share_allow`` / ``share_deny``, compiled with :meth:`token_rules`; ``problem`` (and
        rights readable by nobody) when it can't be read. Cached like the token rules."""
        entry = self._server_rights()
        if entry.share_layer is not None:
            return entry.share_layer
        rules = entry.rules
        sd: SecurityDescriptor | None = None
        problem: str | None = None
        if self.cfg.share_allow or self.cfg.share_deny:
            description = (f"share permissions configured (share_allow={list(self.cfg.share_allow)} "
                           f"share_deny={list(self.cfg.share_deny)})")
            try:
                allow, deny = self.share_principals()
                sd = configured_share_descriptor(allow, deny)
            except (AclError, DirectoryError) as e:
                problem = str(e)
        else:
            description = f"share permissions of {self.unc} (NetShareGetInfo)"
            try:
                session = entry.accounts.session if entry.accounts is not None else None
                sd = parse_security_descriptor(share_descriptor(self._rpc_target(), self.cfg.share or "", session))
            except AclError as e:
                problem = f"{e} (or state them with sources.{self.source_id}.share_allow)"
        if problem is not None:
            log.warning("source %s: share permissions unreadable: %s", self.source_id, problem)
            rights = ReadRights.nobody(f"acl_unreadable: share permissions: {problem}")
        else:
            rights = share_rights(sd, rules)
        layer = (description, sd, problem, rights)
        entry.share_layer = layer
        return layer

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
        self._refresh_server_rights()
        description, _share_sd, share_problem, _ = self.share_layer()
        if share_problem is not None:
            return SourceCheck(
                False, f"{where}: the share permissions can't be read: {share_problem}",
                f"make the service account an administrator of the file server, or state the share's permissions "
                f"in sources.{self.source_id}.share_allow / share_deny",
            )
        rules = self.token_rules()
        if rules.local_groups is None:
            return SourceCheck(
                False, f"{where}: the file server's local groups can't be read: {rules.local_groups_problem}",
                f"let the service account query SAM remotely, or list the groups in sources.{self.source_id}.local_groups",
            )
        acl = self.acl_of_descriptor(sd)
        issue = acl_problem(acl)
        if issue is not None:
            return SourceCheck(
                False, f"{where}: the root's ACL can't be used: {issue}",
                f"check sources.{self.source_id}.share_allow / share_deny / local_groups and the directory",
            )
        return SourceCheck(
            True, f"{where}: {len(entries)} entries at the root; its DACL read ({len(sd.dacl or ())} ACEs); "
            f"{description}; local groups from {rules.local_groups.origin}",
        )


def build(cfg: SmbSourceConfig, ctx: SourceContext) -> Connector:
    """The :class:`SmbConnector` of a ``kind = "smb"`` source, with the configured directory
    (names of ``share_allow`` / ``share_deny`` / ``local_groups``, the users' domain SID; optional
    when none of those keys is set).
    Raises :class:`ConfigError` when ``cfg`` is not an :class:`SmbSourceConfig` (the registry may
    hand any kind's config) or its password variable is unset."""
    if not isinstance(cfg, SmbSourceConfig):
        raise ConfigError(f"sources.{cfg.id}: not an smb source")
    try:
        directory: Directory | None = ctx.directory()
    except ConfigError:
        if cfg.share_allow or cfg.share_deny or cfg.local_groups:
            raise
        directory = None  # names to resolve: none; the users' domain then comes from the server (LSA)
    return SmbConnector(cfg, directory=directory, ignore=ctx.ignore)


KIND = SourceKind("smb", SmbSourceConfig, build)
"""The ``smb`` source kind (:data:`ancre.connectors.registry.REGISTRY`)."""


__all__ = [
    "KIND",
    "DfsTarget",
    "SmbConnector",
    "SmbSourceConfig",
    "dfs_referral",
    "dfs_target_inside",
    "host_addresses",
    "is_auth_error",
    "is_connection_error",
    "is_not_found",
    "list_dir",
    "read_security_descriptor",
]
