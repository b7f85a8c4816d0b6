"""The audit log's hash chain: every line carries the hash of the line before it, so a changed,
removed, inserted or reordered line is found and named (README "Asking questions", the audit).

Format. :class:`AuditChain` wraps the one function that appends a line to a daily file
(``AuditLog._write_line``): whatever the record's kind, the JSON object written is the caller's
object with two members added at its end, and a third on the first line of a file::

    {…the record…,"prev":"sha256:<hex>","prev_file":"audit-2026-01-14.jsonl","hash":"sha256:<hex>"}

- ``prev``: the ``hash`` of the line before — the previous line of the same file or, on a file's
  first line, the last line of the newest earlier file (its name in ``prev_file``), or the last
  checkpoint's ``last_hash`` when retention deleted every earlier file, or ``"genesis"`` for the
  very first line;
- ``hash``: SHA-256 (``sha256:``) — or, with a key, HMAC-SHA256 (RFC 2104, ``hmac-sha256:``) — of
  the UTF-8 bytes of the line as written *without* its ``,"hash":"…"`` member (the line up to
  ``prev``/``prev_file``, closed by ``}``). Without a key the chain shows damage and tampering by
  someone who does not know the format; with a key kept away from the log folder, nobody without
  it can recompute a hash, so a line changed and re-hashed is still found.

A line with no ``hash`` (written before the chain existed, or cut short by a crash) counts in the
chain by the hash of its raw bytes.

Writers. Appends hold an exclusive ``flock(2)`` on ``<dir>/.audit.lock`` (every process writing
the folder: the API, the CLI, the daemon), read the previous hash under it and write the new
line, so concurrent writers never fork the chain. A line is written to the file of its record's
UTC day, or to the newest file when that is later (a record finished after midnight by a slow
writer goes to the new day's file, never behind its first line). After each line the head anchor
``audit.head.json`` (``{"file","hash","size","time","seal"}``, replaced atomically) names the
newest line, so removing lines at the end of the newest file is found too.

Retention (:meth:`AuditChain.purge`) deletes whole daily files; before deleting it appends a
**checkpoint** to ``audit.checkpoints.jsonl`` — the files deleted, their record count, the hash
the oldest one started from and the hash of the last line deleted (``last_hash``), and how many
chain problems they held — itself a chained, sealed line (same format, same key). The oldest
remaining file then starts from the last checkpoint's ``last_hash``.

Verification (:func:`verify_chain`) reads every file in date order and rebuilds the chain by its
links: a line whose content does not match its hash is **changed**; a line whose predecessor is
not in the log follows **removed** records (or, on a file's first line naming a missing
``prev_file``, a **missing file**); a line the chain passes over is **inserted**; a line whose
place in the chain differs from its place in the files is **reordered**; a head anchor whose line
is gone means the newest records were **removed**. Each problem names the file, the line number
(1-based) and the record's time.
"""

from __future__ import annotations

import bisect
import fcntl
import hashlib
import hmac
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from ancre.errors import AuditError

FILE_RE = re.compile(r"^audit-(\d{4}-\d{2}-\d{2})\.jsonl$")
"""Name of a daily file (UTC date)."""
GENESIS = "genesis"
"""``prev`` of the very first line of a log."""
CHECKPOINTS = "audit.checkpoints.jsonl"
HEAD = "audit.head.json"
LOCK = ".audit.lock"
ALGORITHMS = ("sha256", "hmac-sha256")
_HASH_RE = re.compile(r"^(sha256|hmac-sha256):[0-9a-f]{64}$")
CHAIN_FIELDS = frozenset({"prev", "prev_file", "hash"})
"""Members the chain adds to every record (readers of the records leave them out)."""


class Sealer:
    """Hashes lines: SHA-256 without ``key``, HMAC-SHA256 (RFC 2104) with it. Values are
    ``"<algorithm>:<64 hex>"``."""

    def __init__(self, key: bytes | None = None) -> None:
        self.key = key
        self.algorithm = "hmac-sha256" if key else "sha256"

    def digest(self, data: bytes) -> str:
        """``"<algorithm>:<hex>"`` of ``data``."""
        if self.key:
            return "hmac-sha256:" + hmac.new(self.key, data, hashlib.sha256).hexdigest()
        return "sha256:" + hashlib.sha256(data).hexdigest()

    def matches(self, value: str, data: bytes) -> bool:
        """Whether ``value`` is this sealer's digest of ``data`` (constant-time comparison)."""
        return hmac.compare_digest(value.encode(), self.digest(data).encode())


def seal(text: str, prev: str, sealer: Sealer, prev_file: str | None = None) -> str:
    """``text`` (one JSON object, as the audit writes it) with ``prev`` (and ``prev_file``) and
    its ``hash`` appended; no newline. Raises :class:`ValueError` when ``text`` is not a JSON
    object's text."""
    text = text.rstrip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError("an audit line is one JSON object")
    inner = text[1:-1]
    extra = f'"prev":{json.dumps(prev)}' + (f',"prev_file":{json.dumps(prev_file)}' if prev_file else "")
    body = "{" + (inner + "," if inner.strip() else "") + extra
    h = sealer.digest((body + "}").encode("utf-8"))
    return body + f',"hash":"{h}"' + "}"


@dataclass(frozen=True)
class ParsedLine:
    """One line of a chained file. ``obj``: the JSON object (``None``: not one — damaged);
    ``claimed``: its ``hash`` member (``None``: unchained); ``prev``: its ``prev`` member;
    ``intact``: the hash matches the content (``None``: unchained, or another algorithm than
    the sealer's)."""

    raw: bytes
    obj: Mapping[str, Any] | None
    claimed: str | None
    prev: str | None
    prev_file: str | None
    intact: bool | None
    algorithm: str | None

    def link_hash(self, sealer: Sealer) -> str:
        """The hash the next line's ``prev`` refers to: the claimed one, or the raw bytes'."""
        return self.claimed if self.claimed is not None else sealer.digest(self.raw)


def parse_line(raw: bytes, sealer: Sealer) -> ParsedLine:
    """Parse one line (without its newline) and check its seal with ``sealer``."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return ParsedLine(raw, None, None, None, None, None, None)
    if not isinstance(obj, dict):
        return ParsedLine(raw, None, None, None, None, None, None)
    claimed = obj.get("hash")
    if not isinstance(claimed, str) or not _HASH_RE.match(claimed):
        return ParsedLine(raw, obj, None, None, None, None, None)
    prev = obj.get("prev") if isinstance(obj.get("prev"), str) else None
    prev_file = obj.get("prev_file") if isinstance(obj.get("prev_file"), str) else None
    algorithm = claimed.split(":", 1)[0]
    suffix = f',"hash":"{claimed}"}}'.encode()
    if not raw.endswith(suffix):
        return ParsedLine(raw, obj, claimed, prev, prev_file, False, algorithm)
    intact = sealer.matches(claimed, raw[: -len(suffix)] + b"}") if algorithm == sealer.algorithm else None
    return ParsedLine(raw, obj, claimed, prev, prev_file, intact, algorithm)


def daily_files(directory: Path) -> list[Path]:
    """The daily files of ``directory``, oldest first (``[]`` when it does not exist)."""
    try:
        names = [n for n in os.listdir(directory) if FILE_RE.match(n)]
    except FileNotFoundError:
        return []
    return [directory / n for n in sorted(names)]


def file_day(path: Path) -> date:
    """The UTC day of a daily file's name."""
    m = FILE_RE.match(path.name)
    if m is None:
        raise ValueError(f"{path.name}: not an audit file name")
    return date.fromisoformat(m.group(1))


def _last_line(path: Path) -> tuple[bytes | None, bool]:
    """``(last line without its newline, whether the file ends with a newline)``; ``(None,
    True)`` for an empty or missing file."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed by the ``with f:`` below; only open() may find no file
    except FileNotFoundError:
        return None, True
    with f:
        end = f.seek(0, os.SEEK_END)
        if end == 0:
            return None, True
        f.seek(end - 1)
        complete = f.read(1) == b"\n"
        pos = end - 1 if complete else end  # the last line ends before pos
        buf = b""  # the bytes [pos, pos + len(buf)) read so far
        while pos > 0:
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            buf = f.read(step) + buf
            cut = buf.rfind(b"\n")
            if cut >= 0:
                return buf[cut + 1 :], complete
        return buf, complete


def _lines(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        for line in f:
            yield line[:-1] if line.endswith(b"\n") else line


def _write_private(path: Path, data: bytes, *, sync: bool) -> None:
    """Replace ``path`` atomically with ``data`` (mode 0600)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Checkpoint:
    """One retention checkpoint: the files deleted (names, oldest first), their record count,
    the ``prev`` the oldest started from (``None``: unchained), the hash of the last line
    deleted, the chain problems they held, and when (ISO 8601 UTC)."""

    time: str
    deleted: tuple[str, ...]
    records: int
    first_prev: str | None
    last_hash: str
    problems: int


def read_checkpoints(directory: Path, sealer: Sealer) -> tuple[list[Checkpoint], list[str]]:
    """The checkpoints of ``directory`` (oldest first) and what is wrong with their file (each a
    sentence; ``[]``: intact)."""
    path = directory / CHECKPOINTS
    if not path.exists():
        return [], []
    out: list[Checkpoint] = []
    wrong: list[str] = []
    prev = GENESIS
    for n, raw in enumerate(_lines(path), 1):
        p = parse_line(raw, sealer)
        if p.obj is None or p.claimed is None:
            wrong.append(f"{CHECKPOINTS} line {n}: not a sealed checkpoint (damaged)")
            continue
        if p.intact is False or (p.intact is None and p.algorithm != sealer.algorithm):
            wrong.append(f"{CHECKPOINTS} line {n}: its content does not match its seal (changed, or another key)")
        if p.prev != prev:
            wrong.append(f"{CHECKPOINTS} line {n}: does not follow the checkpoint before it (one removed or reordered)")
        prev = p.claimed
        o = p.obj
        try:
            cp = Checkpoint(str(o["time"]), tuple(o["deleted"]), int(o["records"]), o.get("first_prev"),
                            str(o["last_hash"]), int(o.get("problems", 0)))
        except (KeyError, TypeError, ValueError):
            wrong.append(f"{CHECKPOINTS} line {n}: not a checkpoint")
            continue
        if out and cp.first_prev is not None and cp.first_prev != out[-1].last_hash:
            wrong.append(f"{CHECKPOINTS} line {n}: its first deleted record does not follow the previous checkpoint's last")
        out.append(cp)
    return out, wrong


class AuditChain:
    """The chain of the audit folder ``directory`` (see the module doc); ``key``: HMAC key,
    ``None`` for plain SHA-256. Safe across threads and processes (``flock``)."""

    def __init__(self, directory: Path, key: bytes | None = None) -> None:
        self.directory = Path(directory)
        self.sealer = Sealer(key)
        self._cache: tuple[str, int, str] | None = None  # (file name, its size, its last line's hash)

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

    def _start_hash(self) -> str:
        cps, _ = read_checkpoints(self.directory, self.sealer)
        return cps[-1].last_hash if cps else GENESIS

    def _tail_hash(self, path: Path) -> tuple[str | None, bool]:
        """The hash the next line of ``path`` must carry as ``prev`` (``None``: empty file) and
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
        if head is not None and head.get("file") == path.name and head.get("size") == size:
            return str(head["hash"]), True
        raw, complete = _last_line(path)
        if raw is None:
            return None, True
        return parse_line(raw, self.sealer).link_hash(self.sealer), complete

    def append(self, day: date, text: str, write: Callable[[date, bytes], None]) -> date:
        """Seal ``text`` (one JSON object) into the chain and have ``write(day, data)`` append
        ``data`` (the line and its newline) to the daily file of ``day``. Returns the day whose
        file got the line (``day``, or the newest file's when that is later). Raises
        :class:`OSError` as ``write`` or the folder does."""
        with self.locked():
            files = daily_files(self.directory)
            newest = file_day(files[-1]) if files else None
            if newest is not None and newest > day:
                day = newest
            path = self.directory / f"audit-{day.isoformat()}.jsonl"
            prev, complete = self._tail_hash(path)
            prev_file = None
            if prev is None:
                earlier = [f for f in files if f.name < path.name]
                if earlier:
                    prev, _ = self._tail_hash(earlier[-1])
                    prev_file = earlier[-1].name
                if prev is None:
                    prev = self._start_hash()
            line = seal(text, prev, self.sealer, prev_file)
            data = ("" if complete else "\n") + line + "\n"
            write(day, data.encode("utf-8"))
            h = parse_line(line.encode("utf-8"), self.sealer).claimed
            assert h is not None
            size = path.stat().st_size
            self._cache = (path.name, size, h)
            self._write_head(path.name, h, size)
            return day

    def _write_head(self, name: str, h: str, size: int) -> None:
        head: dict[str, Any] = {"file": name, "hash": h, "size": size,
                                "time": datetime.now(UTC).isoformat(timespec="milliseconds")}
        head["seal"] = self.sealer.digest(_canonical(head))
        _write_private(self.directory / HEAD, json.dumps(head).encode(), sync=False)

    def _read_head(self) -> dict[str, Any] | None:
        try:
            head = json.loads((self.directory / HEAD).read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(head, dict) or not isinstance(head.get("seal"), str):
            return None
        body = {k: v for k, v in head.items() if k != "seal"}
        return head if self.sealer.matches(head["seal"], _canonical(body)) else None

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
            nodes = _read_nodes(doomed, self.sealer)
            problems = _walk(nodes, start, self.sealer, {f.name for f in doomed}).problems if nodes else []
            last_hash = nodes[-1].parsed.link_hash(self.sealer) if nodes else start
            first_prev = nodes[0].parsed.prev if nodes else start
            entry = {
                "kind": "checkpoint", "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "deleted": [f.name for f in doomed], "records": len(nodes), "first_prev": first_prev,
                "last_hash": last_hash, "problems": len(problems),
            }
            cp_path = self.directory / CHECKPOINTS
            last_raw, complete = _last_line(cp_path)
            prev = parse_line(last_raw, self.sealer).link_hash(self.sealer) if last_raw is not None else GENESIS
            line = ("" if complete else "\n") + seal(json.dumps(entry, separators=(",", ":")), prev, self.sealer) + "\n"
            fd = os.open(cp_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.fchmod(fd, 0o600)
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            _fsync_dir(self.directory)
            for f in doomed:
                f.unlink(missing_ok=True)
            self._cache = None
            return doomed


def _canonical(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


# ---------------------------------------------------------------------- verification


class Tamper(StrEnum):
    """What :func:`verify_chain` found."""

    CHANGED = "changed"
    REMOVED = "removed"
    INSERTED = "inserted"
    REORDERED = "reordered"
    MISSING_FILE = "missing_file"
    DAMAGED = "damaged"
    UNKEYED = "unkeyed"
    CHECKPOINT = "checkpoint"


@dataclass(frozen=True)
class ChainProblem:
    """One problem: its kind, the file and 1-based line it is at (``None``: not one line), the
    record's time when readable, and a sentence for the admin."""

    kind: Tamper
    file: str | None
    line: int | None
    time: str | None
    detail: str


@dataclass(frozen=True)
class ChainReport:
    """The result of :func:`verify_chain`: files and records read, whether the chain is keyed,
    checkpoints, the problems (``[]``: intact) and warnings (what could not be checked)."""

    directory: str
    files: tuple[str, ...]
    records: int
    keyed: bool
    checkpoints: int
    problems: tuple[ChainProblem, ...]
    warnings: tuple[str, ...] = ()
    head: str | None = None

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems


@dataclass(frozen=True)
class _Node:
    file: str
    line: int
    parsed: ParsedLine

    @property
    def where(self) -> str:
        return f"{self.file} line {self.line}"

    @property
    def time(self) -> str | None:
        o = self.parsed.obj
        t = o.get("time") if o is not None else None
        return t if isinstance(t, str) else None


def _read_nodes(files: list[Path], sealer: Sealer) -> list[_Node]:
    return [_Node(f.name, n, parse_line(raw, sealer)) for f in files for n, raw in enumerate(_lines(f), 1)]


@dataclass
class _Walk:
    problems: list[ChainProblem] = field(default_factory=list)
    unchained: int = 0


class _ChainWalk:
    """The state of one :func:`_walk` over ``nodes`` (positions ``0 … n-1``): each line's link
    hash and predecessor, the lines each hash is the predecessor of, the chain order rebuilt so
    far (positions) and the problems found, per position."""

    def __init__(self, nodes: list[_Node], start: str, sealer: Sealer, present: set[str]) -> None:
        self.nodes = nodes
        self.start = start
        self.sealer = sealer
        self.present = present
        self.n = n = len(nodes)
        self.link = [nd.parsed.link_hash(sealer) for nd in nodes]
        self.chained = [nd.parsed.claimed is not None for nd in nodes]
        self.damaged = [nd.parsed.obj is None for nd in nodes]
        lead = 0  # leading lines written before the chain existed: counted, not checked
        while lead < n and not self.chained[lead] and not self.damaged[lead]:
            lead += 1
        self.lead = lead
        self.found: dict[int, list[ChainProblem]] = {}
        # each line's predecessor: its prev; a line without one (unchained, damaged) follows the line above
        self.pred: list[str] = [
            (nd.parsed.prev or "") if self.chained[i] else (self.link[i - 1] if i else start)
            for i, nd in enumerate(nodes)
        ]
        self.by_hash: dict[str, list[int]] = {}
        for i, h in enumerate(self.link):
            self.by_hash.setdefault(h, []).append(i)
        self.children: dict[str, list[int]] = {}
        for i, h in enumerate(self.pred):
            self.children.setdefault(h, []).append(i)
        self.known = set(self.by_hash) | {start}
        self.visited = [False] * n
        self.order: list[int] = []  # positions, in chain order

    def problem(self, kind: Tamper, i: int, detail: str) -> None:
        nd = self.nodes[i]
        self.found.setdefault(i, []).append(ChainProblem(kind, nd.file, nd.line, nd.time, detail))

    def line_problems(self) -> None:
        """What each line shows on its own: damaged, unchained among chained, sealed without the
        key, content not matching its hash."""
        for i, nd in enumerate(self.nodes):
            p = nd.parsed
            if self.damaged[i]:
                self.problem(Tamper.DAMAGED, i, f"{nd.where}: not a JSON record (damaged or cut short)")
            elif not self.chained[i] and i >= self.lead:
                self.problem(Tamper.INSERTED, i, f"{nd.where}: a record without a hash among chained records (inserted)")
            elif self.chained[i] and p.algorithm != self.sealer.algorithm:
                self.problem(Tamper.UNKEYED, i, f"{nd.where}: sealed with {p.algorithm}, not with the chain's key: "
                             "forged, or written before the key was set")
            elif p.intact is False:
                self.problem(Tamper.CHANGED, i, f"{nd.where}: its content does not match its hash (changed)")

    def goes_on(self, j: int) -> bool:
        return any(not self.visited[k] and k != j for k in self.children.get(self.link[j], ()))

    def follow(self, first: int) -> int:
        """Walk the chain from position ``first`` as far as it goes; the last position."""
        cur = first
        while True:
            self.visited[cur] = True
            self.order.append(cur)
            cands = [j for j in self.children.get(self.link[cur], ()) if not self.visited[j]]
            if not cands:
                return cur
            # a fork (a line inserted with a correct prev, a copied line): the line the chain goes on
            # from, then the nearest one below this line
            cands.sort(key=lambda j: (not self.goes_on(j), j < cur, abs(j - cur)))
            cur = cands[0]

    def follow_start(self) -> None:
        """Walk the chain from the line that follows ``start``."""
        roots = sorted(self.children.get(self.start, ()), key=lambda j: (not self.goes_on(j), j))
        if roots:
            self.follow(roots[0])

    def orphans(self) -> None:
        """Walk each segment whose first line's predecessor is not in the log: an island the
        chain passes over is inserted; else records (or a daily file) are missing before it."""
        nodes, n = self.nodes, self.n
        for j in range(n):
            if self.visited[j] or self.pred[j] in self.known:
                continue
            seg = len(self.order)
            self.follow(j)
            block = sorted(self.order[seg:])
            end = block[-1] if block == list(range(j, j + len(block))) else None
            if end is not None and j > 0 and end + 1 < n and self.pred[end + 1] == self.link[j - 1]:
                for k in block:  # an island the chain passes over: a line forged with a made-up prev
                    self.problem(Tamper.INSERTED, k, f"{nodes[k].where}: not part of the chain (inserted)")
                del self.order[seg:]
                continue
            if j > 0 and self.damaged[j - 1]:
                continue  # the damaged line above explains it
            self.missing_before(j)

    def missing_before(self, j: int) -> None:
        """Name what is missing before position ``j``, whose predecessor is not in the log."""
        nd = self.nodes[j]
        if nd.parsed.prev_file and nd.parsed.prev_file not in self.present:
            self.problem(Tamper.MISSING_FILE, j, f"{nd.parsed.prev_file} is missing: the first record of {nd.file} "
                         "follows its last record")
        elif j == 0:
            self.problem(Tamper.REMOVED, j, f"records are missing before {nd.where}: the oldest records of the log "
                         "are gone and no checkpoint covers them")
        else:
            above = self.nodes[j - 1].where
            maybe = "" if self.sealer.key else f", or the record before it ({above}) was changed and its hash recomputed"
            self.problem(Tamper.REMOVED, j, f"records are missing before {nd.where}: its predecessor is not in the "
                         f"log{maybe}")

    def unvisited(self) -> None:
        """Every line no walk reached is inserted (a copy of another line, when it is one)."""
        for k in range(self.n):
            if not self.visited[k]:
                dup = [j for j in self.by_hash.get(self.link[k], ()) if j != k]
                copy = f" (a copy of {self.nodes[dup[0]].where})" if dup else ""
                self.problem(Tamper.INSERTED, k, f"{self.nodes[k].where}: not part of the chain (inserted){copy}")

    def reordered(self) -> None:
        """The lines of the chain order off its longest increasing run of positions."""
        in_order = _lis(self.order)
        for idx, pos in enumerate(self.order):
            if pos not in in_order:
                where = f"right after {self.nodes[self.order[idx - 1]].where}" if idx else "first"
                self.problem(Tamper.REORDERED, pos, f"{self.nodes[pos].where} is out of order: in the chain it comes {where}")

    def problems(self) -> list[ChainProblem]:
        """The problems found, by position: one per kind and line, and a forged line (inserted)
        not also reported as changed."""
        out: list[ChainProblem] = []
        for i in sorted(self.found):
            kinds = {prob.kind for prob in self.found[i]}
            seen: set[Tamper] = set()
            for prob in self.found[i]:
                if prob.kind in seen or (prob.kind is Tamper.CHANGED and Tamper.INSERTED in kinds):
                    continue  # one problem per kind and line; a forged line: inserted says it
                seen.add(prob.kind)
                out.append(prob)
        return out


def _walk(nodes: list[_Node], start: str, sealer: Sealer, present: set[str]) -> _Walk:
    """Rebuild the chain of ``nodes`` (files in date order) from ``start`` by its links and name
    what does not fit (see the module doc); ``present``: the daily files that exist."""
    w = _ChainWalk(nodes, start, sealer, present)
    w.line_problems()
    w.follow_start()
    w.orphans()
    w.unvisited()
    w.reordered()
    return _Walk(w.problems(), w.lead)


def _lis(seq: list[int]) -> set[int]:
    """The values of one longest strictly increasing subsequence of ``seq``."""
    tails: list[int] = []
    tails_idx: list[int] = []
    back = [-1] * len(seq)
    for i, v in enumerate(seq):
        k = bisect.bisect_left(tails, v)
        if k == len(tails):
            tails.append(v)
            tails_idx.append(i)
        else:
            tails[k] = v
            tails_idx[k] = i
        back[i] = tails_idx[k - 1] if k else -1
    out: set[int] = set()
    i = tails_idx[-1] if tails_idx else -1
    while i >= 0:
        out.add(seq[i])
        i = back[i]
    return out


def verify_chain(directory: Path, key: bytes | None = None) -> ChainReport:
    """Check the chain of the audit folder ``directory`` (see the module doc). ``key``: the
    chain's HMAC key (``None``: plain SHA-256). Raises :class:`~ancre.errors.AuditError` when the
    folder can't be read, or when the log is keyed and no key was given."""
    directory = Path(directory)
    sealer = Sealer(key)
    try:
        files = daily_files(directory)
        nodes = _read_nodes(files, sealer)
        cps, cp_wrong = read_checkpoints(directory, sealer)
    except OSError as e:
        raise AuditError(f"audit log {directory}: cannot read it: {e}") from e
    if key is None and any(nd.parsed.algorithm == "hmac-sha256" for nd in nodes):
        raise AuditError(
            f"audit log {directory}: its chain is keyed (HMAC-SHA256): give its key (audit.chain_key_file or --key-file)"
        )
    start = cps[-1].last_hash if cps else GENESIS
    walk = _walk(nodes, start, sealer, {f.name for f in files})
    problems = list(walk.problems)
    problems += [ChainProblem(Tamper.CHECKPOINT, CHECKPOINTS, None, None, w) for w in cp_wrong]
    warnings: list[str] = []
    if walk.unchained:
        warnings.append(f"{walk.unchained} record(s) at the start were written before the chain existed: not checked")
    if any(cp.problems for cp in cps):
        warnings.append(f"{sum(cp.problems for cp in cps)} chain problem(s) were found in files retention deleted "
                        "(recorded in their checkpoint)")
    head_line = None
    chain = AuditChain(directory, key)
    try:
        raw_head = json.loads((directory / HEAD).read_bytes())
    except FileNotFoundError:
        raw_head = None
        if nodes:
            warnings.append(f"no head anchor ({HEAD}): records removed from the end of the newest file can't be detected")
    except (OSError, ValueError):
        raw_head = None
        problems.append(ChainProblem(Tamper.CHANGED, HEAD, None, None, f"{HEAD} is damaged"))
    if raw_head is not None:
        head = chain._read_head()
        if head is None:
            problems.append(ChainProblem(Tamper.CHANGED, HEAD, None, None, f"{HEAD} does not match its seal (changed)"))
        else:
            h, name = str(head["hash"]), str(head["file"])
            known = {nd.parsed.link_hash(sealer) for nd in nodes} | {start}
            head_line = f"{name} ({head.get('time')})"
            if h not in known:
                if name not in {f.name for f in files} and not any(name in cp.deleted for cp in cps):
                    problems.append(ChainProblem(Tamper.MISSING_FILE, name, None, None,
                                                 f"{name} is missing: the head anchor names its last record"))
                else:
                    last = next((nd for nd in reversed(nodes) if nd.file == name), None)
                    after = f" (after {last.where})" if last else ""
                    problems.append(ChainProblem(Tamper.REMOVED, name, None, None,
                                                 f"records are missing at the end of {name}{after}: the newest record "
                                                 "the head anchor names is gone"))
    problems.sort(key=lambda pr: (pr.file or "", pr.line or 0))
    return ChainReport(str(directory), tuple(f.name for f in files), len(nodes), key is not None, len(cps),
                       tuple(problems), tuple(warnings), head_line)


__all__ = [
    "CHAIN_FIELDS", "CHECKPOINTS", "FILE_RE", "GENESIS", "HEAD", "AuditChain", "ChainProblem", "ChainReport",
    "Checkpoint", "ParsedLine", "Sealer", "Tamper", "daily_files", "file_day", "parse_line", "read_checkpoints",
    "seal", "verify_chain",
]
