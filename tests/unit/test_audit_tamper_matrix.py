"""The tamper matrix of issue 43: every way of changing the audit folder that its writer has —
cut the tail and put the old head anchor back, delete the newest file and put the old anchor back,
delete the anchor, delete everything, rename a day, merge days, reorder, edit, insert, rewrite
and re-hash — done to a log written through the configured writer, with and without the chain's
HMAC key, each witness present (the state database; the system log through a real rsyslogd
started here), and found by ``ancre audit verify`` itself: exit status 1, the kind of problem
and the file (and line) where it is. The threat table of docs/SECURITY.md must say the same (checked
below, row by row)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from support import rsyslog
from typer.testing import CliRunner

from ancre.app.cli import app
from ancre.audit.chain import HEAD, Sealer, canonical, parse_line, seal
from ancre.audit.record import AuditLog, AuditRecord, open_audit_log
from ancre.config import load_settings
from ancre.query.grounding import Verdict

SECURITY = Path(__file__).resolve().parents[2] / "docs" / "SECURITY.md"
T0 = datetime(2026, 1, 15, 8, 30, tzinfo=UTC)
DAYS = 3
PER_DAY = 5
runner = CliRunner()


def name(day: int) -> str:
    return f"audit-{(T0 + timedelta(days=day)).date().isoformat()}.jsonl"


@dataclass
class Log:
    """A log of 3 days × 5 records written through the configured writer; ``anchors`` holds the
    head anchor as it was after each record (what a backup, or the attacker's copy, holds)."""

    cfg: Path
    dir: Path
    key: bytes | None
    anchors: list[bytes]

    def file(self, day: int) -> Path:
        return self.dir / name(day)

    def lines(self, day: int) -> list[bytes]:
        return self.file(day).read_bytes().splitlines()

    def put(self, day: int, lines: list[bytes]) -> None:
        self.file(day).write_bytes(b"".join(line + b"\n" for line in lines))

    def verify(self) -> tuple[int, dict, str]:
        res = runner.invoke(app, ["audit", "verify", "--json", "--config", str(self.cfg)], catch_exceptions=False)
        text = runner.invoke(app, ["audit", "verify", "--config", str(self.cfg)], catch_exceptions=False)
        assert text.exit_code == res.exit_code
        return res.exit_code, json.loads(res.stdout), text.stdout


def _record(i: int, when: datetime) -> AuditRecord:
    return AuditRecord(f"user{i % 3}", frozenset({"sid:S-1-1-0"}), f"question {i}", (), Verdict(True, ("refus",)), {}, when)


def _write(tmp: Path, witness: str, keyed: bool, daemon: rsyslog.Rsyslog | None) -> Log:
    audit = [f'witnesses = ["{witness}"]']
    if keyed:
        audit.append(f'chain_key_file = "{tmp / "keys" / "chain.key"}"')
    if witness == "syslog":
        assert daemon is not None
        audit += [f'syslog_socket = "{daemon.socket}"', f'syslog_files = ["{daemon.log}"]']
    cfg = tmp / "ancre.toml"
    cfg.write_text('data_dir = "data"\n[audit]\nretention_days = 0\n' + "\n".join(audit) + "\n", encoding="utf-8")
    settings = load_settings(cfg)
    log: AuditLog = open_audit_log(settings.audit, settings.data_dir)
    anchors = []
    for i in range(DAYS * PER_DAY):
        log.append(_record(i, T0 + timedelta(days=i // PER_DAY, minutes=i % PER_DAY)))
        anchors.append((log.directory / HEAD).read_bytes())
    log.close()
    key = (tmp / "keys" / "chain.key").read_bytes() if keyed else None
    if daemon is not None:
        daemon.wait_for(f'"dir":"{log.directory.resolve()}","seq":{DAYS * PER_DAY},')
    return Log(cfg, log.directory, key, anchors)


# ----------------------------------------------------------------------------- the tamperings


def truncate_tail_old_anchor(log: Log) -> None:
    log.put(DAYS - 1, log.lines(DAYS - 1)[:3])
    (log.dir / HEAD).write_bytes(log.anchors[(DAYS - 1) * PER_DAY + 2])


def delete_newest_old_anchor(log: Log) -> None:
    log.file(DAYS - 1).unlink()
    (log.dir / HEAD).write_bytes(log.anchors[(DAYS - 1) * PER_DAY - 1])


def delete_anchor(log: Log) -> None:
    (log.dir / HEAD).unlink()


def delete_all(log: Log) -> None:
    for day in range(DAYS):
        log.file(day).unlink()
    (log.dir / HEAD).unlink()


def rename_day(log: Log) -> None:
    log.file(1).rename(log.file(DAYS + 1))


def merge_days(log: Log) -> None:
    merged = [line for day in range(DAYS) for line in log.lines(day)]
    for day in range(DAYS - 1):
        log.file(day).unlink()
    log.put(DAYS - 1, merged)


def reorder(log: Log) -> None:
    lines = log.lines(1)
    lines[1], lines[2] = lines[2], lines[1]
    log.put(1, lines)


def edit(log: Log) -> None:
    lines = log.lines(1)
    lines[2] = lines[2].replace(b'"question 7"', b'"question X"')
    log.put(1, lines)


def insert(log: Log) -> None:
    lines = log.lines(1)
    prev = json.loads(lines[1])["hash"]
    forged = json.dumps({"time": (T0 + timedelta(days=1, minutes=1, seconds=30)).isoformat(), "question": "forged"})
    lines.insert(2, seal(forged, prev, Sealer(), seq=7, day=date(2026, 1, 16)).encode())
    log.put(1, lines)


def rewrite_rehash(log: Log) -> None:
    """What a forger who knows the format, and not the key, does to hide an edit: every line from
    the edited one re-sealed on its new predecessor, and the head anchor re-sealed to match."""
    sealer = Sealer()
    prev = None
    for day in range(1, DAYS):
        out = []
        for n, raw in enumerate(log.lines(day)):
            obj = json.loads(raw)
            if day == 1 and n < 2:
                out.append(raw)
                prev = obj["hash"]
                continue
            if day == 1 and n == 2:
                obj["question"] = "question X"
            body = {k: v for k, v in obj.items() if k not in ("seq", "day", "prev", "prev_file", "hash")}
            line = seal(json.dumps(body, separators=(",", ":"), ensure_ascii=False), prev, sealer,
                        obj.get("prev_file"), seq=obj["seq"], day=date.fromisoformat(obj["day"]))
            prev = parse_line(line.encode(), sealer).claimed
            out.append(line.encode())
        log.put(day, out)
    head = json.loads(log.anchors[-1])
    head.pop("seal")
    head.update(hash=prev, size=log.file(DAYS - 1).stat().st_size)
    head["seal"] = sealer.digest(canonical(head))
    (log.dir / HEAD).write_text(json.dumps(head))


@dataclass(frozen=True)
class Case:
    """One tampering, its name in docs/SECURITY.md, the problem kinds ``verify`` reports without and
    with the key, and where it must name them: ``(kind, file, line)``, a ``None`` line for "not one
    line" (each one of a kind reported with that key)."""

    do: Callable[[Log], None]
    doc_name: str
    without_key: frozenset[str]
    with_key: frozenset[str]
    where: frozenset[tuple[str, str | None, int | None]]


def case(do: Callable[[Log], None], doc_name: str, without_key: set[str], with_key: set[str] | None = None,
         *where: tuple[str, str | None, int | None]) -> Case:
    return Case(do, doc_name, frozenset(without_key), frozenset(with_key if with_key is not None else without_key),
                frozenset(where))


F0, F1, F2, F4 = name(0), name(1), name(DAYS - 1), name(DAYS + 1)
MATRIX = {
    "truncate_tail_old_anchor": case(truncate_tail_old_anchor, "cut the newest lines and put the old head anchor back",
                                     {"removed"}, None, ("removed", F2, None)),
    "delete_newest_old_anchor": case(delete_newest_old_anchor,
                                     "delete the newest daily file and put the old head anchor back",
                                     {"removed"}, None, ("removed", F2, None)),
    "delete_anchor": case(delete_anchor, "delete the head anchor", {"anchor"}, None, ("anchor", HEAD, None)),
    "delete_all": case(delete_all, "delete every daily file and the head anchor", {"removed"}, None,
                       ("removed", F2, None)),
    "rename_day": case(rename_day, "rename a daily file to another date", {"misplaced", "reordered"}, None,
                       *[("misplaced", F4, n) for n in range(1, PER_DAY + 1)]),
    "merge_days": case(merge_days, "merge several days into one file", {"misplaced"}, None,
                       *[("misplaced", F2, n) for n in range(1, 2 * PER_DAY + 1)]),
    "reorder": case(reorder, "swap two lines", {"reordered"}, None, ("reordered", F1, 3)),
    "edit": case(edit, "edit a line", {"changed"}, None, ("changed", F1, 3)),
    "insert": case(insert, "insert a line", {"inserted"}, {"inserted", "unkeyed"}, ("inserted", F1, 3),
                   ("unkeyed", F1, 3)),
    "rewrite_rehash": case(rewrite_rehash, "edit a line and re-hash every line after it, and the anchor",
                           {"rewritten"}, {"unkeyed", "changed", "rewritten"}, ("rewritten", F2, PER_DAY),
                           ("unkeyed", F1, 3), ("changed", HEAD, None)),
}


@pytest.fixture(scope="module")
def syslogd(tmp_path_factory: pytest.TempPathFactory):
    why = rsyslog.available()
    if why:
        pytest.skip(why)
    d = rsyslog.Rsyslog.start(tmp_path_factory.mktemp("rsyslog"))
    yield d
    d.stop()


@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "key"])
@pytest.mark.parametrize("witness", ["state", "syslog"])
@pytest.mark.parametrize("op", list(MATRIX))
def test_verify_finds_the_tampering(op: str, witness: str, keyed: bool, tmp_path: Path,
                                    request: pytest.FixtureRequest) -> None:
    daemon = request.getfixturevalue("syslogd") if witness == "syslog" else None
    log = _write(tmp_path, witness, keyed, daemon)
    code, rep, _ = log.verify()
    assert code == 0 and rep["ok"] and rep["records"] == DAYS * PER_DAY, rep  # intact before
    case = MATRIX[op]
    case.do(log)
    code, rep, text = log.verify()
    found = {(p["kind"], p["file"], p["line"]) for p in rep["problems"]}
    kinds = case.with_key if keyed else case.without_key
    assert code == 1 and not rep["ok"]
    assert {k for k, _, _ in found} == kinds, text
    assert {w for w in case.where if w[0] in kinds} <= found, text
    for kind, file, line in found:  # what and where, in the admin's words too
        said = [x for x in text.splitlines() if x.startswith(kind)]
        assert any((file is None or file in x) and (line is None or f"line {line}" in x) for x in said), text


def test_the_security_doc_threat_table_matches_the_matrix() -> None:
    """Each row of the tamper table of docs/SECURITY.md (between its markers) names one tampering of the
    matrix and the kinds ``verify`` reports for it, without and with the key."""
    text = SECURITY.read_text(encoding="utf-8")
    table = text.split("<!-- tamper-matrix -->")[1]
    rows: dict[str, tuple[set[str], set[str]]] = {}
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = (set(re.findall(r"`(\w+)`", cells[1])), set(re.findall(r"`(\w+)`", cells[2])))
    assert set(rows) == {c.doc_name for c in MATRIX.values()}
    for case in MATRIX.values():
        assert rows[case.doc_name] == (set(case.without_key), set(case.with_key)), case.doc_name
