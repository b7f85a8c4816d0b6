"""SMB2 CHANGE_NOTIFY on a share, as :class:`~ancre.connectors.base.ChangeEvent` s.

Two requests stay armed on two handles of the share root, both with SMB2_WATCH_TREE (the whole
tree, [MS-SMB2] 2.2.35): one for names, sizes, times and attributes, one for
FILE_NOTIFY_CHANGE_SECURITY only — so an ACL change is told apart from a content change even
though the server reports both as FILE_ACTION_MODIFIED. Each answer (FILE_NOTIFY_INFORMATION
records, [MS-FSCC] 2.7.1) becomes events; answers arriving within ``coalesce_s`` of each other are
merged per path (an editor's save — temp file, renames, several writes — gives one event per
path). The daemon's queue debounces further.

Events: ``created``/``modified``/``deleted`` for FILE_ACTION_ADDED/MODIFIED (and stream changes)/
REMOVED; ``moved`` with ``dest_path`` for a RENAMED_OLD_NAME + RENAMED_NEW_NAME pair; ``acl`` for a
security change. Paths may be folders: an ``acl`` event on a folder means every file that inherits
from it may have new rights, and the sync engine re-reads its subtree (``SmbConnector.list_under``).
``ChangeEvent(path=None, kind=ChangeKind.RESCAN)`` when events were lost: STATUS_NOTIFY_ENUM_DIR (the
server's buffer overflowed) or a lost session (emitted once the watch is armed again, so that the
full reconciliation sees what happened meanwhile). Names matching the ignore rules (Office lock
files, temp files) are dropped, except as one side of a rename.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from smbprotocol.change_notify import CompletionFilter, FileAction, FileSystemWatcher
from smbprotocol.open import Open

from ancre.connectors.base import ChangeCallback, ChangeEvent
from ancre.connectors.folder import is_ignored
from ancre.connectors.smb import wire
from ancre.connectors.smb.session import SmbSession, drop_connections
from ancre.models import ChangeKind, nfc

log = logging.getLogger("ancre.connectors.smb")

DATA_FILTER = (
    CompletionFilter.FILE_NOTIFY_CHANGE_FILE_NAME
    | CompletionFilter.FILE_NOTIFY_CHANGE_DIR_NAME
    | CompletionFilter.FILE_NOTIFY_CHANGE_ATTRIBUTES
    | CompletionFilter.FILE_NOTIFY_CHANGE_SIZE
    | CompletionFilter.FILE_NOTIFY_CHANGE_LAST_WRITE
    | CompletionFilter.FILE_NOTIFY_CHANGE_CREATION
    | CompletionFilter.FILE_NOTIFY_CHANGE_STREAM_NAME
    | CompletionFilter.FILE_NOTIFY_CHANGE_STREAM_SIZE
    | CompletionFilter.FILE_NOTIFY_CHANGE_STREAM_WRITE
)
SECURITY_FILTER = CompletionFilter.FILE_NOTIFY_CHANGE_SECURITY

_DELETED = {FileAction.FILE_ACTION_REMOVED, FileAction.FILE_ACTION_REMOVED_BY_DELETE}
POLL_S = 0.05
"""Seconds between two checks of the armed requests (and of ``stop``)."""
MAX_BACKOFF_S = 30.0
"""Longest wait between two reconnection attempts, seconds (back-off doubles from 1 s)."""
STABLE_S = 30.0
"""A watch armed this long before it was lost counts as having worked: the back-off starts over.
(A server that fails every request right after arming — e.g. its notify daemon is down — is
retried with a growing back-off, one rescan per attempt.)"""


class _Lost(Exception):
    """The watch lost its session or handle."""


@dataclass(frozen=True)
class WatchTarget:
    """What a :class:`ShareWatcher` watches: the share ``unc`` (``\\\\server\\share``) of source
    ``source_id``, with ``session``'s credentials (its :meth:`~ancre.connectors.smb.session.SmbSession.kwargs`
    over a connection cache of the watcher's own); ``ignore``: file-name globs dropped;
    ``buffer_size``: bytes the server may return per CHANGE_NOTIFY; ``ready``: set while the
    requests are armed on the server."""

    source_id: str
    unc: str
    ignore: tuple[str, ...]
    session: SmbSession
    buffer_size: int
    ready: threading.Event


class ShareWatcher:
    """Runs the watch of one SMB share (:class:`WatchTarget`) until ``stop`` is set.

    ``coalesce_s``: an answer is held this long (seconds) for more answers to merge with.
    Reconnects with exponential back-off (1 s … 30 s) after a lost session. Sets and clears
    ``target.ready`` as the requests are armed or lost. ``on_change`` is called from this
    thread; an exception from it is logged and the watch goes on.
    """

    def __init__(
        self, target: WatchTarget, on_change: ChangeCallback, stop: threading.Event, *, coalesce_s: float = 0.2
    ) -> None:
        self.target = target
        self.on_change = on_change
        self.stop = stop
        self.coalesce_s = coalesce_s
        self._pending: dict[tuple[str, str], ChangeEvent] = {}
        self._first_pending = 0.0
        self._last_answer = 0.0
        self.armed_at: float | None = None
        """When the current session got its requests armed (monotonic seconds), ``None`` if not."""

    # ---------------------------------------------------------------- plumbing
    def _emit(self, event: ChangeEvent) -> None:
        try:
            self.on_change(event)
        except Exception:  # a consumer bug must not stop the watch
            log.exception("source %s: change callback failed for %s", self.target.source_id, event)

    def _arm(self, op: Open, completion_filter: int) -> FileSystemWatcher:
        return wire.arm_notify(op, completion_filter, self.target.buffer_size)

    @staticmethod
    def _answer(w: FileSystemWatcher) -> list[Any]:
        """The records of a completed request; ``[]`` for STATUS_NOTIFY_ENUM_DIR (changes lost).
        Raises :class:`_Lost` when the request failed or the session died."""
        exc = wire.notify_failure(w)
        if exc is not None:
            raise _Lost(f"{type(exc).__name__}: {exc}")
        try:
            result = w.result
        except Exception as e:  # NOTIFY_CLEANUP, closed handle, ...
            raise _Lost(f"{type(e).__name__}: {e}") from None
        if result is None:
            raise _Lost("change notify request ended without an answer")
        return list(result)

    # ---------------------------------------------------------------- events
    def _add(self, event: ChangeEvent) -> None:
        if not self._pending:
            self._first_pending = time.monotonic()
        path = event.path or ""
        if event.kind in (ChangeKind.CREATED, ChangeKind.MODIFIED, ChangeKind.DELETED):
            # one content event per path, the latest wins (created → deleted = deleted)
            prev = self._pending.pop(("content", path), None)
            kind = event.kind
            if prev is not None and prev.kind == ChangeKind.DELETED and kind != ChangeKind.DELETED:
                kind = ChangeKind.MODIFIED
            self._pending[("content", path)] = ChangeEvent(event.source, event.path, kind)
        elif event.kind == ChangeKind.ACL:
            self._pending[("acl", path)] = event
        else:
            self._pending[(event.kind, f"{path}\0{event.dest_path}")] = event

    def _records(self, records: list[Any], *, security: bool) -> None:
        src = self.target.source_id
        ignore = self.target.ignore
        old_name: str | None = None
        for rec in records:
            action = int(rec["action"].get_value())
            path = nfc(str(rec["file_name"].get_value()).replace("\\", "/")).strip("/")
            if not path:
                continue
            ignored = is_ignored(path.rsplit("/", 1)[-1], ignore)
            if security:
                if not ignored:
                    self._add(ChangeEvent(src, path, ChangeKind.ACL))
                continue
            if action == FileAction.FILE_ACTION_RENAMED_OLD_NAME:
                old_name = path
                continue
            if action == FileAction.FILE_ACTION_RENAMED_NEW_NAME:
                old, old_name = old_name, None
                old_ignored = old is None or is_ignored(old.rsplit("/", 1)[-1], ignore)
                if old_ignored and ignored:
                    continue
                if old_ignored:
                    self._add(ChangeEvent(src, path, ChangeKind.MODIFIED))  # a temp file renamed over a document
                elif ignored:
                    self._add(ChangeEvent(src, old, ChangeKind.DELETED))  # a document renamed to a temp name
                else:
                    self._add(ChangeEvent(src, old, ChangeKind.MOVED, dest_path=path))
                continue
            if ignored:
                continue
            if action == FileAction.FILE_ACTION_ADDED:
                kind = ChangeKind.CREATED
            elif action in _DELETED:
                kind = ChangeKind.DELETED
            else:
                kind = ChangeKind.MODIFIED
            self._add(ChangeEvent(src, path, kind))
        if old_name is not None and not is_ignored(old_name.rsplit("/", 1)[-1], ignore):
            self._add(ChangeEvent(src, old_name, ChangeKind.DELETED))  # renamed out of sight

    def _flush(self, *, force: bool = False) -> None:
        if not self._pending:
            return
        now = time.monotonic()
        quiet = now - self._last_answer >= self.coalesce_s
        if not (force or quiet or now - self._first_pending >= 10 * self.coalesce_s):
            return
        events, self._pending = list(self._pending.values()), {}
        for event in events:
            self._emit(event)

    # ---------------------------------------------------------------- the loop
    def _session(self, cache: dict[str, Any], *, after_loss: bool) -> None:
        """One armed session: returns when ``stop`` is set, raises on loss. ``after_loss``: emit a
        rescan once armed (changes made while the watch was down are unknown)."""
        kw = self.target.session.kwargs(cache)
        tree = wire.share_tree(self.target.unc, **kw)
        handles = [(wire.open_share_root(tree), DATA_FILTER, False), (wire.open_share_root(tree), SECURITY_FILTER, True)]
        watchers = [self._arm(op, flt) for op, flt, _ in handles]
        try:
            self.target.ready.set()
            self.armed_at = time.monotonic()
            if after_loss:
                self._emit(ChangeEvent(self.target.source_id, None, ChangeKind.RESCAN))
            while not self.stop.is_set():
                fired = False
                for i, (op, flt, security) in enumerate(handles):
                    w = watchers[i]
                    if not w.response_event.is_set():
                        continue
                    fired = True
                    records = self._answer(w)
                    watchers[i] = self._arm(op, flt)  # re-arm first: the server queues meanwhile
                    self._last_answer = time.monotonic()
                    if not records:  # STATUS_NOTIFY_ENUM_DIR: too many changes to tell
                        self._flush(force=True)
                        self._emit(ChangeEvent(self.target.source_id, None, ChangeKind.RESCAN))
                        continue
                    self._records(records, security=security)
                self._flush()
                if not fired:
                    self.stop.wait(POLL_S)
            self._flush(force=True)
        finally:
            self.target.ready.clear()
            for w in watchers:
                if not w.response_event.is_set():
                    with contextlib.suppress(Exception):
                        w.cancel()
            for op, _, _ in handles:
                with contextlib.suppress(Exception):
                    op.close(False)

    def run(self) -> None:
        """Watch until ``stop`` is set; never raises (a lost session is retried with back-off)."""
        backoff = 1.0
        lost = False
        while not self.stop.is_set():
            cache: dict[str, Any] = {}
            self.armed_at = None
            try:
                self._session(cache, after_loss=lost)
                return
            except Exception as e:  # any failure: the watch is lost, reconnect
                self._flush(force=True)
                if self.armed_at is not None or not lost:  # a new loss (not a failed reconnection)
                    log.warning("source %s: change notify lost (%s: %s); reconnecting",
                                self.target.source_id, type(e).__name__, e)
                if self.armed_at is not None and time.monotonic() - self.armed_at >= STABLE_S:
                    backoff = 1.0  # it worked for a while: a new outage, retry quickly
                lost = True
                self.stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
            finally:
                drop_connections(cache)


__all__ = ["DATA_FILTER", "SECURITY_FILTER", "ShareWatcher", "WatchTarget"]
