"""Durable writes of ancre's own files: what a rename or a new file in a folder needs to survive a
power loss — the folder's entry synced too (fsync(2): "Calling fsync() does not necessarily ensure
that the entry in the directory containing the file has also reached disk. For that an explicit
fsync() on a file descriptor for the directory is also needed")."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Sync ``directory``'s entries to disk (after a file in it was created, renamed or removed).
    Raises ``OSError`` as ``open(2)``/``fsync(2)`` do."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["fsync_dir"]
