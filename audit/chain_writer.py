"""The audit log's hash chain, written (:mod:`ancre.audit.chain` gives the format).

Writers. Appends hold an exclusive ``flock(2)`` on ``<dir>/.audit.lock`` (every process writing
the folder: the API, the CLI, the daemon), read the previous hash under it and write the new
line, so concurrent writers never fork the chain. A line is written to the file of its record's
UTC day, or to the newest file when that is later (a record finished after midnight by a slow
writer goes to the new day's file, never behind its first line; its ``day`` is that file's). After
each line the head anchor ``audit.head.json`` (``{"file","hash","size","seq","time","seal"}``,
replaced atomically) names the newest line, and every witness gets its mark (position, file,
hash; :mod:`ancre.audit.witness`), so removing lines at the end of the newest file is found too —
by the witnesses even when the old anchor is put back.

Retention (:meth:`AuditChain.purge`) deletes whole daily files; before deleting it appends a
**checkpoint** to ``audit.checkpoints.jsonl`` — the files deleted, their record count, the hash
the oldest one started from and the hash of the last line deleted (``last_hash``), and how many
chain problems they held — itself a chained, sealed line (same format, same key). The oldest
remaining file then starts from the last checkpoint's ``last_hash``.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from ancre.audit.chain import (
    CHECKPOINTS,
    GENESIS,
    HEAD,
    LOCK,
    Sealer,
    canonical,
    daily_files,
    file_day,
    file_name,
    last_line,
    parse_line,
    read_checkpoints,
    read_head,
    read_lines,
    seal,
    write_private,
)
from ancre.audit.verify import read_nodes, walk_chain
from ancre.audit.witness import Mark, Witness
from ancre.index.durable import fsync_dir


@dataclass(frozen=True)
class Tail:
    """The line a new line follows: its hash (``prev``) and its chain position."""

    hash: str
    seq: int


class AuditChain:
    """The chain of the audit folder ``directory`` (see the module doc); ``key``: HMAC key,
    ``None`` for plain SHA-256; ``witnesses``: where each record's mark also goes
    (:mod:`ancre.audit.witness`). Safe across threads and processes (``flock``)."""

    def __init__(self, directory: Path, key: bytes | None = None, witnesses: Sequence[Witness] = ()) -> None:
        self.directory = Path(directory)
        self.sealer = Sealer(key)
        self.witnesses = tuple(witnesses)
        self._cache: tuple[str, int, Tail] | None = None  # (file name, its size, its last line)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder's exclusive lock (creates the folder 0700 and the lock file 0600)."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.directory / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    # ------------------------------------------------------------------ writing

    def _start(self) -> Tail:
        """What the log's next line follows when no daily file is left: the last checkpoint's
        last line (its position: ``last_seq``, else the records counted), else the genesis."""
        cps, _ = read_checkpoints(self.directory, self.sealer)
        if not cps:
            return Tail(GENESIS, 0)
        seq = cps[-1].last_seq
        return Tail(cps[-1].last_hash, seq if seq is not None else sum(cp.records for cp in cps))

    def _tail(self, path: Path) -> tuple[Tail | None, bool]:
        """The last line of ``path`` as the next line follows it (``None``: empty or no file) and
        whether the file ends with a newline."""
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return None, True
        if size == 0:
            return None, True
        if self._cache is not None and self._cache[:2] == (path.name, size):
            return self._cache[2], True
        head = self._read_head()
        if head is not None and head.get("file") == path.name and head.get("size") == size and \
                isinstance(head.get("seq"), int):
            return Tail(str(head["hash"]), int(head["seq"])), True
        raw, complete = last_line(path)
        if raw is None:
            return None, True
        p = parse_line(raw, self.sealer)
        return Tail(p.link_hash(self.sealer), p.seq if p.seq is not None else self._position(path)), complete

    def _position(self, path: Path) -> int:
        """The chain position of the last line of ``path``, the newest file, written by an ancre
        that did not seal positions: the records retention deleted and every line up to it."""
        cps, _ = read_checkpoints(self.directory, self.sealer)
        seq = cps[-1].last_seq if cps and cps[-1].last_seq is not None else sum(cp.records for cp in cps)
        for f in daily_files(self.directory):
            if f.name <= path.name:
                seq += sum(1 for _ in read_lines(f))
        return seq

    def append(self, day: date, text: str, write: Callable[[date, bytes], None]) -> date:
        """Seal ``text`` (one JSON object) into the chain and have ``write(day, data)`` append
        ``data`` (the line and its newline) to the daily file of ``day``; then give its mark to
        every witness. Returns the day whose file got the line (``day``, or the newest file's when
        that is later). Raises :class:`OSError` as ``write`` or the folder does, and
        :class:`~ancre.errors.AuditError` when a witness can't take the mark (the line is written)."""
        with self.locked():
            files = daily_files(self.directory)
            newest = file_day(files[-1]) if files else None
            if newest is not None and newest > day:
                day = newest
            path = self.directory / file_name(day)
            prev, complete = self._tail(path)
            prev_file = None
            if prev is None:
                earlier = [f for f in files if f.name < path.name]
                if earlier:
                    prev, _ = self._tail(earlier[-1])
                    prev_file = earlier[-1].name
                if prev is None:
                    prev = self._start()
            seq = prev.seq + 1
            line = seal(text, prev.hash, self.sealer, prev_file, seq=seq, day=day)
            data = ("" if complete else "\n") + line + "\n"
            write(day, data.encode("utf-8"))
            h = parse_line(line.encode("utf-8"), self.sealer).claimed
            assert h is not None
            size = path.stat().st_size
            self._cache = (path.name, size, Tail(h, seq))
            now = datetime.now(UTC).isoformat(timespec="milliseconds")
            self._write_head(path.name, h, size, seq, now)
            mark = Mark(str(self.directory.resolve()), seq, path.name, h, now)
            for w in self.witnesses:
                w.witness(mark)
            return day

    def _write_head(self, name: str, h: str, size: int, seq: int, now: str) -> None:
        head: dict[str, Any] = {"file": name, "hash": h, "size": size, "seq": seq, "time": now}
        head["seal"] = self.sealer.digest(canonical(head))
        write_private(self.directory / HEAD, json.dumps(head).encode(), sync=False)

    def _read_head(self) -> dict[str, Any] | None:
        return read_head(self.directory, self.sealer)

    def close(self) -> None:
        """Release the witnesses."""
        for w in self.witnesses:
            w.close()

    # ------------------------------------------------------------------ retention

    def purge(self, cutoff: date) -> list[Path]:
        """Delete the daily files dated before ``cutoff``, after appending a checkpoint that keeps
        the chain verifiable (see the module doc). Returns the deleted paths, oldest first.
        Raises :class:`OSError` when the checkpoint can't be written (then nothing is deleted)."""
        if not any(file_day(f) < cutoff for f in daily_files(self.directory)):
            return []
        with self.locked():
            doomed = [f for f in daily_files(self.directory) if file_day(f) < cutoff]
            if not doomed:
                return []
            cps, _ = read_checkpoints(self.directory, self.sealer)
            start = cps[-1].last_hash if cps else GENESIS
            nodes = read_nodes(doomed, self.sealer)
            problems = walk_chain(nodes, start, self.sealer, {f.name for f in doomed}).problems if nodes else []
            last_hash = nodes[-1].parsed.link_hash(self.sealer) if nodes else start
            first_prev = nodes[0].parsed.prev if nodes else start
            last_seq = nodes[-1].parsed.seq if nodes else (cps[-1].last_seq if cps else 0)
            entry = {
                "kind": "checkpoint", "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "deleted": [f.name for f in doomed], "records": len(nodes), "first_prev": first_prev,
                "last_hash": last_hash, "problems": len(problems), "last_seq": last_seq,
            }
            cp_path = self.directory / CHECKPOINTS
            last_raw, complete = last_line(cp_path)
            prev = parse_line(last_raw, self.sealer).link_hash(self.sealer) if last_raw is not None else GENESIS
            line = ("" if complete else "\n") + seal(json.dumps(entry, separators=(",", ":")), prev, self.sealer) + "\n"
            fd = os.open(cp_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.fchmod(fd, 0o600)
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_dir(self.directory)
            for f in doomed:
                f.unlink(missing_ok=True)
            self._cache = None
            return doomed


__all__ = ["AuditChain"]
