"""The admin's reports over the audit log (docs/REPORTS.md, "Who saw what"): ``ancre audit who-saw``,
``ancre audit user`` and ``ancre audit stats``, over the records :mod:`ancre.audit.reading` reads
back from the daily files alone — so a document since deleted or re-permissioned, or a user since
gone from the directory, is still answered for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ancre.acl.directory import Directory, resolve_account
from ancre.audit.reading import Entry, Pseudonyms, misplaced_note
from ancre.errors import DirectoryError
from ancre.models import fold_name, nfc
from ancre.query.grounding import CONTROL_NO_CHUNK, CONTROL_REFUSAL


def refused(entry: Entry) -> bool:
    """Whether a question was answered with the standard refusal (no extract, or the model's refusal)."""
    controls = entry.data.get("controls") or ()
    return CONTROL_NO_CHUNK in controls or CONTROL_REFUSAL in controls


def outcome(entry: Entry) -> str:
    """A question's outcome: ``erreur`` (no answer reached the user), ``refus`` or ``réponse``."""
    if entry.data.get("error"):
        return "erreur"
    return "refus" if refused(entry) else "réponse"


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
    entries = list(entries)
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
                location=str(s.get("location") or ""), doc_id=doc_id, acl=s.get("acl"), outcome=outcome(e),
                cited=nfc(str(s.get("filename") or "")) in cited, now=now,
                record=f"{e.file}:{e.line}",
            ))
    people = sorted({r.account or r.user or "?" for r in rows})
    notes = [n for n in (misplaced_note(entries),) if n]
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
    count), the judge's verifications (value → count), the other record kinds seen, and notes
    for the admin (records not in their day's file)."""

    since: str | None
    until: str | None
    days: tuple[DayStats, ...]
    total: DayStats
    controls: Mapping[str, int] = field(default_factory=dict)
    verification: Mapping[str, int] = field(default_factory=dict)
    other_records: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


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
        elif refused(e):
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
    notes = tuple(n for n in (misplaced_note(entries),) if n)
    return Stats(since.isoformat() if since else None, until.isoformat() if until else None, days, total,
                 dict(controls.most_common()), dict(verification.most_common()), dict(other.most_common()), notes)


def json_default(o: object) -> object:
    """For :func:`json.dumps` of these reports (dataclasses)."""
    from dataclasses import asdict, is_dataclass

    if is_dataclass(o) and not isinstance(o, type):
        return asdict(o)
    raise TypeError(type(o).__name__)


__all__ = [
    "DayStats", "DocState", "Sighting", "Stats", "Target", "WhoSaw", "json_default", "outcome", "refused", "stats",
    "subject_forms", "user_records", "who_saw",
]
