"""How the file server spells a path: ancre's paths are NFC, a share may hold names written NFD (a
macOS client): :class:`ServerNames` remembers, per NFC relative path, the spelling the server
listed, and finds it folder by folder when no listing met it yet. Shared by the listing
(:mod:`ancre.connectors.smb.listing`) and the rights (:mod:`ancre.connectors.smb.descriptors`)
of one :class:`~ancre.connectors.smb.connector.SmbConnector`."""

from __future__ import annotations

import threading
from typing import Any

from ancre.connectors.smb import wire as smb_wire
from ancre.connectors.smb.session import is_connection_error, is_not_found
from ancre.models import nfc


class ServerNames:
    """The server's spelling of the NFC relative paths of the share ``unc``
    (``\\\\server\\share``). Thread-safe."""

    def __init__(self, unc: str) -> None:
        self.unc = unc
        self._lock = threading.Lock()
        self._wire: dict[str, str] = {}
        """NFC relative path → the path as the server spells it (only where they differ)."""

    def unc_of(self, rel_path: str) -> str:
        """``"CLIENTS/x.docx"`` → ``\\\\server\\share\\CLIENTS\\x.docx`` (``""`` → the share)."""
        rel = rel_path.strip("/")
        return self.unc + ("\\" + rel.replace("/", "\\") if rel else "")

    def remember(self, rel: str, wire: str) -> None:
        """``wire`` is how the server spells the NFC path ``rel`` (from a listing or a stat)."""
        with self._lock:
            if rel != wire:
                self._wire[rel] = wire
            else:
                self._wire.pop(rel, None)

    def wire_of(self, rel: str, kw: dict[str, Any]) -> str:
        """The server's spelling of the NFC relative path ``rel``: remembered from a listing, else
        found folder by folder among the entries whose NFC form matches (the name as given when
        there is none: the caller then gets the server's not-found). ``kw``: the session's
        smbclient arguments. Raises connection errors."""
        with self._lock:
            known = self._wire.get(rel)
        if known is not None or rel.isascii():
            return known or rel
        parent, _, name = rel.rpartition("/")
        wire_parent = self.wire_of(parent, kw) if parent else ""
        try:
            entries = smb_wire.list_dir(self.unc_of(wire_parent), **kw)
        except Exception as e:
            if is_not_found(e) and not is_connection_error(e):
                return rel
            raise
        hits = [str(e.file_name) for e in entries if nfc(e.file_name) == name]
        if not hits:
            return f"{wire_parent}/{name}" if wire_parent else name
        wire = f"{wire_parent}/{hits[0]}" if wire_parent else hits[0]
        self.remember(rel, wire)
        return wire


__all__ = ["ServerNames"]
