"""``ancre daemon`` wired from the settings: the composition root builds the daemon's parts from
one :class:`~ancre.app.runtime.Runtime` (:func:`daemon_parts`), runs the
:class:`~ancre.daemon.service.Daemon` and serves the local control socket next to it
(:mod:`ancre.app.control`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from ancre.app.runtime import Runtime
from ancre.config import Settings
from ancre.daemon.notify import SdNotifier
from ancre.daemon.service import Daemon, DaemonParts

log = logging.getLogger("ancre.daemon")


def audit_purger(settings: Settings) -> Callable[[], list[Path]] | None:
    """The audit-retention job's callable: deletes the audit files older than
    ``audit.retention_days`` (``None`` when retention is off). Returns the deleted paths."""
    from ancre.audit.record import AuditLog, audit_dir, chain_key

    a = settings.audit
    if a.retention_days <= 0:
        return None
    directory = audit_dir(a, Path(settings.data_dir))

    def purge() -> list[Path]:
        if not directory.is_dir():
            return []
        # the checkpoint it leaves is sealed with the chain's key
        return AuditLog(directory, a.retention_days, chain_key=chain_key(a)).purge_expired()

    return purge


def daemon_parts(rt: Runtime) -> DaemonParts:
    """The daemon's parts from ``rt`` (opens the store: raises
    :class:`~ancre.errors.StoreLockedError` when another process owns the embedded store)."""
    return DaemonParts(
        engine=rt.engine, state=rt.state, bm25=rt.bm25, connectors=tuple(rt.connectors()), cursors=rt.cursors,
        purge_audit=audit_purger(rt.settings),
    )


def make_daemon(rt: Runtime, *, notifier: SdNotifier | None = None) -> Daemon:
    """A :class:`Daemon` over ``rt``'s parts (not started; ``rt`` stays the caller's to close)."""
    return Daemon(rt.settings, daemon_parts(rt), notifier=notifier)


def run_daemon(settings: Settings) -> int:
    """``ancre daemon``: set up logging from ``settings.daemon``, open the index, serve the
    control socket and run a :class:`Daemon` until SIGTERM/SIGINT; returns the exit status.
    Raises :class:`~ancre.errors.ConfigError` naming the key of a file or folder it can't use
    (:func:`~ancre.settings.locations.check_paths`),
    :class:`~ancre.errors.StoreLockedError` when another process owns the embedded store,
    :class:`~ancre.errors.ControlError` when another ancre answers on the control socket,
    ``OSError`` when the metrics port or the socket can't be bound."""
    from ancre.app.control import serve_control
    from ancre.daemon.logs import setup_logging
    from ancre.settings.locations import check_paths
    from ancre.settings.secrets import check_secrets

    setup_logging(settings.daemon.log_format, settings.daemon.log_level, settings.logging.levels(settings.daemon.log_level))
    check_paths(settings)
    check_secrets(settings, skip=("api",))  # the API's are its own (ancre-api.service, ancre serve)
    rt = Runtime(settings)
    try:
        daemon = make_daemon(rt)
        control = serve_control(rt, daemon)
    except BaseException:
        rt.close()
        raise
    try:
        return daemon.run_forever()  # ends the process at once when the worker did not stop in time
    finally:
        control.stop()
        rt.close()


__all__ = ["audit_purger", "daemon_parts", "make_daemon", "run_daemon"]
