"""The audit log (docs/ARCHITECTURE.md "Data flow of a question" step 10; Swiss nLPD: who asked what, and what was shown).

JSON lines in a daily file ``audit-YYYY-MM-DD.jsonl`` (UTC date) under the log folder. Every
line has a ``kind`` and an ``id`` (32 hex characters, one per question):

- ``"answer"`` — one record for a question answered at once (``ask``, ``/query``, a
  non-streamed ``/v1`` answer, and a streamed refusal or extractive answer): who, the question,
  the sources shown, the rights, the controls, the verdict and the timings. It is written (and
  fsync'd) *before* the answer is returned: when it can't be written the answer is withheld.
- ``"start"`` then ``"outcome"`` — a question whose answer is streamed as the model writes it.
  The ``start`` record (who, the question, the sources put before the model, the rights, the
  timings so far) is written and fsync'd *before the model is called*, hence before the first
  byte of the answer leaves: when it can't be written no model is called and the answer is
  withheld (HTTP 503 ``audit_unavailable``). The ``outcome`` record, with the **same id**, is
  written when the answer ends — the controls, the verdict and the full timings — or when it
  stops early, with its ``error`` (``erreur_modele``; ``interrompue`` when the client left: written
  as soon as the disconnect is noticed, with the generation time up to then). A ``start`` without
  an ``outcome`` is a question whose process died mid-answer.

A line written by an older ancre has no ``kind`` and no ``id``: it is an ``answer``::

    {"time": "2026-01-15T08:30:00.123+00:00", "kind": "answer", "id": "9f1c…",
     "user": "alice.martin@axonix.ch", "account": "alice", "asked_for": null, "principals": "<sha256>",
     "question": "…", "sources": [{"filename", "doc_id", "location", "acl": "<Acl.digest()>",
     "rights": "live"}],
     "rights": [{"doc_id", "filename", "live": true, "outcome": "live", "readable": true,
                 "reason": null, "age_s": 0.0}],
     "controls": ["citation_inventee"], "invented": ["22_….docx"], "cited": [], "ancree": false,
     "verification": "non_requise", "unsourced": [], "neutralised": [],
     "unsupported_facts": [{"text": "CHF 3 000 HT", "kind": "montant", "sentence": "…",
                            "cited": ["03_….docx"], "reason": "absent"}],
     "timings_ms": {"retrieval": 812.4, "generation": 30211.0}, "error": null}

(with, after ``question``, ``"resolved_question": null, "resolution": null``, and after
``rights``, ``"versions": [{"documents": ["03_….docx", "03_…_v2024.docx"], "current":
"03_….docx", "reasons": ["…"], "related_by": "nom"}]``).

A ``start`` has the fields of an ``answer`` up to ``versions`` plus ``timings_ms`` (the verdict
fields are absent: there is none yet); an ``outcome`` has ``time``, ``kind``, ``id``, ``user``,
``account`` and the fields from ``controls`` on. A record of a question a model answered ends with
``model``: the model's name, the window sent (``num_ctx``), its context length, the prompt's
tokens (estimated or counted by the server, and their lower bound), what the server says it
evaluated (``prompt_eval_count``), why it stopped (``done_reason``) and the extracts left out to fit
(``dropped``; :mod:`ancre.query.window`). ``neutralised`` lists the addresses of links and
images of the model's answer that were shown as plain text (control ``lien_neutralise``,
:mod:`ancre.query.links`).

``question`` is the question as the user asked it; for a follow-up resolved from the conversation
(docs/ARCHITECTURE.md "Data flow of a question" step 1), ``resolved_question`` is the standalone
question that was answered and ``resolution`` how it was obtained (``regle``, ``modele``,
``regeneration``, ``non_resolue``; with ``instruction`` for a regenerate variant), both ``null``
for a question asked alone. ``unsupported_facts`` are control 5's findings; ``versions`` the
documents of the context that are versions of one another and which looked current.

``asked_for`` is the user name asked about when someone else asked on their behalf (an admin
through the control socket, ``user`` then ``unix:<login>``), else ``null``.
``rights`` lists every document whose rights were decided for the question — those put before
the model and those left out — with whether they were checked live at their source and the
outcome (:data:`ancre.query.live_acl.Outcome`: ``live``, ``changed``, ``gone``, ``unreachable``,
``stored``, ``no_source``, ``off``); each source's ``rights`` repeats its outcome.

- **One writer function**: every line, whatever its kind, is written by
  :meth:`AuditLog.write_entry` (under the log's lock), so a wrapper sees every line in order.
- **Append-only**: files are opened ``O_WRONLY | O_APPEND | O_CREAT`` and each record is one
  ``write`` (concurrent writers, even in other processes, never interleave within a line).
- **Mode 0600**, enforced with ``fchmod`` whatever the umask; the folder is created 0700.
- **Never lost on crash**: each record is flushed to the disk (``fsync``) before ``append``
  returns.
- **Who**: ``user`` is the identity as the caller gave it (the forwarded e-mail header exactly as
  received, or ``--as``), ``account`` the directory account it resolved to (sAMAccountName;
  ``null`` when the directory does not know it) — two fields, never merged.
- **Pseudonymisation**: with a key, ``user`` and ``account`` are ``hmac-sha256:<hex>`` (RFC 2104
  HMAC-SHA256 of the name) and the principals hash is keyed too, so neither can be reversed by hashing a
  directory listing; without a key, the principals hash is a plain SHA-256.
- **Retention**: :meth:`AuditLog.purge_expired` deletes the daily files older than
  ``retention_days`` (also run when a new day's file is opened); ``0`` keeps everything.
- **Tamper-evident**: every line goes through :meth:`AuditLog._write_line` wrapped by the hash
  chain (:mod:`ancre.audit.chain`: ``prev``/``hash`` members, HMAC with ``chain_key``, a
  signed checkpoint when retention deletes files), whatever the record's kind.

Thread-safe: one lock around rotation and writes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from ancre.audit.chain import Sealer
from ancre.audit.chain_writer import AuditChain
from ancre.audit.witness import DEV_LOG, Witness, open_witnesses
from ancre.errors import AuditError
from ancre.settings.query import AuditConfig

# What a record reads of the query core's objects. The audit sits below the query core
# (docs/ARCHITECTURE.md "Packages and layers"), so it names the members it reads, not the classes:
# each protocol bears the name of the query class it describes, which satisfies it.


class Source(Protocol):
    """A document put before the model (:class:`ancre.query.context.Source`)."""

    @property
    def filename(self) -> str: ...
    @property
    def doc_id(self) -> str: ...
    @property
    def location(self) -> str: ...
    @property
    def acl_digest(self) -> str: ...


class RightsCheck(Protocol):
    """The rights decision on one document (:class:`ancre.query.live_acl.RightsCheck`)."""

    @property
    def doc_id(self) -> str: ...
    @property
    def filename(self) -> str: ...
    @property
    def live(self) -> bool: ...
    @property
    def outcome(self) -> str: ...
    @property
    def readable(self) -> bool: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def age_s(self) -> float: ...


class UnsupportedFact(Protocol):
    """A fact control 5 found in no cited extract (:class:`ancre.query.facts.UnsupportedFact`)."""

    @property
    def text(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def sentence(self) -> str: ...
    @property
    def cited(self) -> Sequence[str]: ...
    @property
    def reason(self) -> str: ...


class Verdict(Protocol):
    """The controls' outcome for one answer (:class:`ancre.query.grounding.Verdict`)."""

    @property
    def ancree(self) -> bool | None: ...
    @property
    def controls(self) -> Sequence[str]: ...
    @property
    def invented(self) -> Sequence[str]: ...
    @property
    def cited(self) -> Sequence[str]: ...
    @property
    def verification(self) -> str: ...
    @property
    def unsourced(self) -> Sequence[str]: ...
    @property
    def facts(self) -> Sequence[UnsupportedFact]: ...


class Resolution(Protocol):
    """How the answered question came from the one asked (:class:`ancre.query.conversation.Resolution`)."""

    @property
    def question(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def instruction(self) -> str | None: ...
    @property
    def standalone(self) -> bool: ...


class VersionGroup(Protocol):
    """Documents of one context that are versions of one another (:class:`ancre.query.versions.VersionGroup`)."""

    @property
    def documents(self) -> Sequence[str]: ...
    @property
    def current(self) -> str | None: ...
    @property
    def reasons(self) -> Sequence[str]: ...
    @property
    def related_by(self) -> str: ...


class AuditKind(StrEnum):
    """The ``kind`` of an audit line (see the module doc)."""

    ANSWER = "answer"
    """A question and its outcome in one record, written before the answer is returned."""
    START = "start"
    """A streamed answer's first record, written before the model is called."""
    OUTCOME = "outcome"
    """A streamed answer's last record (same ``id`` as its ``start``)."""


def new_question_id() -> str:
    """A fresh question id: 32 lowercase hex characters (a random UUID4)."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class AuditRecord:
    """What is logged for one question (kind ``answer``, or ``start`` of a streamed answer).
    ``user``: the identity as given (raw e-mail header, ``--as``); ``account``: the directory
    account it resolved to (``None``: unknown); ``timings_ms``: step name → wall-clock
    milliseconds; ``time``: when the record was made (aware datetime; now, UTC, when ``None``);
    ``verdict``: ``None`` only for a ``start``."""

    user: str
    principals: frozenset[str]
    question: str
    sources: tuple[Source, ...]
    verdict: Verdict | None
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    time: datetime | None = None
    error: str | None = None
    """Why no answer reached the user (the model failed, the client left mid-stream); ``None``
    when one did."""
    account: str | None = None
    rights: tuple[RightsCheck, ...] = ()
    """The rights decision on every document considered (live check or not)."""
    asked_for: str | None = None
    """The user name as asked about when someone else asked on their behalf (an admin through
    the control socket: ``user`` is then ``unix:<login>``); ``None`` when the asker is the user."""
    kind: AuditKind = AuditKind.ANSWER
    """``answer`` or ``start`` (an ``outcome`` is an :class:`AuditOutcome`)."""
    id: str = field(default_factory=new_question_id)
    """The question's id, shared by a ``start`` and its ``outcome``."""
    neutralised: tuple[str, ...] = ()
    """Addresses of links and images of the answer shown as plain text (``answer`` only)."""
    resolution: Resolution | None = None
    """How the answered question came from ``question`` (a follow-up of a conversation)."""
    versions: tuple[VersionGroup, ...] = ()
    """Versions of one document found in the context."""
    model: Mapping[str, Any] | None = None
    """The model call's window and counts (:meth:`ancre.query.window.ModelRun.audit`), if any."""


@dataclass(frozen=True)
class AuditOutcome:
    """The ``outcome`` record of a streamed answer: ``id`` and ``user`` / ``account`` of its
    ``start``; ``verdict`` (``Verdict(None, verification="non_effectuee")`` when it stopped
    early), ``error`` (``None``: the answer reached its end), ``timings_ms`` (every step, the
    generation up to the end or the stop), ``neutralised`` (see :class:`AuditRecord`)."""

    id: str
    user: str
    verdict: Verdict
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None
    account: str | None = None
    neutralised: tuple[str, ...] = ()
    time: datetime | None = None
    model: Mapping[str, Any] | None = None
    """See :attr:`AuditRecord.model`."""


def _conversation(resolution: Resolution | None) -> dict[str, object]:
    """The audit fields of a follow-up: the standalone question answered and how it was made."""
    if resolution is None or resolution.standalone:
        return {"resolved_question": None, "resolution": None}
    return {
        "resolved_question": resolution.question,
        "resolution": {"method": str(resolution.method),
                       "instruction": str(resolution.instruction) if resolution.instruction else None},
    }


def load_or_create_key(path: Path) -> bytes:
    """The pseudonymisation key in ``path``; created (32 random bytes, mode 0600) when missing."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it first
        return path.read_bytes()
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


def audit_dir(cfg: AuditConfig, data_dir: Path) -> Path:
    """The folder of the daily files: ``audit.dir``, default ``<data_dir>/audit``."""
    return Path(cfg.dir) if cfg.dir is not None else Path(data_dir) / "audit"


def pseudonym_key(cfg: AuditConfig, data_dir: Path, *, create: bool = True) -> bytes | None:
    """The pseudonymisation key when ``audit.pseudonymize`` (``audit.key_file``, default
    ``<data_dir>/audit.key``; created when missing unless ``create`` is false, then ``None``)."""
    if not cfg.pseudonymize:
        return None
    path = Path(cfg.key_file or Path(data_dir) / "audit.key")
    if not create and not path.exists():
        return None
    return load_or_create_key(path)


def chain_key(cfg: AuditConfig) -> bytes | None:
    """The hash chain's HMAC key (``audit.chain_key_file``, created when missing), or ``None``."""
    return load_or_create_key(Path(cfg.chain_key_file)) if cfg.chain_key_file is not None else None


def witnesses(cfg: AuditConfig, data_dir: Path, key: bytes | None) -> list[Witness]:
    """The witnesses ``audit.witnesses`` names for the log of ``cfg`` (:mod:`ancre.audit.witness`;
    the state witness in ``<data_dir>/state.sqlite3``), sealing with the chain's ``key``."""
    return open_witnesses(cfg.witnesses, audit_dir(cfg, data_dir), Sealer(key), state_db=Path(data_dir) / "state.sqlite3",
                          syslog_socket=cfg.syslog_socket or DEV_LOG, syslog_files=cfg.syslog_files)


def open_audit_log(cfg: AuditConfig, data_dir: Path) -> AuditLog:
    """The audit log the ``[audit]`` settings describe (folder, retention, both keys, witnesses)."""
    key = chain_key(cfg)
    return AuditLog(audit_dir(cfg, data_dir), cfg.retention_days, pseudonym_key(cfg, data_dir), key,
                    witnesses(cfg, data_dir, key))


class AuditLog:
    """Append-only JSON-lines audit log in ``directory`` (see the module doc).

    ``retention_days``: daily files older than this are purged (``0``: never);
    ``pseudonymize_key``: HMAC key for user names, ``None`` to log them in clear;
    ``chain_key``: HMAC key of the hash chain, ``None`` for plain SHA-256; ``witnesses``: where
    each record's chain position and hash also go (:mod:`ancre.audit.witness`).
    Raises :class:`OSError` when the folder or file cannot be written.
    """

    def __init__(
        self, directory: Path, retention_days: int = 365, pseudonymize_key: bytes | None = None,
        chain_key: bytes | None = None, witnesses: Sequence[Witness] = (),
    ) -> None:
        self.directory = Path(directory)
        self.retention_days = retention_days
        self._key = pseudonymize_key
        self._chain = AuditChain(self.directory, chain_key, witnesses)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._day: date | None = None

    # ------------------------------------------------------------------ hashing

    def pseudonym(self, user: str) -> str:
        """The logged form of ``user``: itself, or ``hmac-sha256:<hex>`` with a key."""
        if self._key is None:
            return user
        return "hmac-sha256:" + hmac.new(self._key, user.encode(), hashlib.sha256).hexdigest()

    def principals_hash(self, principals: Iterable[str]) -> str:
        """Hex hash of the sorted principal set (keyed when pseudonymising)."""
        blob = json.dumps(sorted(principals), separators=(",", ":")).encode()
        if self._key is None:
            return hashlib.sha256(blob).hexdigest()
        return hmac.new(self._key, blob, hashlib.sha256).hexdigest()

    # ------------------------------------------------------------------ writing

    def path_for(self, day: date) -> Path:
        """The daily file of ``day`` (UTC)."""
        return self.directory / f"audit-{day.isoformat()}.jsonl"

    def entry(self, record: AuditRecord | AuditOutcome) -> dict[str, Any]:
        """The JSON object written for ``record`` (see the module doc for each kind's fields)."""
        when = (record.time or datetime.now(UTC)).astimezone(UTC)
        head: dict[str, Any] = {
            "time": when.isoformat(timespec="milliseconds"),
            "kind": str(AuditKind.OUTCOME if isinstance(record, AuditOutcome) else record.kind),
            "id": record.id,
            "user": self.pseudonym(record.user),
            "account": self.pseudonym(record.account) if record.account is not None else None,
        }
        model = {"model": dict(record.model)} if record.model is not None else {}
        if isinstance(record, AuditOutcome):
            return {**head, **self._verdict_fields(record.verdict, record.neutralised),
                    **self._tail(record.timings_ms, record.error), **model}
        rights = {c.doc_id: c for c in record.rights}
        entry: dict[str, Any] = {
            **head,
            "asked_for": self.pseudonym(record.asked_for) if record.asked_for is not None else None,
            "principals": self.principals_hash(record.principals),
            "question": record.question,
            **_conversation(record.resolution),
            "sources": [
                {
                    "filename": s.filename, "doc_id": s.doc_id, "location": s.location, "acl": s.acl_digest,
                    "rights": rights[s.doc_id].outcome if s.doc_id in rights else None,
                }
                for s in record.sources
            ],
            "rights": [
                {
                    "doc_id": c.doc_id, "filename": c.filename, "live": c.live, "outcome": c.outcome,
                    "readable": c.readable, "reason": c.reason, "age_s": c.age_s,
                }
                for c in record.rights
            ],
            "versions": [
                {"documents": list(g.documents), "current": g.current, "reasons": list(g.reasons), "related_by": g.related_by}
                for g in record.versions
            ],
        }
        if record.kind is AuditKind.START or record.verdict is None:
            return {**entry, "timings_ms": self._tail(record.timings_ms, None)["timings_ms"], **model}
        return {**entry, **self._verdict_fields(record.verdict, record.neutralised),
                **self._tail(record.timings_ms, record.error), **model}

    @staticmethod
    def _verdict_fields(v: Verdict, neutralised: tuple[str, ...]) -> dict[str, Any]:
        return {
            "controls": list(v.controls),
            "invented": list(v.invented),
            "cited": list(v.cited),
            "ancree": v.ancree,
            "verification": v.verification,
            "unsourced": list(v.unsourced),
            "neutralised": list(neutralised),
            "unsupported_facts": [
                {"text": f.text, "kind": str(f.kind), "sentence": f.sentence, "cited": list(f.cited), "reason": str(f.reason)}
                for f in v.facts
            ],
        }

    @staticmethod
    def _tail(timings_ms: Mapping[str, float], error: str | None) -> dict[str, Any]:
        return {"timings_ms": {k: round(float(ms), 1) for k, ms in timings_ms.items()}, "error": error}

    @staticmethod
    def dumps(entry: Mapping[str, Any]) -> str:
        """``entry`` as one JSON line (without newline); always encodable as UTF-8 (text that is
        not, such as a lone surrogate, is written as JSON ``\\u`` escapes)."""
        text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (e.g. in a model's output): escaped, still logged
            text = json.dumps(entry, ensure_ascii=True, separators=(",", ":"))
        return text

    def line(self, record: AuditRecord | AuditOutcome) -> str:
        """The JSON line (without newline) written for ``record``."""
        return self.dumps(self.entry(record))

    def _open(self, day: date) -> int:
        if self._fd is not None and self._day == day:
            return self._fd
        self._close()
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path_for(day), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        os.fchmod(fd, 0o600)
        self._fd, self._day = fd, day
        return fd

    def _write_line(self, day: date, data: bytes) -> None:
        """Append ``data`` (whole lines) to the daily file of ``day`` in one ``write`` and fsync."""
        fd = self._open(day)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)

    def append(self, record: AuditRecord | AuditOutcome) -> None:
        """Write one record (any kind) and fsync it. Raises :class:`~ancre.errors.AuditError`
        (naming the folder and the OS error) on a write failure."""
        when = (record.time or datetime.now(UTC)).astimezone(UTC)
        if record.time is None:
            record = replace(record, time=when)
        self.write_entry(self.entry(record), when)

    def write_entry(self, entry: Mapping[str, Any], when: datetime) -> None:
        """Append ``entry`` as one line to the daily file of ``when`` (UTC) and fsync it: the one
        function through which every audit line is written (see :meth:`_append_line`). Raises
        :class:`~ancre.errors.AuditError` on a write failure."""
        self._append_line(when.astimezone(UTC), self.dumps(entry))

    def _append_line(self, when: datetime, text: str) -> None:
        """Chain ``text`` (one JSON object) and append it to the file of ``when``'s UTC day (the
        one function every record goes through); a new day's file purges past retention."""
        with self._lock:
            try:
                opened = self._day
                day = self._chain.append(when.date(), text, self._write_line)
                if day != opened:
                    self._purge(datetime.combine(day, datetime.min.time(), UTC))
            except OSError as e:
                raise AuditError(f"audit log {self.directory}: cannot write the record: {e}") from e

    # ------------------------------------------------------------------ retention

    def _purge(self, now: datetime) -> list[Path]:
        if self.retention_days <= 0 or not self.directory.is_dir():
            return []
        cutoff = now.astimezone(UTC).date() - timedelta(days=self.retention_days)
        if self._day is not None and self._day < cutoff:
            self._close()
        return self._chain.purge(cutoff)  # a checkpoint first: the chain stays verifiable

    def purge_expired(self, now: datetime | None = None) -> list[Path]:
        """Delete the daily files whose date is more than ``retention_days`` days before ``now``
        (UTC; default the current time), leaving a checkpoint of them in the chain. Returns the
        deleted paths, oldest first."""
        with self._lock:
            return self._purge(now or datetime.now(UTC))

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = self._day = None

    def close(self) -> None:
        """Close the current file and release the witnesses."""
        with self._lock:
            self._close()
            self._chain.close()


__all__ = [
    "AuditKind", "AuditLog", "AuditOutcome", "AuditRecord", "Resolution", "RightsCheck", "Source", "UnsupportedFact",
    "Verdict", "VersionGroup", "audit_dir", "chain_key", "load_or_create_key", "new_question_id", "open_audit_log",
    "pseudonym_key", "witnesses",
]
