"""The audit log read back (README "Who saw what"): ``ancre audit who-saw``, ``ancre audit user``
and ``ancre audit stats``, from the daily files alone (:mod:`ancre.query.audit`) — so a document
since deleted or re-permissioned, or a user since gone from the directory, is still answered for.

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
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from ancre.acl.directory import Directory, resolve_account
from ancre.errors import AncreError, AuditError, DirectoryError
from ancre.models import fold_name, nfc
from ancre.query.audit_chain import CHAIN_FIELDS, daily_files, file_day
from ancre.query.grounding import CONTROL_NO_CHUNK, CONTROL_REFUSAL

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
    ``12h``, ``30m``, ``2w``. Raises :class:`BadPeriodError` naming the value."""
    now = now or datetime.now(UTC)
    t = text.strip()
    m = _RELATIVE.match(t)
    if m:
        n, unit = int(m.group(1)), m.group(2)
        return now - {"d": timedelta(days=n), "h": timedelta(hours=n), "m": timedelta(minutes=n),
                      "w": timedelta(weeks=n)}[unit]
    try:
        if len(t) == 10:
            d = date.fromisoformat(t)
            return datetime.combine(d, time.max if end_of_day else time.min, UTC)
        dt = datetime.fromisoformat(t)
    except ValueError:
        raise BadPeriodError(f"{text!r}: not a date (2026-01-15), a date-time (2026-01-15T08:30) or a duration "
                             "(7d, 12h)") from None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


@dataclass(frozen=True)
class Entry:
    """One record as read: ``data`` (the lines of its id merged, chain members removed), where
    its first line is (``file``, 1-based ``line``), its ``time`` (``None``: unreadable)."""

    data: Mapping[str, Any]
    file: str
    line: int
    time: datetime | None

    @property
    def is_question(self) -> bool:
        """A question's record (it has a ``question`` and no foreign ``kind``)."""
        kind = self.data.get("kind")
        return isinstance(self.data.get("question"), str) and (kind is None or kind in QUESTION_KINDS)

    @property
    def refused(self) -> bool:
        """Answered with the standard refusal (no extract, or the model's refusal)."""
        controls = self.data.get("controls") or ()
        return CONTROL_NO_CHUNK in controls or CONTROL_REFUSAL in controls

    @property
    def outcome(self) -> str:
        """``erreur`` (no answer reached the user), ``refus`` or ``réponse``."""
        if self.data.get("error"):
            return "erreur"
        return "refus" if self.refused else "réponse"


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


def read_entries(directory: Path, since: datetime | None = None, until: datetime | None = None) -> list[Entry]:
    """The records of the audit folder ``directory`` whose time is in ``[since, until]`` (either
    open), oldest first. A line that is not JSON is skipped (``ancre audit verify`` names it).
    Raises :class:`~ancre.errors.AuditError` when the folder can't be read."""
    files = daily_files(Path(directory))
    if not files and not Path(directory).is_dir():
        raise AuditError(f"audit log {directory}: no such folder (is [audit] dir right?)")
    merged: dict[str, dict[str, Any]] = {}
    where: dict[str, tuple[str, int]] = {}
    order: list[str] = []
    for f in files:
        day = file_day(f)
        # a record lands in its day's file or a later one: files before `since` can be skipped
        if since is not None and day < since.date() - timedelta(days=1):
            continue
        if until is not None and day > until.date() + timedelta(days=1):
            continue
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
            obj = {k: v for k, v in obj.items() if k not in CHAIN_FIELDS}
            key = _id_of(obj) or f"line:{f.name}:{n}"
            if key in merged:
                first_time = merged[key].get("time")
                merged[key].update({k: v for k, v in obj.items() if v is not None or k not in merged[key]})
                if first_time is not None:
                    merged[key]["time"] = first_time  # when it was asked
                kinds = merged[key].setdefault("_kinds", [])
                kinds.append(obj.get("kind"))
            else:
                merged[key] = {**obj, "_kinds": [obj.get("kind")]}
                where[key] = (f.name, n)
                order.append(key)
    out = []
    for key in order:
        data = merged[key]
        t = _time(data.get("time"))
        if t is not None and ((since is not None and t < since) or (until is not None and t > until)):
            continue
        out.append(Entry(data, *where[key], t))
    out.sort(key=lambda e: (e.time or datetime.min.replace(tzinfo=UTC), e.file, e.line))
    return out


class Pseudonyms:
    """How people appear in the log: in clear, or as ``hmac-sha256:<hex>`` with ``key`` (RFC 2104
    HMAC-SHA256 of the name, as :meth:`ancre.query.audit.AuditLog.pseudonym` writes it)."""

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


def _norm(path: str) -> str:
    """A path, UNC path or URL as compared: NFC, ``/`` separators, no trailing ``/``, ASCII
    letters lowercased (share, server and SharePoint names are case-insensitive)."""
    p = nfc(path).replace("\\", "/").rstrip("/")
    return p.translate(str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz"))


@dataclass(frozen=True)
class Target:
    """What ``who-saw`` looks for: full paths (UNC or URL, file or folder) and doc ids."""

    paths: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = ()

    @classmethod
    def of(cls, given: str, roots: Mapping[str, str]) -> Target:
        """``given``: a UNC path or URL (a file or a folder), a document id (``source:native id``),
        or a path relative to the root of a source (``RH/Grille.docx``, ``RH``); ``roots``:
        source id → its ``unc_root`` (or local root) for the last form."""
        g = given.strip()
        if g.startswith(("\\\\", "//")) or "://" in g:
            return cls(paths=(_norm(g),))
        head, _, rest = g.partition(":")
        ids = (g,) if head in roots and rest else ()
        rel = g.replace("\\", "/").strip("/")
        paths = tuple(_norm(root.rstrip("\\/") + "/" + rel) if rel else _norm(root) for root in roots.values())
        return cls(paths=paths, doc_ids=ids)

    def matches(self, source: Mapping[str, Any]) -> bool:
        """Whether a logged source (``{"filename", "doc_id", "location", …}``) is this target or
        lies under it."""
        if source.get("doc_id") in self.doc_ids:
            return True
        folder = str(source.get("location") or "").replace("\\", "/").rstrip("/")
        full = _norm(folder + "/" + str(source.get("filename") or ""))
        return any(full == p or full.startswith(p + "/") for p in self.paths)


@dataclass(frozen=True)
class Sighting:
    """One time a document was put before the model for someone (``ancre audit who-saw``):
    when, who (``user`` as given, ``account``, ``asked_for``; named back when pseudonymised), the
    question, the document (file name, folder, id, its ACL hash then), the outcome (``réponse`` /
    ``refus`` / ``erreur``), whether the answer cited it, and its rights *now* (``unchanged``,
    ``changed``, ``deleted``; ``None``: unknown)."""

    time: str | None
    user: str | None
    account: str | None
    asked_for: str | None
    question: str
    filename: str
    location: str
    doc_id: str
    acl: str | None
    outcome: str
    cited: bool
    now: str | None = None
    record: str = ""


@dataclass(frozen=True)
class WhoSaw:
    """The answer of :func:`who_saw`: the sightings (oldest first), the distinct people, the
    period, and notes (e.g. users still pseudonymised)."""

    target: str
    since: str | None
    until: str | None
    sightings: tuple[Sighting, ...]
    people: tuple[str, ...]
    notes: tuple[str, ...] = ()


DocState = Mapping[str, str | None]
"""doc id → its ACL hash in the index now (``None``: known but its ACL unknown); a doc id absent
from the mapping is no longer indexed."""


def who_saw(
    entries: Iterable[Entry],
    target: Target,
    given: str,
    pseudonyms: Pseudonyms,
    *,
    now_state: DocState | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> WhoSaw:
    """Every time a document of ``target`` was among a question's sources (see the module doc);
    ``now_state``: the index's current ACL hashes, to say whether each document's rights changed
    since (``None``: not said)."""
    rows = []
    for e in entries:
        if not e.is_question:
            continue
        cited = {nfc(str(c)) for c in e.data.get("cited") or ()}
        for s in e.data.get("sources") or ():
            if not isinstance(s, dict) or not target.matches(s):
                continue
            doc_id = str(s.get("doc_id") or "")
            now = None
            if now_state is not None:
                now = "deleted" if doc_id not in now_state else ("unchanged" if now_state[doc_id] == s.get("acl") else "changed")
            rows.append(Sighting(
                time=e.data.get("time"), user=pseudonyms.reveal(e.data.get("user")),
                account=pseudonyms.reveal(e.data.get("account")), asked_for=pseudonyms.reveal(e.data.get("asked_for")),
                question=str(e.data.get("question")), filename=str(s.get("filename") or ""),
                location=str(s.get("location") or ""), doc_id=doc_id, acl=s.get("acl"), outcome=e.outcome,
                cited=nfc(str(s.get("filename") or "")) in cited, now=now,
                record=f"{e.file}:{e.line}",
            ))
    people = sorted({r.account or r.user or "?" for r in rows})
    notes = []
    if any((p or "").startswith("hmac-sha256:") for p in people):
        notes.append("some users are pseudonymised and not in the directory (or no key was given): "
                     "they are shown as their HMAC")
    return WhoSaw(given, since.isoformat() if since else None, until.isoformat() if until else None,
                  tuple(rows), tuple(people), tuple(notes))


def subject_forms(user: str, directory: Directory | None, pseudonyms: Pseudonyms) -> tuple[str | None, set[str]]:
    """The directory account ``user`` designates (``None``: unknown) and every form the log may
    hold them under (the name as given, the account; their HMACs when pseudonymised)."""
    account = None
    if directory is not None:
        try:
            account = resolve_account(directory, user)
        except DirectoryError:
            account = None
    names = {user, fold_name(user)} | ({account} if account else set())
    return account, {pseudonyms.of(n) for n in names}


def user_records(entries: Iterable[Entry], forms: set[str], pseudonyms: Pseudonyms) -> list[dict[str, Any]]:
    """Every record about a person (``forms`` from :func:`subject_forms`): asked by them, or asked
    on their behalf. In clear logs names compare after :func:`~ancre.models.fold_name`."""
    folded = {fold_name(f) for f in forms} if pseudonyms.key is None else forms
    out = []
    for e in entries:
        fields = [e.data.get(k) for k in ("user", "account", "asked_for")]
        vals = {fold_name(v) if pseudonyms.key is None else v for v in fields if isinstance(v, str)}
        if vals & folded:
            rec = {k: v for k, v in e.data.items() if k != "_kinds"}
            for k in ("user", "account", "asked_for"):
                if isinstance(rec.get(k), str):
                    rec[k] = pseudonyms.reveal(rec[k])
            rec["_record"] = f"{e.file}:{e.line}"
            out.append(rec)
    return out


@dataclass(frozen=True)
class DayStats:
    """One UTC day: questions, refusals, ungrounded answers (``ancree`` false), answers whose
    grounding was not established (``ancree`` null, no error), errors (no answer delivered),
    distinct users."""

    day: str
    questions: int = 0
    refusals: int = 0
    ungrounded: int = 0
    not_established: int = 0
    errors: int = 0
    users: int = 0


@dataclass(frozen=True)
class Stats:
    """``ancre audit stats``: per day (oldest first) and in total, the controls fired (name →
    count), the judge's verifications (value → count) and the other record kinds seen."""

    since: str | None
    until: str | None
    days: tuple[DayStats, ...]
    total: DayStats
    controls: Mapping[str, int] = field(default_factory=dict)
    verification: Mapping[str, int] = field(default_factory=dict)
    other_records: Mapping[str, int] = field(default_factory=dict)


def stats(entries: Sequence[Entry], since: datetime | None = None, until: datetime | None = None) -> Stats:
    """Counts over ``entries`` (see :class:`Stats`)."""
    per_day: dict[str, Counter[str]] = {}
    users: dict[str, set[str]] = {}
    controls: Counter[str] = Counter()
    verification: Counter[str] = Counter()
    other: Counter[str] = Counter()
    all_users: set[str] = set()
    for e in entries:
        if not e.is_question:
            other[str(e.data.get("kind") or "sans question")] += 1
            continue
        day = e.time.date().isoformat() if e.time else "?"
        c = per_day.setdefault(day, Counter())
        c["questions"] += 1
        who = str(e.data.get("account") or e.data.get("user") or "?")
        users.setdefault(day, set()).add(who)
        all_users.add(who)
        if e.data.get("error"):
            c["errors"] += 1
        elif e.refused:
            c["refusals"] += 1
        elif e.data.get("ancree") is False:
            c["ungrounded"] += 1
        elif e.data.get("ancree") is None:
            c["not_established"] += 1
        controls.update(str(x) for x in e.data.get("controls") or ())
        if e.data.get("verification"):
            verification[str(e.data["verification"])] += 1

    def row(day: str, c: Counter[str], n_users: int) -> DayStats:
        return DayStats(day, c["questions"], c["refusals"], c["ungrounded"], c["not_established"], c["errors"], n_users)

    days = tuple(row(d, per_day[d], len(users[d])) for d in sorted(per_day))
    total = row("total", sum(per_day.values(), Counter()), len(all_users))
    return Stats(since.isoformat() if since else None, until.isoformat() if until else None, days, total,
                 dict(controls.most_common()), dict(verification.most_common()), dict(other.most_common()))


def json_default(o: object) -> object:
    """For :func:`json.dumps` of these reports (dataclasses)."""
    from dataclasses import asdict, is_dataclass

    if is_dataclass(o) and not isinstance(o, type):
        return asdict(o)
    raise TypeError(type(o).__name__)


__all__ = [
    "BadPeriodError", "DayStats", "DocState", "Entry", "Pseudonyms", "Sighting", "Stats", "Target", "WhoSaw",
    "json_default", "parse_when", "read_entries", "stats", "subject_forms", "user_records", "who_saw",
]
