"""The audit log (docs/ARCHITECTURE.md "Data flow of a question" step 10; Swiss nLPD: who asked what, and what was shown).

One JSON line per question in a daily file ``audit-YYYY-MM-DD.jsonl`` (UTC date) under the log
folder::

    {"time": "2026-01-15T08:30:00.123+00:00", "user": "alice.martin@axonix.ch", "account": "alice",
     "asked_for": null, "principals": "<sha256>",
     "question": "…", "sources": [{"filename", "doc_id", "location", "acl": "<Acl.digest()>",
     "rights": "live"}],
     "rights": [{"doc_id", "filename", "live": true, "outcome": "live", "readable": true,
                 "reason": null, "age_s": 0.0}],
     "controls": ["citation_inventee"], "invented": ["22_….docx"], "ancree": false,
     "verification": "non_requise", "timings_ms": {"retrieval": 812.4, "llm": 30211.0},
     "error": null}

``asked_for`` is the user name asked about when someone else asked on their behalf (an admin
through the control socket, ``user`` then ``unix:<login>``), else ``null``.
``rights`` lists every document whose rights were decided for the question — those put before
the model and those left out — with whether they were checked live at their source and the
outcome (:data:`ancre.query.live_acl.Outcome`: ``live``, ``changed``, ``gone``, ``unreachable``,
``stored``, ``no_source``, ``off``); each source's ``rights`` repeats its outcome.

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
  chain (:mod:`ancre.query.audit_chain`: ``prev``/``hash`` members, HMAC with ``chain_key``, a
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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from ancre.errors import AuditError
from ancre.query.audit_chain import FILE_RE, AuditChain  # noqa: F401 - FILE_RE: the daily file names
from ancre.query.context import Source
from ancre.query.grounding import Verdict
from ancre.query.live_acl import RightsCheck
from ancre.settings.query import AuditConfig


@dataclass(frozen=True)
class AuditRecord:
    """What is logged for one question. ``user``: the identity as given (raw e-mail header,
    ``--as``); ``account``: the directory account it resolved to (``None``: unknown);
    ``timings_ms``: step name → wall-clock milliseconds; ``time``: when the question was
    answered (aware datetime; now, UTC, when ``None``)."""

    user: str
    principals: frozenset[str]
    question: str
    sources: tuple[Source, ...]
    verdict: Verdict
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


def open_audit_log(cfg: AuditConfig, data_dir: Path) -> AuditLog:
    """The audit log the ``[audit]`` settings describe (folder, retention, both keys)."""
    return AuditLog(audit_dir(cfg, data_dir), cfg.retention_days, pseudonym_key(cfg, data_dir), chain_key(cfg))


class AuditLog:
    """Append-only JSON-lines audit log in ``directory`` (see the module doc).

    ``retention_days``: daily files older than this are purged (``0``: never);
    ``pseudonymize_key``: HMAC key for user names, ``None`` to log them in clear;
    ``chain_key``: HMAC key of the hash chain, ``None`` for plain SHA-256.
    Raises :class:`OSError` when the folder or file cannot be written.
    """

    def __init__(
        self, directory: Path, retention_days: int = 365, pseudonymize_key: bytes | None = None,
        chain_key: bytes | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.retention_days = retention_days
        self._key = pseudonymize_key
        self._chain = AuditChain(self.directory, chain_key)
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

    def line(self, record: AuditRecord) -> str:
        """The JSON line (without newline) written for ``record``; always encodable as UTF-8 (text
        that is not, such as a lone surrogate, is written as JSON ``\\u`` escapes)."""
        when = (record.time or datetime.now(timezone.utc)).astimezone(timezone.utc)
        v = record.verdict
        rights = {c.doc_id: c for c in record.rights}
        entry = {
            "time": when.isoformat(timespec="milliseconds"),
            "user": self.pseudonym(record.user),
            "account": self.pseudonym(record.account) if record.account is not None else None,
            "asked_for": self.pseudonym(record.asked_for) if record.asked_for is not None else None,
            "principals": self.principals_hash(record.principals),
            "question": record.question,
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
            "controls": list(v.controls),
            "invented": list(v.invented),
            "cited": list(v.cited),
            "ancree": v.ancree,
            "verification": v.verification,
            "unsourced": list(v.unsourced),
            "timings_ms": {k: round(float(ms), 1) for k, ms in record.timings_ms.items()},
            "error": record.error,
        }
        text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (e.g. in a model's output): escaped, still logged
            text = json.dumps(entry, ensure_ascii=True, separators=(",", ":"))
        return text

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

    def append(self, record: AuditRecord) -> None:
        """Write one record and fsync it. Raises :class:`~ancre.errors.AuditError` (naming the
        folder and the OS error) on a write failure."""
        when = (record.time or datetime.now(timezone.utc)).astimezone(timezone.utc)
        if record.time is None:
            record = replace(record, time=when)
        self._append_line(when, self.line(record))

    def _append_line(self, when: datetime, text: str) -> None:
        """Chain ``text`` (one JSON object) and append it to the file of ``when``'s UTC day (the
        one function every record goes through); a new day's file purges past retention."""
        with self._lock:
            try:
                opened = self._day
                day = self._chain.append(when.date(), text, self._write_line)
                if day != opened:
                    self._purge(datetime.combine(day, datetime.min.time(), timezone.utc))
            except OSError as e:
                raise AuditError(f"audit log {self.directory}: cannot write the record: {e}") from e

    # ------------------------------------------------------------------ retention

    def _purge(self, now: datetime) -> list[Path]:
        if self.retention_days <= 0 or not self.directory.is_dir():
            return []
        cutoff = now.astimezone(timezone.utc).date() - timedelta(days=self.retention_days)
        if self._day is not None and self._day < cutoff:
            self._close()
        return self._chain.purge(cutoff)  # a checkpoint first: the chain stays verifiable

    def purge_expired(self, now: datetime | None = None) -> list[Path]:
        """Delete the daily files whose date is more than ``retention_days`` days before ``now``
        (UTC; default the current time), leaving a checkpoint of them in the chain. Returns the
        deleted paths, oldest first."""
        with self._lock:
            return self._purge(now or datetime.now(timezone.utc))

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = self._day = None

    def close(self) -> None:
        """Close the current file."""
        with self._lock:
            self._close()


__all__ = [
    "AuditLog", "AuditRecord", "audit_dir", "chain_key", "load_or_create_key", "open_audit_log", "pseudonym_key",
]
