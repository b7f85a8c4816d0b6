"""The audit log's hash chain, checked (:mod:`ancre.audit.chain` gives the format).

Verification (:func:`verify_chain`) reads every file in date order and rebuilds the chain by its
links: a line whose content does not match its hash is **changed**; a line whose predecessor is
not in the log follows **removed** records (or, on a file's first line naming a missing
``prev_file``, a **missing file**); a line the chain passes over is **inserted**; a line whose
place in the chain differs from its place in the files is **reordered**; a line sealed into
another day's file than the one it is in is **misplaced** (a file renamed, days merged); a head
anchor whose line is gone means the newest records were **removed**, and no head anchor is a
problem (**anchor**) unless the log was started without one.

The witnesses (:mod:`ancre.audit.witness`) are then compared with the files: marks beyond the
newest record mean records **removed** from the end (the old anchor put back, the newest file or
the whole log deleted); a record whose hash is not the one a witness saw at its position was
**rewritten** (or the log rolled back); records after every witness's newest mark are
**unwitnessed**; a witness with no mark of a log that has records, or that can't be read, or no
witness at all, is a **witness** problem (the first and last only a warning when the log was
started without one). Each problem names the file, the line number (1-based) and the record's
time.
"""

from __future__ import annotations

import bisect
import fcntl
import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from ancre.audit.chain import (
    CHECKPOINTS,
    GENESIS,
    HEAD,
    LOCK,
    Checkpoint,
    ParsedLine,
    Sealer,
    daily_files,
    file_day,
    parse_line,
    read_checkpoints,
    read_head,
    read_lines,
)
from ancre.audit.witness import Witness, WitnessKind, WitnessReading
from ancre.errors import AuditError


class Tamper(StrEnum):
    """What :func:`verify_chain` found."""

    CHANGED = "changed"
    REMOVED = "removed"
    INSERTED = "inserted"
    REORDERED = "reordered"
    MISSING_FILE = "missing_file"
    MISPLACED = "misplaced"
    DAMAGED = "damaged"
    UNKEYED = "unkeyed"
    CHECKPOINT = "checkpoint"
    ANCHOR = "anchor"
    REWRITTEN = "rewritten"
    UNWITNESSED = "unwitnessed"
    WITNESS = "witness"


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
    witnesses: tuple[WitnessSummary, ...] = ()

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems


@dataclass(frozen=True)
class ChainLine:
    """One line of a daily file as the walk sees it: the file's name, its 1-based line number,
    the line parsed."""

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


def read_nodes(files: list[Path], sealer: Sealer) -> list[ChainLine]:
    """Every line of ``files`` (in the order given), parsed and checked with ``sealer``. Raises
    :class:`OSError` when a file can't be read."""
    return [ChainLine(f.name, n, parse_line(raw, sealer)) for f in files for n, raw in enumerate(read_lines(f), 1)]


@dataclass
class WalkResult:
    """What :func:`walk_chain` found: the problems, and how many leading lines were written
    before the chain existed (counted, not checked)."""

    problems: list[ChainProblem] = field(default_factory=list)
    unchained: int = 0


class _ChainWalk:
    """The state of one :func:`walk_chain` over ``nodes`` (positions ``0 … n-1``): each line's link
    hash and predecessor, the lines each hash is the predecessor of, the chain order rebuilt so
    far (positions) and the problems found, per position."""

    def __init__(self, nodes: list[ChainLine], start: str, sealer: Sealer, present: set[str]) -> None:
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
        key, content not matching its hash, sealed into another day's file than the one it is in."""
        self.days = {nd.file: file_day(Path(nd.file)).isoformat() for nd in self.nodes}
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
            if p.day is not None and p.day != self.days[nd.file]:
                self.problem(Tamper.MISPLACED, i, f"{nd.where}: a record of the file of {p.day} in the file of "
                             f"{self.days[nd.file]} (a daily file renamed, or days merged)")

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


def walk_chain(nodes: list[ChainLine], start: str, sealer: Sealer, present: set[str]) -> WalkResult:
    """Rebuild the chain of ``nodes`` (files in date order) from ``start`` by its links and name
    what does not fit (see the module doc); ``present``: the daily files that exist."""
    w = _ChainWalk(nodes, start, sealer, present)
    w.line_problems()
    w.follow_start()
    w.orphans()
    w.unvisited()
    w.reordered()
    return WalkResult(w.problems(), w.lead)


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


@contextmanager
def _reading(directory: Path) -> Iterator[None]:
    """Hold the folder's lock shared while the files are read (writers wait; nothing is created
    when the lock file is missing or can't be opened)."""
    try:
        fd = os.open(directory / LOCK, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


@dataclass(frozen=True)
class WitnessSummary:
    """What :func:`verify_chain` read of one witness: its name, the marks of this log it holds,
    the newest one's position, file and time, the marks refused (seal not matching), and why it
    could not be read (``None``: it was)."""

    name: str
    marks: int
    last_seq: int | None = None
    last_file: str | None = None
    last_time: str | None = None
    refused: int = 0
    error: str | None = None


@dataclass(frozen=True)
class _Log:
    """The audit folder as read: daily files, their lines, checkpoints (and what is wrong with
    them), the head anchor's raw JSON (``None``: missing; ``...``: damaged), and when (UTC ISO)."""

    files: list[Path]
    nodes: list[ChainLine]
    checkpoints: list[Checkpoint]
    checkpoint_wrong: list[str]
    head: Any
    read_at: str


def _read_log(directory: Path, sealer: Sealer) -> _Log:
    try:
        files = daily_files(directory)
        nodes = read_nodes(files, sealer)
        cps, cp_wrong = read_checkpoints(directory, sealer)
    except OSError as e:
        raise AuditError(f"audit log {directory}: cannot read it: {e}") from e
    try:
        head: Any = json.loads((directory / HEAD).read_bytes())
    except FileNotFoundError:
        head = None
    except (OSError, ValueError):
        head = ...
    return _Log(files, nodes, cps, cp_wrong, head, datetime.now(UTC).isoformat(timespec="milliseconds"))


def _anchor_problems(log: _Log, directory: Path, sealer: Sealer, start: str, excused: bool) -> tuple[
    list[ChainProblem], list[str], str | None,
]:
    """What the head anchor says: missing (a failure unless ``excused``), damaged, changed, or
    naming a record that is gone. Returns the problems, the warnings and the anchor's line."""
    problems: list[ChainProblem] = []
    warnings: list[str] = []
    if log.head is None:
        if log.nodes:
            what = f"no head anchor ({HEAD}): it was deleted, or the log was started without one"
            if excused:
                warnings.append(what + " (--started-without-witness)")
            else:
                problems.append(ChainProblem(Tamper.ANCHOR, HEAD, None, None, what))
        return problems, warnings, None
    if log.head is ...:
        return [ChainProblem(Tamper.CHANGED, HEAD, None, None, f"{HEAD} is damaged")], warnings, None
    head = read_head(directory, sealer)
    if head is None:
        return [ChainProblem(Tamper.CHANGED, HEAD, None, None, f"{HEAD} does not match its seal (changed)")], warnings, None
    h, name = str(head["hash"]), str(head["file"])
    known = {nd.parsed.link_hash(sealer) for nd in log.nodes} | {start}
    head_line = f"{name} ({head.get('time')})"
    if h not in known:
        if name not in {f.name for f in log.files} and not any(name in cp.deleted for cp in log.checkpoints):
            problems.append(ChainProblem(Tamper.MISSING_FILE, name, None, None,
                                         f"{name} is missing: the head anchor names its last record"))
        else:
            last = next((nd for nd in reversed(log.nodes) if nd.file == name), None)
            after = f" (after {last.where})" if last else ""
            problems.append(ChainProblem(Tamper.REMOVED, name, None, None,
                                         f"records are missing at the end of {name}{after}: the newest record "
                                         "the head anchor names is gone"))
    return problems, warnings, head_line


def _read_witness(w: Witness, log: _Log, last_seq: int, settle_s: float) -> WitnessReading | str:
    """The marks ``w`` holds of this log that were witnessed before it was read (a record
    written since is not in the files read); a witness that lags is read again, up to
    ``settle_s`` seconds, until it has caught up with ``last_seq``. The error's text when it
    can't be read."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            got = w.read()
        except AuditError as e:
            return str(e)
        marks = tuple(m for m in got.marks if m.time <= log.read_at)
        reading = WitnessReading(got.name, marks, got.refused, got.lags)
        if not got.lags or max((m.seq for m in marks), default=0) >= last_seq or time.monotonic() >= deadline:
            return reading
        time.sleep(0.2)


def _witness_problems(
    reading: WitnessReading, log: _Log, walk_order: dict[int, list[ChainLine]], last_seq: int, excused: bool,
) -> tuple[list[ChainProblem], list[str]]:
    """The files against one witness's marks (see the module doc); ``walk_order``: the sealed
    lines by chain position; ``last_seq``: the newest position in the files (or the checkpoints)."""
    name = reading.name
    problems: list[ChainProblem] = []
    warnings: list[str] = []
    if reading.refused:
        warnings.append(f"witness {name}: {reading.refused} mark(s) of this log do not match their seal "
                        "(forged, damaged, or sealed with another key): ignored")
    if not reading.marks:
        if last_seq > 0:
            what = f"witness {name} holds no mark of this log: it was wiped, or the log was started without it"
            if excused:
                warnings.append(what + " (--started-without-witness)")
            else:
                problems.append(ChainProblem(Tamper.WITNESS, None, None, None, what))
        return problems, warnings
    for m in reading.marks:
        lines = walk_order.get(m.seq, [])
        if lines and all(nd.parsed.claimed != m.hash for nd in lines):
            nd = lines[0]
            problems.append(ChainProblem(
                Tamper.REWRITTEN, nd.file, nd.line, nd.time,
                f"{nd.where} is record #{m.seq}, but the record witness {name} saw there ({m.file}, {m.time}) "
                "had another hash: the log was rewritten or rolled back"))
    beyond = sorted({m.seq: m for m in reading.marks if m.seq > last_seq}.values(), key=lambda m: m.seq)
    if beyond:
        last = beyond[-1]
        span = f"record #{last.seq} is" if last.seq == last_seq + 1 else f"records #{last_seq + 1}–#{last.seq} are"
        problems.append(ChainProblem(
            Tamper.REMOVED, last.file, None, last.time,
            f"{span} gone from the end of the log: witness {name} saw #{last.seq} (in {last.file} at {last.time}); "
            f"the newest record left is #{last_seq}"))
    top = max(m.seq for m in reading.marks)
    later = [nd for seq in sorted(walk_order) if seq > top for nd in walk_order[seq][:1]]
    if later:
        nd = later[0]
        problems.append(ChainProblem(
            Tamper.UNWITNESSED, nd.file, nd.line, nd.time,
            f"{len(later)} record(s) from {nd.where} on were never witnessed by {name} (its newest mark is #{top}): "
            "added to the files by hand, or the witness failed"))
    return problems, warnings


def _against_witnesses(
    witnesses: Sequence[Witness], quick: dict[str, WitnessReading | str], log: _Log,
    by_seq: dict[int, list[ChainLine]], last_seq: int, settle_s: float, excused: bool,
) -> tuple[list[ChainProblem], list[str], list[WitnessSummary]]:
    """Every witness read (``quick``: those read already) and compared with the files; no
    witness at all is a problem unless ``excused``."""
    problems: list[ChainProblem] = []
    warnings: list[str] = []
    summaries: list[WitnessSummary] = []
    if not witnesses and (log.nodes or log.checkpoints):
        what = "no witness is configured ([audit] witnesses): records cut from the end of the log can't be found"
        if excused:
            warnings.append(what)
        else:
            problems.append(ChainProblem(Tamper.WITNESS, None, None, None, what))
    for w in witnesses:
        got = quick.get(w.name) or _read_witness(w, log, last_seq, settle_s)
        if isinstance(got, str):
            problems.append(ChainProblem(Tamper.WITNESS, None, None, None, f"witness {w.name} can't be read: {got}"))
            summaries.append(WitnessSummary(w.name, 0, error=got))
            continue
        found, notes = _witness_problems(got, log, by_seq, last_seq, excused)
        problems += found
        warnings += notes
        newest = max(got.marks, key=lambda m: m.seq, default=None)
        summaries.append(WitnessSummary(w.name, len(got.marks), newest.seq if newest else None,
                                        newest.file if newest else None, newest.time if newest else None, got.refused))
    return problems, warnings, summaries


def verify_chain(
    directory: Path, key: bytes | None = None, witnesses: Sequence[Witness] = (), *,
    started_without_witness: bool = False, settle_s: float = 3.0,
) -> ChainReport:
    """Check the chain of the audit folder ``directory`` (see the module doc) and compare it with
    ``witnesses``. ``key``: the chain's HMAC key (``None``: plain SHA-256);
    ``started_without_witness``: the log was started without a head anchor or without the
    witnesses, whose absence is then a warning, not a problem (no witness at all is a problem
    otherwise); ``settle_s``: how long a witness that lags (the system log) is waited for.
    Raises :class:`~ancre.errors.AuditError` when the folder can't be read, or when the log is
    keyed and no key was given."""
    directory = Path(directory)
    sealer = Sealer(key)
    with _reading(directory):
        log = _read_log(directory, sealer)
        quick = {w.name: _read_witness(w, log, 0, 0.0) for w in witnesses if w.name == WitnessKind.STATE}
    nodes, cps = log.nodes, log.checkpoints
    if key is None and any(nd.parsed.algorithm == "hmac-sha256" for nd in nodes):
        raise AuditError(
            f"audit log {directory}: its chain is keyed (HMAC-SHA256): give its key (audit.chain_key_file or --key-file)"
        )
    start = cps[-1].last_hash if cps else GENESIS
    walk = walk_chain(nodes, start, sealer, {f.name for f in log.files})
    problems = list(walk.problems)
    problems += [ChainProblem(Tamper.CHECKPOINT, CHECKPOINTS, None, None, w) for w in log.checkpoint_wrong]
    warnings: list[str] = [] if directory.is_dir() else [f"no audit folder {directory} (nothing audited yet, or deleted)"]
    if walk.unchained:
        warnings.append(f"{walk.unchained} record(s) at the start were written before the chain existed: not checked")
    if any(cp.problems for cp in cps):
        warnings.append(f"{sum(cp.problems for cp in cps)} chain problem(s) were found in files retention deleted "
                        "(recorded in their checkpoint)")
    anchor, anchor_warnings, head_line = _anchor_problems(log, directory, sealer, start, started_without_witness)
    problems += anchor
    warnings += anchor_warnings
    by_seq: dict[int, list[ChainLine]] = {}
    for nd in nodes:
        if nd.parsed.seq is not None and nd.parsed.claimed is not None:
            by_seq.setdefault(nd.parsed.seq, []).append(nd)
    last_seq = max(by_seq, default=(cps[-1].last_seq or 0) if cps else 0)
    found, notes, summaries = _against_witnesses(witnesses, quick, log, by_seq, last_seq, settle_s,
                                                 started_without_witness)
    problems += found
    warnings += notes
    problems.sort(key=lambda pr: (pr.file or "", pr.line or 0))
    return ChainReport(str(directory), tuple(f.name for f in log.files), len(nodes), key is not None, len(cps),
                       tuple(problems), tuple(warnings), head_line, tuple(summaries))


__all__ = [
    "ChainLine", "ChainProblem", "ChainReport", "Tamper", "WalkResult", "WitnessSummary", "read_nodes", "verify_chain",
    "walk_chain",
]
