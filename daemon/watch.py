"""Event sources of the daemon: watchdog on folder sources, a connector's own ``watch()``.

:class:`FolderWatcher` turns watchdog events below a source root into
:class:`~ancre.connectors.base.ChangeEvent` (relative POSIX paths, NFC). It ignores what carries
no information (directory "modified", opened/closed-without-write), events outside the root, and
files whose name matches the ignore globs (``~$`` lock files, temp files) — a rename from an
ignored temp file to a real name still reports the destination. Mode ``inotify`` uses watchdog's
native observer; ``poll`` its ``PollingObserver`` (a snapshot every ``poll_interval_s``: CIFS/NFS
mounts give no inotify event for changes made by other machines); ``auto`` polls on network file
systems (``/proc/self/mountinfo``) and falls back to polling when inotify can't start (watch or
instance limits).

A supervisor thread checks the root every second: when it disappears (unmounted, removed) the
observer is stopped and a ``rescan`` event is sent (the resulting pass reports the source
suspect and purges nothing); when it comes back — or is replaced by another directory, a
remount — a new observer starts and another ``rescan`` reconciles what changed meanwhile. An
inotify queue overflow (watchdog only logs it) also sends ``rescan``.

:class:`ConnectorWatcher` runs a :class:`~ancre.connectors.base.WatchableConnector`'s blocking
``watch(on_change, stop)`` on a thread and restarts it (with a ``rescan``) when it fails.

:class:`FeedRunner` runs a :class:`~ancre.connectors.base.ChangeFeed` (Graph delta, the
snapshot-diff poller of :mod:`ancre.connectors.poller`): every ``poll_interval_s`` seconds it
loads the source's cursor from the engine's :class:`~ancre.index.cursors.CursorStore`, calls
``changes(cursor)``, queues the events like a watcher's and keeps the new cursor once they are
queued. When the source is unavailable the old cursor stays and the next interval tries again.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from ancre.connectors.base import ChangeCallback, ChangeEvent, ChangeFeed, WatchableConnector
from ancre.connectors.folder import is_ignored
from ancre.errors import SourceUnavailableError
from ancre.index.cursors import CursorStore
from ancre.models import ChangeKind, nfc

log = logging.getLogger("ancre.daemon.watch")

NETWORK_FS = frozenset(
    {"cifs", "smb3", "smbfs", "nfs", "nfs4", "ceph", "glusterfs", "fuse.glusterfs", "fuse.sshfs",
     "fuse.rclone", "fuse.s3fs", "9p", "virtiofs", "afs", "davfs", "fuse.davfs2", "lustre", "gpfs"}
)
"""File system types on which inotify does not see changes made elsewhere: polled in ``auto``."""

_SUPERVISE_S = 1.0

_WATCHDOG_KINDS = {
    "created": ChangeKind.CREATED,
    "deleted": ChangeKind.DELETED,
    "modified": ChangeKind.MODIFIED,
    "closed": ChangeKind.MODIFIED,
    "attrib": ChangeKind.MODIFIED,
}
"""watchdog's ``event_type`` values (its ``EVENT_TYPE_*`` strings; ``attrib`` and
``closed_no_write`` exist in its newer releases only) → the change they report (a ``moved`` event
is handled apart; any other type counts as a modification of its path)."""


def fs_type(path: Path) -> str | None:
    """The file system type of the mount holding ``path`` (longest mount point prefix in
    ``/proc/self/mountinfo``), ``None`` when it can't be told."""
    try:
        real = os.path.realpath(path)
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    best, best_type = "", None
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5:
            continue
        mnt = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])  # \040 = space
        inside = real == mnt or real.startswith(mnt.rstrip("/") + "/")
        if inside and len(mnt) >= len(best):
            parts = right.split()
            best, best_type = mnt, (parts[0] if parts else None)
    return best_type


def _rel(root: str, path: bytes | str) -> str | None:
    """``path`` relative to ``root`` as NFC POSIX, ``"."`` for the root, ``None`` outside it."""
    p = os.fsdecode(path)
    if not p:
        return None
    rel = os.path.relpath(p, root)
    if rel == ".":
        return "."
    if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
        return None
    return nfc(rel.replace(os.sep, "/"))


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: FolderWatcher) -> None:
        self.w = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        try:
            self.w._translate(event)
        except Exception:  # a watcher thread must never die on one odd event
            log.exception("watch %s: could not handle %r", self.w.source_id, event)


class FolderWatcher:
    """Watches a folder source's ``root`` and calls ``on_change`` (from watchdog's threads) for
    every change; see the module doc. ``mode``: ``auto`` / ``inotify`` / ``poll``;
    ``poll_interval_s`` > 0; ``ignore``: file-name globs never reported."""

    def __init__(
        self,
        source_id: str,
        root: Path,
        *,
        mode: str,
        poll_interval_s: float,
        on_change: ChangeCallback,
        ignore: tuple[str, ...] = (),
        acl_manifest: Path | None = None,
    ) -> None:
        """``acl_manifest``: the source's ACL manifest file, if any; an edit of it changes rights
        without touching any document, so it triggers an ACL refresh of every document at once
        (a path-less ``acl`` event: the daemon's rights lane)."""
        self.source_id = source_id
        self.root = Path(root)
        self.mode = mode
        self.poll_interval_s = poll_interval_s
        self.on_change = on_change
        self.ignore = ignore
        self.effective_mode = "down"
        """``inotify`` / ``poll`` while an observer runs, ``down`` while the root is missing."""
        self._observer: BaseObserver | None = None
        self._root_id: tuple[int, int] | None = None
        self.acl_manifest = Path(acl_manifest) if acl_manifest is not None else None
        self._manifest_sig = self._manifest_signature()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start the observer (if the root exists) and the root supervisor thread."""
        with self._lock:
            self._start_observer()
        self._thread = threading.Thread(target=self._supervise, name=f"watch-{self.source_id}", daemon=True)
        self._thread.start()
        _overflow_hook.register(self)

    def stop(self, timeout: float = 3.0) -> None:
        """Stop the supervisor and the observer (joined at most ``timeout`` seconds each)."""
        _overflow_hook.unregister(self)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            self._stop_observer(timeout)

    # ---------------------------------------------------------------------------- internals
    def _identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.root)
        except OSError:
            return None
        return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None

    def _choose(self) -> str:
        if self.mode in ("inotify", "poll"):
            return self.mode
        t = fs_type(self.root)
        return "poll" if t in NETWORK_FS else "inotify"

    def _start_observer(self) -> None:
        ident = self._identity()
        self._root_id = ident
        if ident is None:
            self.effective_mode = "down"
            log.warning("watch %s: root %s is missing; waiting for it", self.source_id, self.root)
            return
        mode = self._choose()
        observer: BaseObserver
        try:
            if mode == "inotify":
                from watchdog.observers.inotify import InotifyObserver

                observer = InotifyObserver()
            else:
                observer = PollingObserver(timeout=self.poll_interval_s)
            observer.schedule(_Handler(self), str(self.root), recursive=True)
            observer.start()
        except OSError as e:
            if mode != "inotify" or self.mode == "inotify":
                log.error("watch %s: cannot watch %s: %s", self.source_id, self.root, e)
                self.effective_mode = "down"
                return
            log.warning("watch %s: inotify unavailable (%s); polling every %gs", self.source_id, e, self.poll_interval_s)
            mode = "poll"
            observer = PollingObserver(timeout=self.poll_interval_s)
            observer.schedule(_Handler(self), str(self.root), recursive=True)
            observer.start()
        self._observer = observer
        self.effective_mode = mode
        log.info("watching %s (%s) with %s", self.source_id, self.root, mode)

    def _stop_observer(self, timeout: float = 3.0) -> None:
        obs, self._observer = self._observer, None
        if obs is not None:
            obs.stop()
            if obs.is_alive():
                obs.join(timeout)

    def _manifest_signature(self) -> tuple[int, int, int] | None:
        if self.acl_manifest is None:
            return None
        try:
            st = os.stat(self.acl_manifest)
        except OSError:
            return (0, 0, 0)
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _supervise(self) -> None:
        while not self._stop.wait(_SUPERVISE_S):
            sig = self._manifest_signature()
            if sig != self._manifest_sig:
                self._manifest_sig = sig
                log.info("watch %s: ACL manifest %s changed; re-reading every ACL", self.source_id, self.acl_manifest)
                self.on_change(ChangeEvent(self.source_id, None, ChangeKind.ACL))  # the rights lane, not a rescan
            ident = self._identity()
            with self._lock:
                if self._stop.is_set():
                    return
                died = self._observer is not None and not self._observer_alive()
                if ident == self._root_id and not died:
                    continue
                if ident is None:
                    log.warning("watch %s: root %s disappeared", self.source_id, self.root)
                    self._stop_observer()
                    self._root_id = None
                    self.effective_mode = "down"
                else:
                    log.warning("watch %s: root %s (re)appeared; restarting the watcher", self.source_id, self.root)
                    self._stop_observer()
                    self._start_observer()
            self.rescan()

    def _observer_alive(self) -> bool:
        obs = self._observer
        return obs is not None and obs.is_alive() and all(e.is_alive() for e in obs.emitters)

    def rescan(self) -> None:
        """Report that events may have been lost (a full pass follows)."""
        self.on_change(ChangeEvent(self.source_id, None, ChangeKind.RESCAN))

    def _keep(self, rel: str | None, is_dir: bool) -> str | None:
        if rel is None or rel == ".":
            return None
        if not is_dir and is_ignored(rel.rsplit("/", 1)[-1], self.ignore):
            return None
        return rel

    def _translate(self, event: FileSystemEvent) -> None:
        kind = event.event_type
        if kind in ("opened", "closed_no_write") or (event.is_directory and kind in ("modified", "attrib", "closed")):
            return
        root = str(self.root)
        src = _rel(root, event.src_path)
        if src == "." and kind in ("deleted", "moved"):
            self.rescan()  # the root itself went away: the supervisor takes it from here
            return
        if kind == "moved":
            dest = self._keep(_rel(root, event.dest_path), event.is_directory)
            # a move from an ignored temp file to a real name is a change of the destination only
            src_k = self._keep(src, event.is_directory)
            if src_k is None and dest is None:
                return
            if src_k is None:
                self.on_change(ChangeEvent(self.source_id, dest, ChangeKind.CREATED))
            else:
                self.on_change(ChangeEvent(self.source_id, src_k, ChangeKind.MOVED, dest))
            return
        rel = self._keep(src, event.is_directory)
        if rel is None:
            return
        self.on_change(ChangeEvent(self.source_id, rel, _WATCHDOG_KINDS.get(kind, ChangeKind.MODIFIED)))


class _OverflowHook(logging.Handler):
    """watchdog logs an inotify queue overflow but tells no handler: catch the log line and ask
    every inotify watcher for a rescan (the lost events are unknown)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._watchers: set[FolderWatcher] = set()
        self._mu = threading.Lock()

    def register(self, w: FolderWatcher) -> None:
        with self._mu:
            if not self._watchers:
                logging.getLogger("watchdog.observers.inotify_c").addHandler(self)
            self._watchers.add(w)

    def unregister(self, w: FolderWatcher) -> None:
        with self._mu:
            self._watchers.discard(w)
            if not self._watchers:
                logging.getLogger("watchdog.observers.inotify_c").removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" not in record.getMessage().lower():
            return
        with self._mu:
            targets = [w for w in self._watchers if w.effective_mode == "inotify"]
        for w in targets:
            w.rescan()


_overflow_hook = _OverflowHook()


class ConnectorWatcher:
    """Runs ``connector.watch(on_change, stop)`` on a thread; when it raises or returns before
    :meth:`stop`, sends a ``rescan`` and calls it again after a back-off (1 s doubling to 60 s)."""

    def __init__(self, connector: WatchableConnector, on_change: ChangeCallback) -> None:
        self.connector = connector
        self.source_id = connector.source_id
        self.on_change = on_change
        self.effective_mode = "notify"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the watch thread."""
        self._thread = threading.Thread(target=self._run, name=f"notify-{self.source_id}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 3.0) -> None:
        """Set the stop event and join the thread at most ``timeout`` seconds."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            try:
                self.effective_mode = "notify"
                self.connector.watch(self.on_change, self._stop)
                backoff = 1.0
            except Exception as e:  # any failure of the watch falls back to a rescan and a restart
                log.warning("watch %s: %s: %s; restarting in %gs", self.source_id, type(e).__name__, e, backoff)
            if self._stop.is_set():
                return
            self.effective_mode = "down"
            self.on_change(ChangeEvent(self.source_id, None, ChangeKind.RESCAN))
            if self._stop.wait(backoff):
                return
            backoff = min(backoff * 2, 60.0)


@dataclass(eq=False)
class FeedRunner:
    """Runs the change feed ``feed`` of source ``source_id`` on a thread (see the module doc): a
    first call at :meth:`start` (a kept cursor catches up with what changed while the daemon was
    down; none: the feed's baseline), then one every ``feed.poll_interval_s`` seconds.
    ``effective_mode``: ``mode`` after a call that answered, ``down`` after one that failed."""

    source_id: str
    feed: ChangeFeed[Any]
    cursors: CursorStore
    on_change: ChangeCallback
    _: KW_ONLY
    mode: str = "feed"
    effective_mode: str = field(default="", init=False)
    polls: int = field(default=0, init=False)
    """Calls of ``changes`` that answered."""
    _cursor: Any = field(default=None, init=False, repr=False)
    _loaded: bool = field(default=False, init=False, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.effective_mode = self.mode

    def start(self) -> None:
        """Start the feed thread."""
        self._thread = threading.Thread(target=self._run, name=f"feed-{self.source_id}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 3.0) -> None:
        """Set the stop event and join the thread at most ``timeout`` seconds (a call of
        ``changes`` under way is not interrupted: its events are neither queued nor its cursor
        kept, the next start replays them)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            if self._stop.wait(max(0.05, float(self.feed.poll_interval_s))):
                return

    def poll_once(self) -> bool:
        """One call of the feed: the cursor (read from the store at the first call, then the
        one last kept), ``changes(cursor)``, queue the events, keep the new cursor. Returns
        whether the feed answered; never raises (a failure is logged and the old cursor kept)."""
        try:
            if not self._loaded:
                self._cursor, self._loaded = self.cursors.load(self.source_id, self.feed.cursor_type), True
            cursor = self._cursor
            batch = self.feed.changes(cursor)
        except SourceUnavailableError as e:
            self._down("source unavailable", e)
            return False
        except Exception as e:  # a feed thread never dies; the cursor is kept
            self._down(type(e).__name__, e)
            return False
        if self._stop.is_set():
            return False  # stopping: neither queued nor kept, replayed at the next start
        for ev in batch.events:
            if ev.kind == ChangeKind.RESCAN and ev.reason:
                log.warning("feed %s: full pass requested: %s", self.source_id, ev.reason)
            self.on_change(ev)
        if batch.cursor != cursor:
            self.cursors.save(self.source_id, batch.cursor)
            self._cursor = batch.cursor
        if self.effective_mode == "down":
            log.info("feed %s: answering again", self.source_id)
        self.effective_mode = self.mode
        self.polls += 1
        return True

    def _down(self, what: str, e: Exception) -> None:
        if self.effective_mode != "down":
            log.warning("feed %s: %s: %s; cursor kept, retrying every %gs", self.source_id, what, e, self.feed.poll_interval_s)
        self.effective_mode = "down"


__all__ = ["NETWORK_FS", "ConnectorWatcher", "FeedRunner", "FolderWatcher", "fs_type"]
