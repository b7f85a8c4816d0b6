"""The embedded store's health at open (README "Running under systemd", *A full disk*):

- **a stop that was not clean** is remembered by an ``OPEN`` marker under ``data_dir/qdrant``
  (written when the store opens, removed when it closes: :func:`mark_open`, :func:`mark_closed`);
  when the next open finds it, the store is probed before it is used
  (:func:`check_after_crash`: a count, a filtered vector search, a keyword search and a page of
  points per collection — the reads that meet a damaged segment);
- **a shard or segment the engine can't read** is a :class:`~ancre.errors.StoreDamagedError`
  naming it and the way back, ``ancre reindex`` (:func:`damaged`); a file the process may not
  read is said so instead;
- **an engine error that quotes ENOSPC** (the engine saves its structure while loading) is a
  :class:`~ancre.errors.DiskFullError` (:func:`disk_errors`).

The engine itself checks the bounds of what it reads from its memory-mapped files (measured on
qdrant-edge-py 0.9: every file of an appendable and of a built segment truncated to half, to
4 KiB and to nothing gives an error or is rebuilt from the write-ahead log, never a bus error);
what it can't see is a write into a full file system, which :mod:`ancre.index.disk_space`
prevents.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ancre.errors import DiskFullError, StoreDamagedError, StoreError
from ancre.index._qdrant_base import engine_errors
from ancre.index.disk_space import SpaceGuard, free_bytes, is_disk_full
from ancre.models import COLLECTIONS

if TYPE_CHECKING:
    from ancre.index.store import KeywordStore, Store

    class EdgeProbe(Store, KeywordStore, Protocol):
        """What :func:`check_after_crash` reads: a store with its keyword search."""

log = logging.getLogger("ancre.store")

OPEN_MARKER = "OPEN"
"""Under ``data_dir/qdrant``: present while a process has the store open."""
_SEGMENT = re.compile(r"(?P<coll>[a-z]+(?:@\d+)?)/segments/(?P<seg>[0-9a-f-]{36})")
_PROBE_PRINCIPALS = frozenset({"sid:S-1-0-0"})
"""Nobody's principal (the NULL SID): the probe's filters walk the indexes and match nothing."""


def mark_open(root: Path) -> bool:
    """Write the ``OPEN`` marker (this process's PID); ``True`` when one was already there — the
    last owner of a store that has shards did not close it (a crash, ``kill -9``, a bus error)."""
    marker = root / OPEN_MARKER
    crashed = marker.exists() and any((root / name).exists() for name in COLLECTIONS)
    with contextlib.suppress(OSError):  # best effort: a missing marker only skips a probe
        marker.write_text(f"{os.getpid()}\n", encoding="ascii")
    return crashed


def mark_closed(root: Path) -> None:
    """Remove the ``OPEN`` marker: the store was closed cleanly."""
    (root / OPEN_MARKER).unlink(missing_ok=True)


def damaged(root: Path, where: Path, e: StoreError) -> StoreError:
    """The error to raise for the engine's failure ``e`` reading the shard at ``where``: a
    :class:`~ancre.errors.StoreDamagedError` naming the segment (when the engine's message names
    one) and ``ancre reindex``; a plain :class:`~ancre.errors.StoreError` saying whose files they
    are when the engine was refused access."""
    text = str(e)
    if "Permission denied" in text or "os error 13" in text:
        return StoreError(f"{text} — the index files under {root} can't be read by this user (uid {os.geteuid()}): "
                          "run the command as the service's user, or fix the owner of data_dir")
    m = _SEGMENT.search(text)
    if m:
        what = f"segment {m['seg']} of {m['coll']}"
    else:
        segs = sorted(p.name for p in (where / "segments").glob("*") if p.is_dir()) if (where / "segments").is_dir() else []
        what = f"the shard {where.name}" + (f" (segment{'s' if len(segs) > 1 else ''} {', '.join(segs)})" if segs else "")
    return StoreDamagedError(
        f"the index under {root} is damaged: {what} can't be read ({text}) — it was left so by a crash or a full "
        "disk while it was written. Run `ancre reindex --config <file>` (stop the service first) to rebuild the index "
        "from the sources"
    )


def check_after_crash(
    store: EdgeProbe, dim: int, root: Path, shards: Mapping[str, Path], *, keywords: bool
) -> None:
    """Probe every collection of the open ``store`` of ``dim``-dim vectors, its keyword index
    too when ``keywords`` (see the module doc; ``shards``: each collection's live shard folder);
    raises :class:`~ancre.errors.StoreDamagedError` naming the segment that fails (or the shard
    and its segments, when the engine's error names none), or :class:`~ancre.errors.DiskFullError`."""
    log.warning("the index under %s was not closed cleanly (a crash?): checking it before use", root)
    probe = np.zeros(dim, dtype=np.float32)
    probe[0] = 1.0
    for coll in COLLECTIONS:
        try:
            first = next(iter(store.scroll(coll, batch=64)), None)
            store.count(coll)
            # the first point's own principals and words: the filters then walk the indexes for real
            principals = frozenset(first.payload.acl_allow) if first is not None else _PROBE_PRINCIPALS
            store.search(coll, probe, principals or _PROBE_PRINCIPALS, 10)
            if keywords:
                store.keyword_search(coll, first.payload.text[:200] if first else "ancre", principals, 10)
        except DiskFullError:
            raise
        except StoreError as e:
            raise damaged(root, shards.get(coll, root / coll), e) from e
    log.info("index under %s checked after an unclean stop: readable", root)


@contextlib.contextmanager
def disk_errors(space: SpaceGuard, engine: str, action: str) -> Iterator[None]:
    """:func:`~ancre.index._qdrant_base.engine_errors`, with an engine error that quotes
    ``ENOSPC`` raised as :class:`~ancre.errors.DiskFullError` on ``space``'s folder."""
    try:
        with engine_errors(engine, action):
            yield
    except DiskFullError:
        raise
    except StoreError as e:
        if not is_disk_full(e):
            raise
        short = space.shortage(0, action)
        if short is None:
            try:
                free = free_bytes(space.folder)
            except OSError:
                free = 0
            short = DiskFullError(space.folder, free=free, needed=space.margin_bytes, what=action,
                                  margin=space.margin_bytes)
        raise short from e


__all__ = ["OPEN_MARKER", "check_after_crash", "damaged", "disk_errors", "mark_closed", "mark_open"]
