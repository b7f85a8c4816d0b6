"""NT-style ACL manifests (the corpus ``acl.json`` format) for trees mounted without their ACLs.

The manifest states the explicit ACEs of some paths of a share; every other path inherits, exactly
as NTFS would, through :func:`ancre.acl.engine.inherit`. Format::

    {"share": "Partage", "unc_root": "\\\\\\\\SRV-FICHIERS\\\\Partage",
     "entries": {
        "":        {"protected": true, "aces": [["ALLOW", "Administrators", "FULL", "OI|CI"]]},
        "CLIENTS": {"aces": [["ALLOW", "GG_Techniciens", "READ", "OI|CI"]]},
        "CLIENTS/test-deny-explicite.docx": {"aces": [["DENY", "GG_Stagiaires", "READ", ""]]}}}

Keys are paths relative to the share root (``""`` = the root), ``/``-separated, matched
case-insensitively after NFC normalisation (as Windows does). An ACE is ``[type, principal, right,
flags]``: type ``ALLOW``/``DENY``; principal a directory name (``GG_RH``, ``AXONIX\\GG_RH``,
``Authenticated Users``) or a literal SID; right ``READ``/``FULL``/``MODIFY``/``WRITE``; flags a
``|``-separated subset of the icacls letters ``OI``, ``CI``, ``NP``, ``IO`` (possibly empty).

Fail closed: an entry that is malformed, or names a principal the directory cannot resolve, makes
its whole subtree :meth:`~ancre.models.Acl.nobody` with a reason naming the entry. Names are
resolved at each query of the manifest, so a group created after loading is picked up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError

from ancre.acl.directory import Directory
from ancre.acl.engine import (
    CONTAINER_INHERIT_ACE,
    INHERIT_ONLY_ACE,
    NAMED_MASKS,
    NO_PROPAGATE_INHERIT_ACE,
    OBJECT_INHERIT_ACE,
    Ace,
    AceType,
    SecurityDescriptor,
    inherit,
    read_acl,
)
from ancre.errors import AclError
from ancre.models import Acl, nfc

_FLAG_LETTERS = {
    "OI": OBJECT_INHERIT_ACE,
    "CI": CONTAINER_INHERIT_ACE,
    "NP": NO_PROPAGATE_INHERIT_ACE,
    "IO": INHERIT_ONLY_ACE,
}
_TYPES = {"ALLOW": AceType.ACCESS_ALLOWED, "DENY": AceType.ACCESS_DENIED}
_SID_RE = re.compile(r"^(sid:)?S-1-\d+(-\d+)*$", re.IGNORECASE)


def _fold(s: str) -> str:
    # Windows compares names with a per-character upcase table: no multi-character mappings (ß ≠ SS)
    return "".join(u if len(u := ch.upper()) == 1 else ch for ch in s)


def path_parts(rel_path: str) -> tuple[str, ...]:
    """``"Clients\\\\x.docx"`` → ``("Clients", "x.docx")``: NFC, ``/`` or ``\\`` separators, empty
    and ``.`` components dropped. ``""`` → ``()`` (the share root)."""
    norm = nfc(rel_path).replace("\\", "/")
    return tuple(p for p in norm.split("/") if p not in ("", "."))


def _key(parts: tuple[str, ...]) -> str:
    return "/".join(_fold(p) for p in parts)


@dataclass(frozen=True)
class ManifestAce:
    """One ACE as written in the manifest, principal not yet resolved to a SID."""

    type: AceType
    principal: str
    mask: int
    flags: int


@dataclass(frozen=True)
class ManifestEntry:
    """One manifest entry: ``key`` as written, ``protected`` (SE_DACL_PROTECTED), its explicit
    ACEs, and ``error`` — why the entry is unusable (its subtree is then nobody) or ``None``."""

    key: str
    protected: bool = False
    aces: tuple[ManifestAce, ...] = ()
    error: str | None = None


class _EntryModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    protected: StrictBool = False
    aces: tuple[tuple[StrictStr, StrictStr, StrictStr, StrictStr], ...] = ()


class _ManifestFile(BaseModel):
    """The file's top level; an unknown key is refused, named (the whole source then reads as
    nobody until it is fixed). Each entry is checked apart (:func:`_parse_entry`)."""

    model_config = ConfigDict(extra="forbid")
    entries: dict[str, object]
    share: StrictStr | None = None
    unc_root: StrictStr | None = None
    note: StrictStr | None = None
    """Free text for whoever maintains the file; not read."""


def _parse_entry(key: str, raw: object, where: str) -> ManifestEntry:
    try:
        m = _EntryModel.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "(entry)"
        return ManifestEntry(key, error=f"{where}: entry {key!r}: {loc}: {first['msg']}")
    aces: list[ManifestAce] = []
    for i, (raw_typ, raw_principal, raw_right, flags) in enumerate(m.aces):
        bad = f"{where}: entry {key!r}: aces.{i}:"
        typ, right, principal = raw_typ.strip().upper(), raw_right.strip().upper(), raw_principal.strip()
        if typ not in _TYPES:
            return ManifestEntry(key, error=f"{bad} type {typ!r} is not ALLOW or DENY")
        if right not in NAMED_MASKS:
            return ManifestEntry(key, error=f"{bad} right {right!r} is not one of {', '.join(NAMED_MASKS)}")
        if not principal:
            return ManifestEntry(key, error=f"{bad} empty principal")
        bits = 0
        for letter in (x.strip().upper() for x in flags.split("|")):
            if letter and letter not in _FLAG_LETTERS:
                return ManifestEntry(key, error=f"{bad} flag {letter!r} is not one of OI, CI, NP, IO")
            bits |= _FLAG_LETTERS.get(letter, 0)
        aces.append(ManifestAce(_TYPES[typ], principal, NAMED_MASKS[right], bits))
    return ManifestEntry(key, m.protected, tuple(aces))


class AclManifest:
    """A loaded ACL manifest; build it with :meth:`load`. ``share``/``unc_root`` are the file's
    optional top-level values (``"Partage"``, ``"\\\\SRV-FICHIERS\\Partage"``)."""

    def __init__(
        self,
        entries: Mapping[str, ManifestEntry],
        directory: Directory,
        *,
        where: str = "acl manifest",
        share: str | None = None,
        unc_root: str | None = None,
    ) -> None:
        self._entries = dict(entries)
        self.directory = directory
        self.where = where
        self.share = share
        self.unc_root = unc_root

    @classmethod
    def load(cls, path: Path, directory: Directory) -> AclManifest:
        """Read a manifest file. Raises :class:`~ancre.errors.AclError` when the file can't be read,
        isn't JSON, has no ``entries`` object or a top-level key other than ``entries``, ``share``,
        ``unc_root`` and ``note`` (named; the caller then fails closed for the whole source). A bad
        *entry* does not raise: it is kept as broken and its subtree reads as nobody. Two keys
        naming the same path (``CLIENTS`` / ``Clients``) break both."""
        where = f"acl manifest {path}"
        try:
            raw = json.loads(Path(path).read_bytes())
        except OSError as e:
            raise AclError(f"{where}: cannot read: {e.strerror or e}") from None
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
            raise AclError(f"{where}: not valid JSON: {e}") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("entries"), dict):
            raise AclError(f"{where}: expected an object with an 'entries' object")
        try:
            top = _ManifestFile.model_validate(raw)
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(x) for x in first["loc"]) or "(root)"
            raise AclError(f"{where}: {loc}: {first['msg']} (keys: entries, share, unc_root, note)") from None
        entries: dict[str, ManifestEntry] = {}
        for key, value in top.entries.items():
            k = _key(path_parts(key))
            if k in entries:
                msg = f"{where}: entries {entries[k].key!r} and {key!r} name the same path"
                entries[k] = ManifestEntry(entries[k].key, error=msg)
                continue
            entries[k] = _parse_entry(key, value, where)
        return cls(entries, directory, where=where, share=top.share, unc_root=top.unc_root)

    def entry(self, rel_path: str) -> ManifestEntry | None:
        """The manifest entry for exactly this path (case-insensitive, NFC), or ``None``."""
        return self._entries.get(_key(path_parts(rel_path)))

    def _resolve(self, entry: ManifestEntry) -> tuple[Ace, ...]:
        if entry.error is not None:
            raise AclError(entry.error)
        out: list[Ace] = []
        for a in entry.aces:
            if _SID_RE.match(a.principal):
                sid: str | None = a.principal.removeprefix("sid:")
            else:
                sid = self.directory.sid_of(a.principal)  # DirectoryError propagates
            if sid is None:
                raise AclError(f"{self.where}: entry {entry.key!r}: principal {a.principal!r} is unknown to the directory")
            out.append(Ace(a.type, sid, a.mask, a.flags))
        return tuple(out)

    def security_descriptor(self, rel_path: str, is_dir: bool) -> SecurityDescriptor:
        """The effective security descriptor of ``rel_path`` (``""`` = share root, always a folder):
        from the root down, each level takes its explicit ACEs from its entry (none if it has no
        entry) and inherits from its parent via :func:`~ancre.acl.engine.inherit`.

        Raises :class:`~ancre.errors.AclError` when the path or one of its ancestors has a broken
        entry or an unresolvable principal (message names the entry), and
        :class:`~ancre.errors.DirectoryError` when the directory can't be read.
        """
        parts = path_parts(rel_path)
        sd = SecurityDescriptor(dacl=())  # above the share root: nothing to inherit
        for depth in range(len(parts) + 1):
            entry = self._entries.get(_key(parts[:depth]))
            sd = inherit(
                sd,
                self._resolve(entry) if entry else (),
                child_is_container=depth < len(parts) or is_dir or depth == 0,
                protected=entry.protected if entry else False,
            )
        return sd

    def acl_for(self, rel_path: str, is_dir: bool = False) -> Acl:
        """Who may read ``rel_path``: ``read_acl(security_descriptor(rel_path, is_dir))``, or
        ``Acl.nobody(reason)`` when the subtree's entry is broken. Raises ``DirectoryError`` only."""
        try:
            sd = self.security_descriptor(rel_path, is_dir)
        except AclError as e:
            return Acl.nobody(str(e))
        return read_acl(sd, is_container=is_dir)

    def origin_of(self, rel_path: str, ace: Ace) -> str | None:
        """The manifest key of the nearest entry (``rel_path`` itself, then its ancestors) that
        states ``ace`` explicitly (same type, SID and mask), or ``None``. Used by explanations to
        say where an inherited ACE comes from."""
        parts = path_parts(rel_path)
        for depth in range(len(parts), -1, -1):
            entry = self._entries.get(_key(parts[:depth]))
            if entry is None:
                continue
            try:
                explicit = self._resolve(entry)
            except AclError:
                continue
            if any((a.type, a.sid, a.mask) == (ace.type, ace.sid, ace.mask) for a in explicit):
                return entry.key
        return None
