"""Witnesses of the audit chain: where each record's chain position and hash are also kept, out
of reach of whoever can rewrite the audit folder, so that `ancre audit verify` finds records cut
from the end of the log, a whole log deleted, or a log rolled back to an older copy (docs/SECURITY.md "A
tamper-evident audit", the threat table).

A **mark** is what a witness keeps of one record: the audit folder (its absolute path, so that
several logs can share a witness), the record's chain position ``seq`` (1 for the log's first
record), its daily file, its ``hash`` and when it was witnessed; sealed with the chain's sealer
(HMAC-SHA256 with ``audit.chain_key_file``: then nobody without the key can forge a mark)::

    {"dir":"/var/lib/ancre/audit","seq":42,"file":"audit-2026-01-15.jsonl","hash":"sha256:…",
     "time":"2026-01-15T08:30:00.123+00:00","seal":"sha256:…"}

The writer (:class:`~ancre.audit.chain_writer.AuditChain`) gives every record's mark to every
configured witness right after the line is on disk, under the folder's lock; a witness that can't
take it fails the write (the answer is withheld, as when the line itself can't be written).

Two kinds (:class:`Witness`, the interface; ``[audit] witnesses``):

- ``state`` (:class:`StateWitness`): the newest mark, in the table ``audit_witness`` of the state
  database (``<data_dir>/state.sqlite3``, SQLite). It never moves back: a mark whose ``seq`` is
  not beyond the kept one is not kept, so a log rolled back and written again still differs from
  it. One mark is enough — the chain binds every record before it to it.
- ``syslog`` (:class:`SyslogWitness`): every mark, sent to the system log (RFC 3164 over the
  Unix datagram socket ``audit.syslog_socket``, ``/dev/log`` by default — journald's or rsyslog's —,
  facility ``authpriv``, tag ``ancre-audit``); read back by ``verify`` from the journal
  (``journalctl --output=json``, :class:`JournalMarks`) or from the files the syslog daemon
  writes (``audit.syslog_files``, :class:`FileMarks`; rotated ``.gz`` files too). The service's
  user can add to the system log but not rewrite or delete what is in it.

What each defeats and what it does not is the threat table of docs/SECURITY.md; root on the machine defeats
every witness kept on it.
"""

from __future__ import annotations

import gzip
import json
import logging
import logging.handlers
import re
import sqlite3
import subprocess
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from ancre.audit.chain import Sealer, canonical
from ancre.errors import AuditError

SYSLOG_TAG = "ancre-audit"
"""The syslog tag (``SYSLOG_IDENTIFIER`` in the journal) of the marks."""
_MARK_LINE = re.compile(rb"\b" + SYSLOG_TAG.encode() + rb"(?:\[\d+\])?: ?(\{.*\})\s*$")
"""A syslog file's line holding a mark: the tag, an optional ``[pid]``, ``:``, the mark's JSON."""



DEV_LOG = Path("/dev/log")
"""The system log's socket when ``audit.syslog_socket`` is unset (journald's and rsyslog's)."""

class WitnessKind(StrEnum):
    """The kinds of witness (``[audit] witnesses``)."""

    STATE = "state"
    SYSLOG = "syslog"


class WitnessUnreadableError(AuditError):
    """A witness's marks can't be read (no such database, no right to read the journal…)."""


@dataclass(frozen=True)
class Mark:
    """What a witness keeps of one record (see the module doc)."""

    directory: str
    seq: int
    file: str
    hash: str
    time: str

    def body(self) -> dict[str, Any]:
        """The mark's members, without its seal."""
        return {"dir": self.directory, "seq": self.seq, "file": self.file, "hash": self.hash, "time": self.time}

    def sealed(self, sealer: Sealer) -> dict[str, Any]:
        """The mark as kept: its members and their ``seal`` (canonical JSON, sealed with ``sealer``)."""
        body = self.body()
        return {**body, "seal": sealer.digest(canonical(body))}

    @classmethod
    def parse(cls, obj: object, sealer: Sealer) -> Mark | None:
        """A kept mark read back, ``None`` when ``obj`` is not one or its seal does not match
        (forged, damaged, or sealed with another key)."""
        if not isinstance(obj, dict) or not isinstance(obj.get("seal"), str):
            return None
        body = {k: v for k, v in obj.items() if k != "seal"}
        try:
            mark = cls(str(body["dir"]), int(body["seq"]), str(body["file"]), str(body["hash"]), str(body["time"]))
        except (KeyError, TypeError, ValueError):
            return None
        if mark.body() != body or not sealer.matches(obj["seal"], canonical(body)):
            return None
        return mark


@dataclass(frozen=True)
class WitnessReading:
    """What a witness holds of one log: its ``name`` (``state``, ``syslog``), the marks (oldest
    first; the state witness keeps the newest only), how many marks of this log were refused
    (their seal does not match: forged, damaged or another key), and whether it may lag behind
    the writer by a moment (a syslog daemon writes asynchronously)."""

    name: str
    marks: tuple[Mark, ...]
    refused: int = 0
    lags: bool = False


class Witness(Protocol):
    """A witness of one audit folder's chain (see the module doc)."""

    @property
    def name(self) -> str:
        """``state`` or ``syslog``."""
        ...

    def witness(self, mark: Mark) -> None:
        """Keep ``mark``. Raises :class:`OSError` or :class:`~ancre.errors.AuditError` when it can't."""
        ...

    def read(self) -> WitnessReading:
        """The marks of this folder's log. Raises :class:`WitnessUnreadableError` when they can't be read."""
        ...

    def close(self) -> None:
        """Release what the witness holds open."""
        ...


# ---------------------------------------------------------------------- state database

_STATE_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit_witness (
    dir TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    mark TEXT NOT NULL
);
"""


class StateWitness:
    """The newest mark of the log in ``directory``, in the table ``audit_witness(dir, seq, mark)``
    of the SQLite file ``database`` (the state DB's; created if missing), on a connection of its
    own. Thread-safe."""

    name = str(WitnessKind.STATE)

    def __init__(self, database: Path, directory: Path, sealer: Sealer) -> None:
        self.database = Path(database)
        self.directory = str(Path(directory).resolve())
        self.sealer = sealer
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self.database.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.database), check_same_thread=False, isolation_level=None, timeout=30.0)
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_STATE_SCHEMA)
            self._db = db
        return self._db

    def witness(self, mark: Mark) -> None:
        """Keep ``mark`` unless the kept one is as far or further (the witness never moves back).
        Raises :class:`sqlite3.Error` (an :class:`OSError` is not) as :class:`~ancre.errors.AuditError`."""
        row = json.dumps(mark.sealed(self.sealer), separators=(",", ":"))
        try:
            with self._lock:
                self._conn().execute(
                    "INSERT INTO audit_witness(dir, seq, mark) VALUES (?, ?, ?) ON CONFLICT(dir) DO UPDATE SET "
                    "seq = excluded.seq, mark = excluded.mark WHERE excluded.seq > audit_witness.seq",
                    (self.directory, mark.seq, row),
                )
        except sqlite3.Error as e:
            raise AuditError(f"audit witness {self.database}: cannot keep the record's mark: {e}") from e

    def read(self) -> WitnessReading:
        """The kept mark of this log (none when the table or the row is missing). Raises
        :class:`WitnessUnreadableError` when the database can't be read."""
        if not self.database.exists():
            return WitnessReading(self.name, ())
        try:
            with self._lock:
                got = self._conn().execute("SELECT mark FROM audit_witness WHERE dir = ?", (self.directory,)).fetchone()
        except sqlite3.Error as e:
            raise WitnessUnreadableError(f"audit witness {self.database}: cannot read it: {e}") from e
        if got is None:
            return WitnessReading(self.name, ())
        try:
            obj = json.loads(got[0])
        except ValueError:
            obj = None
        mark = Mark.parse(obj, self.sealer)
        if mark is None or mark.directory != self.directory:
            return WitnessReading(self.name, (), refused=1)
        return WitnessReading(self.name, (mark,))

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def export_state_witness(database: Path) -> list[tuple[str, int, str]]:
    """Every row of ``audit_witness`` in ``database`` (``[]`` when it has none), for
    :func:`import_state_witness`: ``ancre reindex`` deletes the state DB but keeps the witness."""
    if not Path(database).exists():
        return []
    db = sqlite3.connect(str(database), timeout=30.0)
    try:
        return [(str(d), int(s), str(m)) for d, s, m in db.execute("SELECT dir, seq, mark FROM audit_witness")]
    except sqlite3.OperationalError:  # no such table: nothing witnessed there
        return []
    finally:
        db.close()


def import_state_witness(database: Path, rows: Iterable[tuple[str, int, str]]) -> None:
    """Put back rows of :func:`export_state_witness` (a row further along is kept as it is)."""
    rows = list(rows)
    if not rows:
        return
    Path(database).parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(database), isolation_level=None, timeout=30.0)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(_STATE_SCHEMA)
        db.executemany(
            "INSERT INTO audit_witness(dir, seq, mark) VALUES (?, ?, ?) ON CONFLICT(dir) DO UPDATE SET "
            "seq = excluded.seq, mark = excluded.mark WHERE excluded.seq > audit_witness.seq", rows,
        )
    finally:
        db.close()


# ---------------------------------------------------------------------- system log


class _RaisingSysLogHandler(logging.handlers.SysLogHandler):
    """The standard library's syslog sender (RFC 3164 over a Unix socket, reconnecting once when
    the receiver was restarted), raising what it can't send instead of printing it."""

    def handleError(self, record: logging.LogRecord) -> None:
        raise  # noqa: PLE0704 - called by emit() inside its except clause: re-raises the send's error


class MarkSource(Protocol):
    """Where the marks sent to the system log are read back."""

    def lines(self) -> Iterable[object]:
        """The marks found (each a parsed JSON value), oldest first. Raises
        :class:`WitnessUnreadableError`."""
        ...


class JournalMarks:
    """The marks in the systemd journal, read with ``journalctl --output=json`` (one JSON object
    per entry; its ``MESSAGE`` is the text sent, or an array of bytes when it is not UTF-8 —
    journalctl(1), "--output=json"; systemd.journal-fields(7)). ``journalctl``: the command."""

    def __init__(self, journalctl: str = "journalctl") -> None:
        self.journalctl = journalctl

    def lines(self) -> Iterable[object]:
        cmd = [self.journalctl, "--output=json", "--no-pager", "--quiet", f"SYSLOG_IDENTIFIER={SYSLOG_TAG}"]
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise WitnessUnreadableError(f"audit witness: cannot run {self.journalctl}: {e}") from e
        if done.returncode != 0:
            why = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise WitnessUnreadableError(
                f"audit witness: journalctl failed ({why[-1] if why else done.returncode}): run verify as root or a "
                "member of systemd-journal or adm"
            )
        return list(parse_journal_json(done.stdout))

    def __repr__(self) -> str:
        return "the systemd journal"


def parse_journal_json(data: bytes) -> Iterable[object]:
    """The marks in ``journalctl --output=json`` output: each entry's ``MESSAGE`` parsed as JSON
    (entries whose message is not a JSON object are skipped)."""
    for raw in data.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        msg = entry.get("MESSAGE") if isinstance(entry, dict) else None
        if isinstance(msg, list):  # not valid UTF-8: the bytes, as numbers
            msg = bytes(b for b in msg if isinstance(b, int) and 0 <= b < 256).decode("utf-8", "replace")
        if not isinstance(msg, str) or (start := msg.find("{")) < 0:
            continue
        try:
            yield json.loads(msg[start:])
        except ValueError:
            continue


class FileMarks:
    """The marks in the files a syslog daemon writes (``paths``, in order; a ``.gz`` file is read
    through gzip; a missing file is skipped, but not all of them): each line with the tag
    ``ancre-audit`` followed by a JSON object."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = [Path(p) for p in paths]

    def lines(self) -> Iterable[object]:
        found: list[object] = []
        seen = 0
        for path in self.paths:
            try:
                data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            except FileNotFoundError:
                continue
            except (OSError, EOFError, gzip.BadGzipFile) as e:
                raise WitnessUnreadableError(f"audit.syslog_files: audit witness {path}: cannot read it: {e}") from e
            seen += 1
            for line in data.splitlines():
                m = _MARK_LINE.search(line)
                if m is None:
                    continue
                try:
                    found.append(json.loads(m.group(1)))
                except ValueError:
                    continue
        if not seen and self.paths:
            raise WitnessUnreadableError(f"audit.syslog_files: none of {', '.join(map(str, self.paths))} exists")
        return found

    def __repr__(self) -> str:
        return ", ".join(map(str, self.paths))


class SyslogWitness:
    """Every mark of the log in ``directory``, sent to the system log through the Unix datagram
    socket ``socket_path`` and read back from ``source`` (see the module doc). Thread-safe."""

    name = str(WitnessKind.SYSLOG)

    def __init__(self, directory: Path, sealer: Sealer, socket_path: Path, source: MarkSource) -> None:
        self.directory = str(Path(directory).resolve())
        self.sealer = sealer
        self.socket_path = Path(socket_path)
        self.source = source
        self._lock = threading.Lock()
        self._handler: _RaisingSysLogHandler | None = None

    def witness(self, mark: Mark) -> None:
        """Send ``mark`` (one datagram). Raises :class:`~ancre.errors.AuditError` when it can't."""
        text = json.dumps(mark.sealed(self.sealer), separators=(",", ":"), ensure_ascii=True)
        record = logging.LogRecord(SYSLOG_TAG, logging.INFO, __file__, 0, text, None, None)
        try:
            with self._lock:
                if self._handler is None:
                    handler = _RaisingSysLogHandler(str(self.socket_path), logging.handlers.SysLogHandler.LOG_AUTHPRIV)
                    handler.ident = f"{SYSLOG_TAG}: "
                    self._handler = handler
                self._handler.emit(record)
        except OSError as e:
            raise AuditError(f"audit.syslog_socket: the audit witness cannot send the record's mark to the system log "
                             f"{self.socket_path}: "
                             f"{e.strerror or e}") from e

    def read(self) -> WitnessReading:
        """The marks of this log in the system log. Raises :class:`WitnessUnreadableError`."""
        marks: list[Mark] = []
        refused = 0
        for obj in self.source.lines():
            if not isinstance(obj, dict) or obj.get("dir") != self.directory:
                continue
            mark = Mark.parse(obj, self.sealer)
            if mark is None:
                refused += 1
            else:
                marks.append(mark)
        return WitnessReading(self.name, tuple(marks), refused, lags=True)

    def close(self) -> None:
        """Close the socket."""
        with self._lock:
            if self._handler is not None:
                self._handler.close()
                self._handler = None


def open_witnesses(
    kinds: Iterable[str], directory: Path, sealer: Sealer, *, state_db: Path, syslog_socket: Path,
    syslog_files: Sequence[Path] = (),
) -> list[Witness]:
    """The witnesses ``kinds`` names (``state``, ``syslog``; each once, in that order) of the log
    in ``directory``. Raises :class:`~ancre.errors.AuditError` for an unknown kind."""
    out: list[Witness] = []
    for kind in dict.fromkeys(kinds):
        if kind == WitnessKind.STATE:
            out.append(StateWitness(state_db, directory, sealer))
        elif kind == WitnessKind.SYSLOG:
            source: MarkSource = FileMarks(syslog_files) if syslog_files else JournalMarks()
            out.append(SyslogWitness(directory, sealer, syslog_socket, source))
        else:
            raise AuditError(f"audit.witnesses: unknown witness {kind!r} (state, syslog)")
    return out


__all__ = [
    "DEV_LOG", "SYSLOG_TAG", "FileMarks", "JournalMarks", "Mark", "MarkSource", "StateWitness", "SyslogWitness", "Witness",
    "WitnessKind", "WitnessReading", "WitnessUnreadableError", "export_state_witness", "import_state_witness",
    "open_witnesses", "parse_journal_json",
]
