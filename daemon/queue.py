"""The daemon's one work queue: bounded, de-duplicating, debounced (docs/ARCHITECTURE.md "Data flow of indexing").

Every event source (watchdog, a connector's ``watch()``, the scheduler, SIGHUP) feeds it; one
worker thread takes tasks out of it, so the single-writer store sees one writer.

- **Paths** are keyed by ``(source, path)``: ten events on one path are one entry. A path becomes
  *due* once no event touched it for ``debounce_s`` seconds (an editor's save — lock file, temp
  file, rename, two "modified" — settles into one re-index of the destination), and at the latest
  ``max_delay_s`` after its first event (a file that never stops changing is still synced).
- **Full passes** are keyed by source: a request while one is pending merges into it (``force`` is
  OR-ed, a ``sighup`` trigger wins), so a periodic job that overruns its interval is coalesced,
  never stacked. Full passes are taken before path batches.
- **Bounded**: a source with ``queue_max`` distinct paths waiting drops them and gets one full
  pass (trigger ``overflow``) instead: no event is ever silently lost.
- **Rights lane**: rights changes (an ACL manifest edit, an SMB security-change notification, the
  periodic ACL sweep) are :class:`AclRefresh` tasks in a lane of their own, taken by a separate
  thread (:meth:`ChangeQueue.take_acl`) that only re-reads ACLs and updates payloads: a revocation
  never waits behind content work (README "Running under systemd").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ancre.connectors.base import ChangeEvent
from ancre.models import ChangeKind

TRIGGER_PRIORITY = ("sighup", "startup", "rescan", "overflow", "retry", "periodic", "acl_sweep")
"""When requests merge, the pending full pass keeps the first of these triggers that it got."""


@dataclass(frozen=True)
class FullPass:
    """A full reconciliation of ``source``. ``trigger``: ``startup`` / ``periodic`` / ``acl_sweep``
    / ``sighup`` / ``rescan`` (a watcher lost track) / ``overflow`` / ``retry``; ``force``
    re-reads every item's content (SIGHUP)."""

    source: str
    trigger: str
    force: bool = False


@dataclass(frozen=True)
class PathBatch:
    """Due paths of one source; ``first_event[i]`` is the monotonic time (seconds) of the first
    event on ``paths[i]`` since it was queued (for the event-to-searchable delay)."""

    source: str
    paths: tuple[str, ...]
    first_event: tuple[float, ...]


@dataclass(frozen=True)
class AclRefresh:
    """Re-read the ACL of every indexed document of ``source`` (``paths`` ``None``) or of those at
    or below ``paths`` (relative POSIX paths), and update their payloads: no content read, no
    embedding. ``trigger``: ``acl_manifest`` / ``acl_event`` / ``acl_sweep``."""

    source: str
    trigger: str
    paths: tuple[str, ...] | None = None


Task = FullPass | PathBatch


@dataclass
class _Pending:
    first: float
    last: float


@dataclass(kw_only=True, eq=False)
class ChangeQueue:
    """See the module doc. Thread-safe; ``clock`` is monotonic seconds (injectable for tests).

    ``debounce_s`` ≥ 0, ``max_delay_s`` > 0, ``queue_max`` ≥ 1 distinct paths per source,
    ``batch_max`` ≥ 1 paths per :class:`PathBatch`.
    """

    debounce_s: float
    max_delay_s: float
    queue_max: int
    batch_max: int
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    overflows: int = field(default=0, init=False)
    """How many times a source's paths were replaced by a full pass."""
    _cond: threading.Condition = field(default_factory=threading.Condition, init=False, repr=False)
    _paths: dict[str, dict[str, _Pending]] = field(default_factory=dict, init=False, repr=False)
    _full: dict[str, FullPass] = field(default_factory=dict, init=False, repr=False)
    _acl: dict[str, AclRefresh] = field(default_factory=dict, init=False, repr=False)
    _closed: bool = field(default=False, init=False, repr=False)
    _inflight: int = field(default=0, init=False, repr=False)
    _acl_inflight: int = field(default=0, init=False, repr=False)

    # -------------------------------------------------------------------------------- feeding
    def add_path(self, source: str, path: str) -> None:
        """Queue (or re-arm the debounce of) one relative path of ``source``."""
        now = self.clock()
        with self._cond:
            pending = self._paths.setdefault(source, {})
            entry = pending.get(path)
            if entry is not None:
                entry.last = now
            elif len(pending) >= self.queue_max:
                pending.clear()
                self.overflows += 1
                self._merge_full(FullPass(source, "overflow"))
            else:
                pending[path] = _Pending(now, now)
            self._cond.notify_all()

    def add_event(self, ev: ChangeEvent) -> None:
        """Queue what a :class:`ChangeEvent` touched: its path, and ``dest_path`` for a move (a
        move out of the tree has none: the old path's documents get purged); an event without a
        path or of kind ``rescan`` requests a full pass (trigger ``rescan``). An ``acl`` event
        requests an :class:`AclRefresh` in the rights lane — of its path (and below), or of the
        whole source without a path — and, with a path, also queues the path."""
        if ev.kind == ChangeKind.ACL:  # rights first (the rights lane), then content consequences
            self.request_acl(ev.source, "acl_event" if ev.path else "acl_manifest", None if ev.path is None else [ev.path])
            if ev.path is not None:
                self.add_path(ev.source, ev.path)
            return
        if ev.path is None or ev.kind == ChangeKind.RESCAN:
            self.request_full(ev.source, "rescan")
            return
        self.add_path(ev.source, ev.path)
        if ev.kind == ChangeKind.MOVED and ev.dest_path:
            self.add_path(ev.source, ev.dest_path)

    def request_full(self, source: str, trigger: str, *, force: bool = False) -> None:
        """Ask for a full pass of ``source`` (merged with a pending one)."""
        with self._cond:
            self._merge_full(FullPass(source, trigger, force))
            self._cond.notify_all()

    def request_acl(self, source: str, trigger: str, paths: list[str] | tuple[str, ...] | None = None) -> None:
        """Ask for an :class:`AclRefresh` of ``source`` (of ``paths`` and below; ``None`` = every
        document), merged with a pending one (paths united; ``None`` wins)."""
        with self._cond:
            cur = self._acl.get(source)
            if cur is None:
                merged = None if paths is None else tuple(dict.fromkeys(paths))
                self._acl[source] = AclRefresh(source, trigger, merged)
            else:
                both = None if cur.paths is None or paths is None else tuple(dict.fromkeys((*cur.paths, *paths)))
                self._acl[source] = AclRefresh(source, cur.trigger if both is not None or cur.paths is None else trigger, both)
            self._cond.notify_all()

    def take_acl(self, timeout: float) -> AclRefresh | None:
        """The next rights task (oldest source first), waiting at most ``timeout`` seconds; ``None``
        on timeout or after :meth:`close`. In flight until :meth:`done_acl`."""
        deadline = self.clock() + timeout
        with self._cond:
            while not self._closed:
                if self._acl:
                    self._acl_inflight += 1
                    return self._acl.pop(next(iter(self._acl)))
                wait = deadline - self.clock()
                if wait <= 0:
                    return None
                self._cond.wait(max(wait, 0.005))
            return None

    def done_acl(self) -> None:
        """The rights task last taken by the caller is finished."""
        with self._cond:
            self._acl_inflight = max(0, self._acl_inflight - 1)

    def _merge_full(self, req: FullPass) -> None:
        cur = self._full.get(req.source)
        if cur is None:
            self._full[req.source] = req
            return
        rank = {t: i for i, t in enumerate(TRIGGER_PRIORITY)}
        trigger = min(cur.trigger, req.trigger, key=lambda t: rank.get(t, len(rank)))
        self._full[req.source] = FullPass(req.source, trigger, cur.force or req.force)

    # ------------------------------------------------------------------------------ consuming
    def take(self, timeout: float) -> Task | None:
        """The next task, waiting at most ``timeout`` seconds: a pending full pass (oldest first),
        else up to ``batch_max`` due paths of one source (earliest first event first); ``None`` on
        timeout or after :meth:`close`. Each task returned counts as in flight until
        :meth:`done` is called for it."""
        deadline = self.clock() + timeout
        with self._cond:
            while not self._closed:
                if self._full:
                    source = next(iter(self._full))
                    self._inflight += 1
                    return self._full.pop(source)
                now = self.clock()
                batch, next_due = self._due(now)
                if batch is not None:
                    self._inflight += 1
                    return batch
                wait = deadline - now
                if next_due is not None:
                    wait = min(wait, next_due - now)
                if deadline - now <= 0:
                    return None
                self._cond.wait(max(wait, 0.005))
            return None

    def _due(self, now: float) -> tuple[PathBatch | None, float | None]:
        next_due: float | None = None
        for source, pending in self._paths.items():
            due: list[tuple[float, str]] = []
            for path, e in pending.items():
                when = min(e.last + self.debounce_s, e.first + self.max_delay_s)
                if when <= now:
                    due.append((e.first, path))
                elif next_due is None or when < next_due:
                    next_due = when
            if due:
                due.sort()
                due = due[: self.batch_max]
                for _, path in due:
                    del pending[path]
                return PathBatch(source, tuple(p for _, p in due), tuple(t for t, _ in due)), None
        return None, next_due

    # ------------------------------------------------------------------------------- control
    def done(self) -> None:
        """The task last taken by the caller is finished (see :meth:`pending`)."""
        with self._cond:
            self._inflight = max(0, self._inflight - 1)

    def depth(self) -> int:
        """Queued paths plus pending full passes and rights tasks (in-flight tasks not included)."""
        with self._cond:
            return sum(len(p) for p in self._paths.values()) + len(self._full) + len(self._acl)

    def pending(self) -> int:
        """:meth:`depth` plus the tasks taken and not yet :meth:`done`: 0 means all caught up."""
        with self._cond:
            return (
                sum(len(p) for p in self._paths.values()) + len(self._full) + len(self._acl)
                + self._inflight + self._acl_inflight
            )

    def close(self) -> None:
        """Wake every :meth:`take` (they return ``None``) and refuse to hand out more tasks."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


__all__ = ["TRIGGER_PRIORITY", "AclRefresh", "ChangeQueue", "FullPass", "PathBatch", "Task"]
