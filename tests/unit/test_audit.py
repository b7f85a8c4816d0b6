"""Audit log: one fsynced JSON line per question, mode 0600, pseudonymisation, daily files,
retention, concurrent writers."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ancre.audit.record import AuditLog, AuditRecord, load_or_create_key
from ancre.models import Acl
from ancre.query.context import Source
from ancre.query.grounding import CONTROL_INVENTED, Verdict
from ancre.query.live_acl import RightsCheck

T0 = datetime(2026, 1, 15, 8, 30, 0, 123000, tzinfo=UTC)
ACL = Acl(frozenset({"sid:S-1-5-21-1-1001"}), frozenset({"sid:S-1-5-21-1-666"}))
SRC = Source(
    filename="03_Contrat_Maintenance_Etude_Rochat.docx",
    doc_id="partage:DIRECTION/03_Contrat_Maintenance_Etude_Rochat.docx",
    path="DIRECTION/03_Contrat_Maintenance_Etude_Rochat.docx",
    location="\\\\SRV-FICHIERS\\Partage\\DIRECTION\\",
    collection="documents",
    acl_digest=ACL.digest(),
    score=0.03,
)
PRINCIPALS = frozenset({"sid:S-1-5-21-1-1001", "sid:S-1-1-0"})


LIVE = RightsCheck(SRC.doc_id, "partage", SRC.path, SRC.filename, "documents", "changed", True, None, 1.25)
LEFT_OUT = RightsCheck(
    "partage:CLIENTS/x.docx", "partage", "CLIENTS/x.docx", "x.docx", "documents", "unreachable", False,
    "source 'partage': \\\\srv\\Partage unreachable",
)


def _record(question: str = "Forfait de l'étude Rochat ?", time: datetime | None = T0, user: str = "alice") -> AuditRecord:
    verdict = Verdict(False, (CONTROL_INVENTED,), ("22_Contrat.docx",), (), "non_requise")
    return AuditRecord(
        user, PRINCIPALS, question, (SRC,), verdict, {"retrieval": 12.34, "llm": 5000.0}, time, rights=(LIVE, LEFT_OUT)
    )


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_one_line_per_record_with_every_field(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit")
    log.append(_record())
    log.append(_record("Deuxième question", T0 + timedelta(minutes=1)))
    log.close()
    (entry, second) = _lines(tmp_path / "audit" / "audit-2026-01-15.jsonl")
    assert entry["time"] == "2026-01-15T08:30:00.123+00:00"
    assert entry["user"] == "alice"
    assert entry["principals"] == hashlib.sha256(json.dumps(sorted(PRINCIPALS), separators=(",", ":")).encode()).hexdigest()
    assert entry["question"] == "Forfait de l'étude Rochat ?"
    assert entry["sources"] == [
        {"filename": SRC.filename, "doc_id": SRC.doc_id, "location": SRC.location, "acl": ACL.digest(), "rights": "changed"}
    ]
    # every document whose rights were decided, shown or left out, says whether it was checked live
    assert entry["rights"] == [
        {"doc_id": SRC.doc_id, "filename": SRC.filename, "live": True, "outcome": "changed", "readable": True,
         "reason": None, "age_s": 1.25},
        {"doc_id": "partage:CLIENTS/x.docx", "filename": "x.docx", "live": False, "outcome": "unreachable",
         "readable": False, "reason": LEFT_OUT.reason, "age_s": 0.0},
    ]
    assert entry["controls"] == [CONTROL_INVENTED] and entry["invented"] == ["22_Contrat.docx"]
    assert entry["ancree"] is False and entry["verification"] == "non_requise"
    assert entry["timings_ms"] == {"retrieval": 12.3, "llm": 5000.0}
    assert second["question"] == "Deuxième question"


def test_file_mode_0600_even_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        log = AuditLog(tmp_path / "audit")
        log.append(_record())
        log.close()
    finally:
        os.umask(old)
    f = tmp_path / "audit" / "audit-2026-01-15.jsonl"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "audit").stat().st_mode) == 0o700


def test_existing_file_with_loose_mode_is_tightened_and_appended(tmp_path: Path) -> None:
    d = tmp_path / "audit"
    d.mkdir()
    f = d / "audit-2026-01-15.jsonl"
    f.write_text('{"earlier": true}\n')
    f.chmod(0o644)
    log = AuditLog(d)
    log.append(_record())
    log.close()
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    lines = _lines(f)
    assert lines[0] == {"earlier": True} and lines[1]["user"] == "alice"


def test_record_is_on_disk_before_append_returns(tmp_path: Path) -> None:
    log = AuditLog(tmp_path)
    log.append(_record())
    # read through another file object while the log is still open (no close, no flush call)
    assert len(_lines(tmp_path / "audit-2026-01-15.jsonl")) == 1
    log.close()


def test_pseudonymisation_uses_a_keyed_hash(tmp_path: Path) -> None:
    key = b"k" * 32
    log = AuditLog(tmp_path, pseudonymize_key=key)
    log.append(_record())
    log.close()
    (entry,) = _lines(tmp_path / "audit-2026-01-15.jsonl")
    assert "alice" not in json.dumps(entry)
    assert entry["user"] == "hmac-sha256:" + hmac.new(key, b"alice", hashlib.sha256).hexdigest()
    plain = hashlib.sha256(json.dumps(sorted(PRINCIPALS), separators=(",", ":")).encode()).hexdigest()
    assert entry["principals"] != plain  # keyed too
    assert AuditLog(tmp_path, pseudonymize_key=b"other").pseudonym("alice") != entry["user"]


def test_key_file_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "audit.key"
    key = load_or_create_key(path)
    assert len(key) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_key(path) == key


def test_daily_rotation_and_retention(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, retention_days=30)
    for days in (40, 31, 30, 1, 0):
        log.append(_record(time=T0 - timedelta(days=days)))
    log.close()
    # opening each day's file purges the files more than 30 days older than that day: opening
    # 2026-01-15 removed 2025-12-06 and 2025-12-15, kept 2025-12-16 (exactly 30 days)
    names = sorted(p.name for p in tmp_path.glob("audit-*.jsonl"))
    assert "audit-2026-01-15.jsonl" in names and "audit-2026-01-14.jsonl" in names
    assert "audit-2025-12-16.jsonl" in names  # exactly 30 days old: kept
    assert "audit-2025-12-15.jsonl" not in names  # 31 days old on the day of the last file: purged
    assert "audit-2025-12-06.jsonl" not in names
    removed = AuditLog(tmp_path, retention_days=30).purge_expired(T0 + timedelta(days=1))
    assert [p.name for p in removed] == ["audit-2025-12-16.jsonl"]
    assert sorted(p.name for p in tmp_path.glob("audit-*.jsonl")) == ["audit-2026-01-14.jsonl", "audit-2026-01-15.jsonl"]


def test_zero_retention_keeps_everything(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, retention_days=0)
    log.append(_record(time=T0 - timedelta(days=4000)))
    log.append(_record())
    log.close()
    assert log.purge_expired(T0) == [] and len(list(tmp_path.glob("audit-*.jsonl"))) == 2


def test_other_files_are_never_purged(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "audit-2000-01-01.jsonl.bak").write_text("x")
    AuditLog(tmp_path, retention_days=1).purge_expired(T0)
    assert {p.name for p in tmp_path.iterdir()} == {"notes.txt", "audit-2000-01-01.jsonl.bak"}


def test_concurrent_writers_lose_and_mix_no_line(tmp_path: Path) -> None:
    logs = [AuditLog(tmp_path), AuditLog(tmp_path)]  # two loggers on one file (two workers)
    long_question = "x" * 5000

    def write(k: int) -> None:
        for i in range(40):
            logs[k % 2].append(_record(f"{k}-{i}-{long_question}"))

    threads = [threading.Thread(target=write, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for log in logs:
        log.close()
    entries = _lines(tmp_path / "audit-2026-01-15.jsonl")
    assert sorted(e["question"].split("-x")[0] for e in entries) == sorted(f"{k}-{i}" for k in range(6) for i in range(40))


def test_current_time_is_used_when_none_given(tmp_path: Path) -> None:
    log = AuditLog(tmp_path)
    before = datetime.now(UTC)
    log.append(_record(time=None))
    log.close()
    (f,) = list(tmp_path.glob("audit-*.jsonl"))
    (entry,) = _lines(f)
    when = datetime.fromisoformat(entry["time"])
    assert when.tzinfo is not None and when >= before.replace(microsecond=0) - timedelta(seconds=1)


def test_write_failure_is_an_audit_error(tmp_path) -> None:
    """A log folder that can't be written fails closed with an AncreError naming the folder."""
    from ancre.errors import AuditError

    target = tmp_path / "audit"
    target.write_text("a file where the folder should be", encoding="utf-8")
    log = AuditLog(target, retention_days=30)
    with pytest.raises(AuditError, match=str(target)):
        log.append(_record())


def test_text_that_is_not_unicode_is_still_audited(tmp_path: Path) -> None:
    """A lone surrogate (from a model's output, say) never stops a record: it is written escaped."""
    log = AuditLog(tmp_path / "audit")
    verdict = Verdict(False, (CONTROL_INVENTED,), ("22_\ud800.docx",), (), "non_requise")
    log.append(AuditRecord("alice", PRINCIPALS, "Forfait de l'étude Rochat ?", (SRC,), verdict, {}, T0))
    log.close()
    (entry,) = _lines(tmp_path / "audit" / "audit-2026-01-15.jsonl")
    assert entry["invented"] == ["22_\ud800.docx"] and entry["question"] == "Forfait de l'étude Rochat ?"


def test_the_identity_as_received_and_the_resolved_account_are_apart(tmp_path: Path) -> None:
    """``user`` is the raw identity (the e-mail header), ``account`` the directory
    account it resolved to (null when unknown); both pseudonymised with a key."""
    from dataclasses import replace

    log = AuditLog(tmp_path / "plain")
    log.append(replace(_record(user="Alice.Martin@axonix.ch"), account="alice"))
    log.append(replace(_record(user="je\u00df.rossi@axonix.ch"), account=None))
    log.close()
    known, unknown = _lines(tmp_path / "plain" / "audit-2026-01-15.jsonl")
    assert (known["user"], known["account"]) == ("Alice.Martin@axonix.ch", "alice")
    assert (unknown["user"], unknown["account"]) == ("je\u00df.rossi@axonix.ch", None)
    key = b"k" * 32
    keyed = AuditLog(tmp_path / "keyed", pseudonymize_key=key)
    keyed.append(replace(_record(user="Alice.Martin@axonix.ch"), account="alice"))
    keyed.close()
    (entry,) = _lines(tmp_path / "keyed" / "audit-2026-01-15.jsonl")
    assert entry["account"] == "hmac-sha256:" + hmac.new(key, b"alice", hashlib.sha256).hexdigest()
