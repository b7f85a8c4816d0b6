"""DFS links of the SMB source: referrals, where a link leads, and whether it is followed.

A link is never a way around an ACL: each link met is asked for its referral
(FSCTL_DFS_GET_REFERRALS on ``IPC$``, :func:`dfs_referral`) and followed (by smbclient) only when
every target lies inside the source — the same share on the same server
(:func:`dfs_target_inside`: same name, or names resolving to a common address). A link to
another share or server, a loop, a chain over :data:`MAX_DFS_HOPS` links, or a link whose
referral can't be read is never followed (:class:`DfsResolver` gives the skip reason); with
``dfs = false`` none is.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from smbprotocol.dfs import DFSReferralRequest, DFSReferralResponse, DFSServerTypes
from smbprotocol.ioctl import CtlCode, IOCTLFlags, SMB2IOCTLRequest, SMB2IOCTLResponse
from smbprotocol.tree import TreeConnect

from ancre.connectors.smb.session import Blocked, is_auth_error, is_connection_error, is_not_found
from ancre.models import nfc

log = logging.getLogger("ancre.connectors.smb")

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
    except Exception as e:  # any resolution failure: another server
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
class DfsLink:
    """The DFS link a path lies under: its path in the share (``/``-separated) and its targets."""

    rel: str
    targets: tuple[DfsTarget, ...]


@dataclass(frozen=True)
class Reach:
    """Where a relative path leads once the DFS links on it are resolved: ``real`` (its path in
    the source's own share), or ``blocked`` (the skip reason of the link that is not followed)."""

    real: str
    blocked: str | None = None


TreeOf = Callable[[str, dict[str, Any]], TreeConnect]
"""``(share name, smbclient session arguments) -> the pooled tree connect of that share``."""


class DfsResolver:
    """The DFS links of the source ``\\\\server\\share``: ``follow`` is its ``dfs`` setting,
    ``tree`` gives the pooled tree connect of a share of that server (``IPC$`` for referrals,
    the share itself for its DFS capability). Target names are resolved once and remembered
    until :meth:`forget_addresses`. Thread-safe."""

    def __init__(self, server: str, share: str, *, follow: bool, tree: TreeOf) -> None:
        self.server = server
        self.share = share
        self.follow = follow
        self._tree = tree
        self._lock = threading.Lock()
        self._addr_cache: dict[str, frozenset[str]] = {}

    def forget_addresses(self) -> None:
        """Resolve DFS target names afresh from now on."""
        with self._lock:
            self._addr_cache = {}

    def addresses(self, host: str) -> frozenset[str]:
        """:func:`host_addresses` of ``host``, remembered."""
        with self._lock:
            hit = self._addr_cache.get(host)
        if hit is None:
            hit = host_addresses(host)
            with self._lock:
                self._addr_cache[host] = hit
        return hit

    def referral(self, real: str, kw: dict[str, Any]) -> DfsLink | None:
        """The DFS link the share path ``real`` lies under (or is), from the server's referral
        (:func:`dfs_referral` on ``IPC$``); ``None`` when the server says no link covers it.
        Raises :class:`Blocked` when the referral can't be read or makes no sense (fail
        closed), connection errors as they are."""
        base = f"\\{self.server}\\{self.share}"
        request = base + ("\\" + real.replace("/", "\\") if real else "")
        try:
            response = dfs_referral(self._tree("IPC$", kw), request)
        except Exception as e:
            if is_connection_error(e) or is_auth_error(e):
                raise
            if is_not_found(e):
                return None
            raise Blocked(f"dfs link referral unreadable ({type(e).__name__}: {e})") from None
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
        except Exception as e:  # a referral we can't read: not followed
            raise Blocked(f"dfs link referral unreadable ({type(e).__name__}: {e})") from None
        if not link:
            return None
        return DfsLink(nfc(link), targets)

    def link_target(self, link: DfsLink) -> tuple[str | None, str]:
        """``(reason, target)`` for a DFS link met on the way: ``reason`` ``None`` and the
        target's path in this share when every referral target is inside the share
        (:func:`dfs_target_inside`; a link with several targets is followed only if all are, since
        smbclient tries them in turn); otherwise the skip reason naming the first target outside."""
        if not self.follow:
            return "dfs link (dfs = false)", ""
        for target in link.targets:
            if not dfs_target_inside(self.server, self.share, target, self.addresses):
                return f"dfs link outside the share ({target.unc})", ""
        target = link.targets[0]
        mine, theirs = link.rel.casefold(), target.rel.casefold()
        if theirs in ("", mine) or mine.startswith(theirs + "/") or theirs.startswith(mine + "/"):
            return f"dfs link loop ({target.unc})", ""
        return None, target.rel

    def reach(self, rel: str, kw: dict[str, Any]) -> Reach:
        """Resolve the DFS links on the relative path ``rel`` as smbclient would follow them: on a
        share that is not a DFS root (no SMB2_SHARE_CAP_DFS) nothing redirects; otherwise one
        referral request per link crossed. A link that is not followed (outside the share,
        ``dfs = false``, loop, unreadable referral, chain over :data:`MAX_DFS_HOPS`) gives
        ``blocked``. Raises connection errors."""
        if not rel or not self._tree(self.share, kw).is_dfs_share:
            return Reach(rel)
        real = rel
        for _ in range(MAX_DFS_HOPS):
            try:
                link = self.referral(real, kw)
            except Blocked as e:
                return Reach(real, str(e))
            if link is None:
                return Reach(real)
            depth = link.rel.count("/") + 1
            parts = real.split("/")
            if depth > len(parts) or "/".join(parts[:depth]).casefold() != link.rel.casefold():
                return Reach(real, f"dfs link referral unreadable (answered for {link.rel!r})")
            rest = parts[depth:]
            reason, target = self.link_target(link)
            if reason is not None:
                return Reach(real, reason)
            real = "/".join(p for p in (target, *rest) if p)
        return Reach(real, f"dfs link chain longer than {MAX_DFS_HOPS} links")

    def entry(self, real: str, kw: dict[str, Any]) -> tuple[str | None, str]:
        """For a DFS link entry at the share path ``real``: ``(None, target path in the share)``
        when it is followed, else ``(skip reason, "")`` — outside the share, loop, or a referral
        that can't be read or does not answer for this very link (fail closed: not followed)."""
        if not self.follow:
            return "dfs link (dfs = false)", ""
        try:
            link = self.referral(real, kw)
        except Blocked as e:
            return str(e), ""
        if link is None or link.rel.casefold() != real.casefold():
            answered = "no link" if link is None else repr(link.rel)
            return f"dfs link referral unreadable (the server answered {answered})", ""
        return self.link_target(link)


__all__ = [
    "MAX_DFS_HOPS",
    "DfsLink",
    "DfsResolver",
    "DfsTarget",
    "Reach",
    "dfs_referral",
    "dfs_target_inside",
    "host_addresses",
]
