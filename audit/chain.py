"""The audit log's hash chain, its format: every line carries the hash of the line before it, so
a changed, removed, inserted or reordered line is found and named (docs/SECURITY.md "A tamper-evident audit", and
who saw what", the tamper-evident audit). Written by :class:`~ancre.audit.chain_writer.AuditChain`,
checked by :func:`~ancre.audit.verify.verify_chain`.

Format. :class:`~ancre.audit.chain_writer.AuditChain` wraps the one function that appends a line to
a daily file (``AuditLog._write_line``): whatever the record's kind, the JSON object written is the caller's
object with members added at its end (``prev_file`` on the first line of a file only)::

    {…the record…,"seq":42,"day":"2026-01-15","prev":"sha256:<hex>","prev_file":"audit-2026-01-14.jsonl",
     "hash":"sha256:<hex>"}

- ``seq``: the line's position in the chain, 1 for the log's first record (retention does not
  renumber: a checkpoint keeps the last position it deleted); what the witnesses
  (:mod:`ancre.audit.witness`) keep with the hash;
- ``day``: the UTC day of the daily file the line was written to — a line found in another file
  was moved there (a file renamed, days merged);

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
chain by the hash of its raw bytes; a line with no ``seq``/``day`` was written before they were
sealed (its position is then counted).

The head anchor ``audit.head.json`` (``{"file","hash","size","seq","time","seal"}``, its ``seal`` the
sealer's digest of the other members, canonical JSON) names the newest line
(:func:`read_head`); the retention checkpoints are sealed lines of ``audit.checkpoints.jsonl``
(:func:`read_checkpoints`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

FILE_RE = re.compile(r"^audit-(\d{4}-\d{2}-\d{2})\.jsonl$")
"""Name of a daily file (UTC date)."""
GENESIS = "genesis"
"""``prev`` of the very first line of a log."""
CHECKPOINTS = "audit.checkpoints.jsonl"
HEAD = "audit.head.json"
LOCK = ".audit.lock"
ALGORITHMS = ("sha256", "hmac-sha256")
_HASH_RE = re.compile(r"^(sha256|hmac-sha256):[0-9a-f]{64}$")
CHAIN_FIELDS = frozenset({"seq", "day", "prev", "prev_file", "hash"})
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


def seal(
    text: str, prev: str, sealer: Sealer, prev_file: str | None = None, *, seq: int | None = None,
    day: date | None = None,
) -> str:
    """``text`` (one JSON object, as the audit writes it) with ``seq`` and ``day`` (when given),
    ``prev`` (and ``prev_file``) and its ``hash`` appended; no newline. Raises
    :class:`ValueError` when ``text`` is not a JSON object's text."""
    text = text.rstrip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError("an audit line is one JSON object")
    inner = text[1:-1]
    extra = (f'"seq":{int(seq)},' if seq is not None else "") + (f'"day":"{day.isoformat()}",' if day else "")
    extra += f'"prev":{json.dumps(prev)}' + (f',"prev_file":{json.dumps(prev_file)}' if prev_file else "")
    body = "{" + (inner + "," if inner.strip() else "") + extra
    h = sealer.digest((body + "}").encode("utf-8"))
    return body + f',"hash":"{h}"' + "}"


@dataclass(frozen=True)
class ParsedLine:
    """One line of a chained file. ``obj``: the JSON object (``None``: not one — damaged);
    ``claimed``: its ``hash`` member (``None``: unchained); ``prev``: its ``prev`` member;
    ``intact``: the hash matches the content (``None``: unchained, or another algorithm than
    the sealer's); ``seq``: its position in the chain (1 for the log's first record), ``day``:
    the daily file it was written to (both ``None`` on a line written before they were sealed)."""

    raw: bytes
    obj: Mapping[str, Any] | None
    claimed: str | None
    prev: str | None
    prev_file: str | None
    intact: bool | None
    algorithm: str | None
    seq: int | None = None
    day: str | None = None

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
    seq = obj.get("seq") if isinstance(obj.get("seq"), int) and not isinstance(obj.get("seq"), bool) else None
    day = obj.get("day") if isinstance(obj.get("day"), str) else None
    algorithm = claimed.split(":", 1)[0]
    suffix = f',"hash":"{claimed}"}}'.encode()
    if not raw.endswith(suffix):
        return ParsedLine(raw, obj, claimed, prev, prev_file, False, algorithm, seq, day)
    intact = sealer.matches(claimed, raw[: -len(suffix)] + b"}") if algorithm == sealer.algorithm else None
    return ParsedLine(raw, obj, claimed, prev, prev_file, intact, algorithm, seq, day)


def daily_files(directory: Path) -> list[Path]:
    """The daily files of ``directory``, oldest first (``[]`` when it does not exist)."""
    try:
        names = [n for n in os.listdir(directory) if FILE_RE.match(n)]
    except FileNotFoundError:
        return []
    return [directory / n for n in sorted(names)]


def file_name(day: date) -> str:
    """The name of the daily file of ``day`` (UTC): ``audit-2026-01-15.jsonl``."""
    return f"audit-{day.isoformat()}.jsonl"


def file_day(path: Path) -> date:
    """The UTC day of a daily file's name."""
    m = FILE_RE.match(path.name)
    if m is None:
        raise ValueError(f"{path.name}: not an audit file name")
    return date.fromisoformat(m.group(1))


def last_line(path: Path) -> tuple[bytes | None, bool]:
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


def read_lines(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        for line in f:
            yield line[:-1] if line.endswith(b"\n") else line


def write_private(path: Path, data: bytes, *, sync: bool) -> None:
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


@dataclass(frozen=True)
class Checkpoint:
    """One retention checkpoint: the files deleted (names, oldest first), their record count,
    the ``prev`` the oldest started from (``None``: unchained), the hash of the last line
    deleted, the chain problems they held, when (ISO 8601 UTC), and the chain position of the last
    line deleted (``None``: a checkpoint of an older ancre)."""

    time: str
    deleted: tuple[str, ...]
    records: int
    first_prev: str | None
    last_hash: str
    problems: int
    last_seq: int | None = None


def read_checkpoints(directory: Path, sealer: Sealer) -> tuple[list[Checkpoint], list[str]]:
    """The checkpoints of ``directory`` (oldest first) and what is wrong with their file (each a
    sentence; ``[]``: intact)."""
    path = directory / CHECKPOINTS
    if not path.exists():
        return [], []
    out: list[Checkpoint] = []
    wrong: list[str] = []
    prev = GENESIS
    for n, raw in enumerate(read_lines(path), 1):
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
            last_seq = o.get("last_seq")
            cp = Checkpoint(str(o["time"]), tuple(o["deleted"]), int(o["records"]), o.get("first_prev"),
                            str(o["last_hash"]), int(o.get("problems", 0)),
                            int(last_seq) if last_seq is not None else None)
        except (KeyError, TypeError, ValueError):
            wrong.append(f"{CHECKPOINTS} line {n}: not a checkpoint")
            continue
        if out and cp.first_prev is not None and cp.first_prev != out[-1].last_hash:
            wrong.append(f"{CHECKPOINTS} line {n}: its first deleted record does not follow the previous checkpoint's last")
        out.append(cp)
    return out, wrong


def canonical(obj: Mapping[str, Any]) -> bytes:
    """``obj`` as canonical JSON bytes (sorted keys, no spaces): what a seal of an object covers."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def read_head(directory: Path, sealer: Sealer) -> dict[str, Any] | None:
    """The head anchor of ``directory`` when it exists, parses and its ``seal`` matches (``None``
    otherwise: missing, damaged or changed)."""
    try:
        head = json.loads((directory / HEAD).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(head, dict) or not isinstance(head.get("seal"), str):
        return None
    body = {k: v for k, v in head.items() if k != "seal"}
    return head if sealer.matches(head["seal"], canonical(body)) else None


__all__ = [
    "ALGORITHMS", "CHAIN_FIELDS", "CHECKPOINTS", "FILE_RE", "GENESIS", "HEAD", "LOCK", "Checkpoint", "ParsedLine",
    "Sealer", "canonical", "daily_files", "file_day", "file_name", "last_line", "parse_line", "read_checkpoints",
    "read_head", "read_lines", "seal", "write_private",
]
