"""The audit log read back (docs/REPORTS.md, "Who saw what"): the daily files' records, from the files alone
(:mod:`ancre.audit.record` writes them) — so a document since deleted or re-permissioned, or a
user since gone from the directory, is still answered for. The admin's reports over them
(``ancre audit who-saw | user | stats``) are :mod:`ancre.reports.audit_log`.

Records. Every line is a JSON object; the chain's members (``prev``, ``prev_file``, ``hash``) are
left out. A line with an ``id`` (or ``question_id``, ``request_id``, ``record_id``) belongs with
the other lines of that id — a question's start and its outcome, written apart — and they are
read as one record, later members completing earlier ones; a line with a ``kind`` other than a
question's, or without a ``question``, is not a question (it still counts for ``audit user``).
Unknown members are kept as they are.

Pseudonymised logs (``[audit] pseudonymize``): ``user``, ``account`` and ``asked_for`` are
``hmac-sha256:<hex>``; given the key, a person is found by the HMAC of their names, and the
directory's accounts are named back from theirs (a name no longer in the directory stays a hash).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from ancre.acl.directory import Directory
from ancre.audit.chain import CHAIN_FIELDS, daily_files, file_day
from ancre.errors import AncreError, AuditError, DirectoryError

ID_KEYS = ("id", "question_id", "request_id", "record_id")
"""Members that link the lines of one question (the first present is used)."""
QUESTION_KINDS = frozenset({"question", "start", "outcome", "answer", "end"})
"""``kind`` values that belong to a question; a line with another kind is something else."""
_RELATIVE = re.compile(r"^(\d+)\s*([dhmw])$")


class BadPeriodError(AncreError):
    """A ``--since`` / ``--until`` value is not a date, a date-time or a duration (``7d``)."""


def parse_when(text: str, *, now: datetime | None = None, end_of_day: bool = False) -> datetime:
    """An aware UTC datetime from ``2026-01-15`` (midnight, or the day's end with ``end_of_day``),
    ``2026-01-15T08:30`` (UTC unless it has an offset) or a duration back from ``now``: ``7d``,
    ``12h``, ``30m``, ``2w``. Raises :class:`BadPeriodError` naming the value — also when it lies
    outside the years 1–9999 (``99999999d``)."""
    now = now or datetime.now(UTC)
    t = text.strip()
    m = _RELATIVE.match(t)
    said = repr(t if len(t) <= 40 else t[:40] + "…")
    try:
        if m:
            n, unit = int(m.group(1)), m.group(2)
            return now - {"d": timedelta(days=n), "h": timedelta(hours=n), "m": timedelta(minutes=n),
                          "w": timedelta(weeks=n)}[unit]
        if len(t) == 10:
            d = date.fromisoformat(t)
            return datetime.combine(d, time.max if end_of_day else time.min, UTC)
        dt = datetime.fromisoformat(t)
        return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    except OverflowError:
        raise BadPeriodError(f"{said}: out of range (a date between the years 1 and 9999)") from None
    except ValueError:
        if m:  # digits beyond what an int is read from
            raise BadPeriodError(f"{said}: out of range (a date between the years 1 and 9999)") from None
        raise BadPeriodError(f"{said}: not a date (2026-01-15), a date-time (2026-01-15T08:30) or a duration "
                             "(7d, 12h)") from None


@dataclass(frozen=True)
class Entry:
    """One record as read: ``data`` (the lines of its id merged, chain members removed), where
    its first line is (``file``, 1-based ``line``), its ``time`` (``None``: unreadable)."""

    data: Mapping[str, Any]
    file: str
    line: int
    time: datetime | None
    misplaced: bool = False
    """A line of it is not in its day's file (see :func:`read_entries`)."""

    @property
    def is_question(self) -> bool:
        """A question's record (it has a ``question`` and no foreign ``kind``)."""
        kind = self.data.get("kind")
        return isinstance(self.data.get("question"), str) and (kind is None or kind in QUESTION_KINDS)


def _time(v: object) -> datetime | None:
    if not isinstance(v, str):
        return None
    try:
        t = datetime.fromisoformat(v)
    except ValueError:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _id_of(obj: Mapping[str, Any]) -> str | None:
    for k in ID_KEYS:
        v = obj.get(k)
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            return f"{k}:{v}"
    return None


def _misplaced(obj: Mapping[str, Any], day: date) -> bool:
    """Whether a line is not in its day's file: its sealed ``day`` is another, or (a line of an
    older ancre, without one) its time is after the file's day — a record lands in its day's file
    or, finished late, in a later one, never in an earlier one."""
    sealed = obj.get("day")
    if isinstance(sealed, str):
        return sealed != day.isoformat()
    t = _time(obj.get("time"))
    return t is not None and t.date() > day


def _merge(merged: dict[str, dict[str, Any]], key: str, obj: Mapping[str, Any]) -> None:
    """Complete the record ``key`` with a later line of its id (its first line's time kept)."""
    first_time = merged[key].get("time")
    merged[key].update({k: v for k, v in obj.items() if v is not None or k not in merged[key]})
    if first_time is not None:
        merged[key]["time"] = first_time  # when it was asked
    merged[key].setdefault("_kinds", []).append(obj.get("kind"))


def read_entries(directory: Path, since: datetime | None = None, until: datetime | None = None) -> list[Entry]:
    """The records of the audit folder ``directory`` whose time is in ``[since, until]`` (either
    open), oldest first. Every daily file is read, whatever its name: a record moved to another
    day's file (renamed, merged) is still found, and marked :attr:`Entry.misplaced`. A line that
    is not JSON is skipped (``ancre audit verify`` names it). Raises
    :class:`~ancre.errors.AuditError` when the folder can't be read."""
    files = daily_files(Path(directory))
    if not files and not Path(directory).is_dir():
        raise AuditError(f"audit log {directory}: no such folder (is [audit] dir right?)")
    merged: dict[str, dict[str, Any]] = {}
    where: dict[str, tuple[str, int]] = {}
    moved: set[str] = set()
    for f in files:
        day = file_day(f)
        try:
            lines = f.read_bytes().splitlines()
        except OSError as e:
            raise AuditError(f"audit log {f}: cannot read it: {e}") from e
        for n, raw in enumerate(lines, 1):
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(obj, dict):
                continue
            out_of_place = _misplaced(obj, day)
            obj = {k: v for k, v in obj.items() if k not in CHAIN_FIELDS}
            key = _id_of(obj) or f"line:{f.name}:{n}"
            if out_of_place:
                moved.add(key)
            if key in merged:
                _merge(merged, key, obj)
            else:
                merged[key] = {**obj, "_kinds": [obj.get("kind")]}
                where[key] = (f.name, n)
    out = []
    for key, data in merged.items():
        t = _time(data.get("time"))
        if t is not None and ((since is not None and t < since) or (until is not None and t > until)):
            continue
        out.append(Entry(data, *where[key], t, key in moved))
    out.sort(key=lambda e: (e.time or datetime.min.replace(tzinfo=UTC), e.file, e.line))
    return out


def misplaced_note(entries: Iterable[Entry]) -> str | None:
    """A sentence for the admin when some of ``entries`` are not in their day's file (the log was
    changed: ``ancre audit verify`` names where), else ``None``."""
    n = sum(1 for e in entries if e.misplaced)
    if not n:
        return None
    return (f"{n} record(s) are not in their day's file (a daily file renamed or days merged): they are counted, "
            "but the log was changed — run `ancre audit verify`")


class Pseudonyms:
    """How people appear in the log: in clear, or as ``hmac-sha256:<hex>`` with ``key`` (RFC 2104
    HMAC-SHA256 of the name, as :meth:`ancre.audit.record.AuditLog.pseudonym` writes it)."""

    def __init__(self, key: bytes | None, directory: Directory | None = None) -> None:
        self.key = key
        self._names: dict[str, str] = {}
        if key is not None and directory is not None:
            try:
                for account in directory.users():
                    self._names[self.of(account)] = account
            except DirectoryError:
                pass

    def of(self, name: str) -> str:
        """The logged form of ``name``."""
        if self.key is None:
            return name
        return "hmac-sha256:" + hmac.new(self.key, name.encode(), hashlib.sha256).hexdigest()

    def reveal(self, logged: str | None) -> str | None:
        """The name behind a logged form when known (a directory account), else the form itself."""
        if logged is None:
            return None
        return self._names.get(logged, logged)


__all__ = [
    "ID_KEYS", "QUESTION_KINDS", "BadPeriodError", "Entry", "Pseudonyms", "misplaced_note", "parse_when", "read_entries",
]
