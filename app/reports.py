"""The admin's reports wired to a :class:`~ancre.app.runtime.Runtime`: the exposure report over
the runtime's store, directory and principal resolver (with each source's connector naming the ACE
or permission that opened a document), and the audit log read with the configured folder and
keys. Used by the CLI in-process and, for the exposure report, by the control socket in the
process that owns the index (the same report either way)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ancre.app.runtime import Runtime
from ancre.audit.reading import Entry, Pseudonyms, read_entries
from ancre.audit.record import audit_dir, pseudonym_key
from ancre.config import Settings
from ancre.errors import AuditError, ConfigError
from ancre.reports.audit_log import DocState, Target
from ancre.reports.exposure import ExposureReport, exposure_report, source_explainer


def exposure(rt: Runtime, sources: Sequence[str] | None = None, *, explain: bool = True) -> ExposureReport:
    """``ancre report exposure`` over ``rt`` (see :mod:`ancre.reports.exposure`). Raises
    :class:`~ancre.errors.ConfigError` for an unknown source id, what the store and the directory
    raise otherwise."""
    for s in sources or ():
        rt.settings.source(s)
    explainer = None
    if explain:
        explainer = source_explainer(lambda sid: rt.connector(rt.settings.source(sid)), rt.directory)
    return exposure_report(rt.store, rt.directory, rt.principals, rt.settings.reports, explainer=explainer,
                           sources=list(sources) if sources else None)


def audit_folder(settings: Settings) -> Path:
    """The audit folder of ``settings``."""
    return audit_dir(settings.audit, Path(settings.data_dir))


def read_key(path: Path | None, what: str) -> bytes:
    """A key file's bytes; raises :class:`~ancre.errors.ConfigError` naming it when unreadable."""
    assert path is not None
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"{what} {path}: cannot read it: {e.strerror or e}") from None


def pseudonyms(rt: Runtime, key_file: Path | None = None) -> Pseudonyms:
    """How people are written in the log: the given key file, else the configured
    pseudonymisation key when ``audit.pseudonymize`` (never created here), else in clear."""
    if key_file is not None:
        key: bytes | None = read_key(key_file, "--key-file")
    else:
        key = pseudonym_key(rt.settings.audit, rt.data_dir, create=False)
    return Pseudonyms(key, rt.directory)


def chain_key_of(settings: Settings, key_file: Path | None = None) -> bytes | None:
    """The chain's HMAC key: the given file, else ``audit.chain_key_file`` (``None``: unkeyed)."""
    if key_file is not None:
        return read_key(key_file, "--key-file")
    path = settings.audit.chain_key_file
    return read_key(Path(path), "audit.chain_key_file") if path is not None else None


def entries(settings: Settings, since: datetime | None, until: datetime | None) -> list[Entry]:
    """The audit records in the period (:func:`ancre.audit.reading.read_entries`)."""
    return read_entries(audit_folder(settings), since, until)


def target_of(settings: Settings, given: str, source: str | None) -> Target:
    """The ``who-saw`` target: ``given`` under every source's ``unc_root`` (or local root), or
    only ``source``'s."""
    srcs = [settings.source(source)] if source else list(settings.sources)
    roots = {}
    for s in srcs:
        root = s.unc_root or str(getattr(s, "root", "") or "")
        if root:
            roots[s.id] = root
    return Target.of(given, roots)


def now_state(rt: Runtime) -> DocState | None:
    """Each indexed document's ACL hash now, from the state DB (``None`` when there is none)."""
    if not (rt.data_dir / "state.sqlite3").exists():
        return None
    return {it.doc_id: it.acl_hash for it in rt.state.all_items() if it.status != "deleted"}


def check_audit_folder(settings: Settings) -> Path:
    """The audit folder, which must exist; raises :class:`~ancre.errors.AuditError` otherwise."""
    d = audit_folder(settings)
    if not d.is_dir():
        raise AuditError(f"audit log {d}: no such folder (no question audited yet, or [audit] dir is wrong)")
    return d


__all__ = [
    "audit_folder", "chain_key_of", "check_audit_folder", "entries", "exposure", "now_state", "pseudonyms",
    "read_key", "target_of",
]
