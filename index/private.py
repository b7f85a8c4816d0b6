"""ancre's own files are private: folders 0700, files 0600, whatever the umask it was started with.

The data directory holds document text (the store's payloads, BM25 snapshots), the state DB, the
daemon's status file, locks and the audit log: nobody but the service account may read them, even
when ancre runs outside systemd (whose unit sets ``UMask=0077``) under a permissive umask.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("ancre.private")

PRIVATE_UMASK = 0o077
"""Bits always masked from new files and folders: group and others get nothing."""


def restrict_umask() -> int:
    """Add :data:`PRIVATE_UMASK` to the process umask (process-wide: every file ancre or its
    libraries create from now on — the embedded store's segments, SQLite's WAL, snapshots — is
    private). Returns the umask now in force."""
    old = os.umask(PRIVATE_UMASK)
    new = old | PRIVATE_UMASK
    os.umask(new)
    return new


CONTROL_DIR = "run"
"""The folder under the data directory that holds the control socket when no runtime directory
is given (:func:`ancre.settings.daemon.control_socket_path`)."""


def tighten_tree(root: Path) -> int:
    """Remove group and other permissions from ``root`` and everything below it that this
    process owns (links are not followed; other owners' files are left alone). Sockets and the
    control socket's folder (``<root>/run``, 0750 with its socket 0660 for the admin group: docs/DEPLOY.md
    "Running under systemd") keep the modes their server gave them. Returns the number of entries
    changed; never raises for one entry (logged)."""
    changed = 0
    if not root.is_dir():
        return 0
    uid = os.geteuid()
    for dirpath, dirnames, filenames in os.walk(root):
        if os.path.samefile(dirpath, root) and CONTROL_DIR in dirnames:
            dirnames.remove(CONTROL_DIR)  # the control socket's folder: its modes are the server's
        for name in [".", *dirnames, *filenames]:
            p = os.path.join(dirpath, name) if name != "." else dirpath
            try:
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode) or stat.S_ISSOCK(st.st_mode) or st.st_uid != uid:
                    continue
                mode = stat.S_IMODE(st.st_mode)
                if mode & PRIVATE_UMASK:
                    os.chmod(p, mode & ~PRIVATE_UMASK)
                    changed += 1
            except OSError as e:
                log.warning("could not make %s private: %s", p, e)
    if changed:
        log.info("made %d entries under %s private (0700/0600)", changed, root)
    return changed


def make_private(data_dir: Path, audit_dir: Path | None = None) -> None:
    """What every ancre process does before touching its files: :func:`restrict_umask`, then
    :func:`tighten_tree` on ``data_dir`` and, when set apart, ``audit_dir`` (``[audit] dir``)."""
    restrict_umask()
    tighten_tree(data_dir)
    if audit_dir is not None:
        tighten_tree(audit_dir)


__all__ = ["PRIVATE_UMASK", "make_private", "restrict_umask", "tighten_tree"]
