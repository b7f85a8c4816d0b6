"""Configuration of the long-running daemon (``[daemon]`` in ``ancre.toml``), see
:mod:`ancre.daemon.service`. Per-source watch settings (``watch``, ``poll_interval_s``) live on
:class:`~ancre.settings.sources.SourceSettings`."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ancre.settings.locations import PathRole

log = logging.getLogger("ancre.config")

CONTROL_SOCKET_NAME = "control.sock"
SYSTEMD_RUNTIME_DIR = Path("/run/ancre")
"""Where systemd's ``RuntimeDirectory=ancre`` puts the service's runtime directory."""

WatchMode = Literal["auto", "inotify", "poll", "off"]
"""How a folder source is watched: ``inotify`` (watchdog's native observer), ``poll`` (watchdog's
PollingObserver: a directory snapshot every ``poll_interval_s``, for CIFS/NFS mounts where inotify
sees no change made by other machines), ``auto`` (``poll`` on network file systems, else
``inotify``, falling back to ``poll`` when inotify can't start), ``off`` (periodic
reconciliation only)."""


class DaemonConfig(BaseModel):
    """``ancre daemon``: event queue, schedules, observability. Times in seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    debounce_s: float = Field(0.75, ge=0, le=60)
    """A path is synced once no event touched it for this long (an editor's save — temp file,
    rename, lock file, two "modified" events — becomes one re-index)."""
    max_delay_s: float = Field(10.0, gt=0, le=3600)
    """A path that keeps changing is synced at the latest this long after its first event."""
    queue_max: int = Field(10_000, ge=1)
    """Distinct paths waiting per source; beyond it the source's queued paths are dropped and one
    full reconciliation is run instead (no event is silently lost)."""
    batch_max: int = Field(256, ge=1)
    """Paths synced by one ``sync_paths`` call (one BM25 rebuild request per batch)."""
    reconcile_interval_s: float = Field(3600.0, ge=0)
    """Periodic full reconciliation of every source (events get lost); 0 disables it."""
    acl_sweep_interval_s: float = Field(900.0, ge=0)
    """Periodic ACL sweep of every source (a permission change often produces no content event).
    A sweep is a full pass: it re-reads every item's ACL and only the content of items whose size,
    mtime or etag moved; 0 disables it."""
    audit_purge_interval_s: float = Field(86_400.0, ge=0)
    """Deletion of audit files past ``audit.retention_days``; 0 disables it."""
    initial_sync: bool = True
    """Run a full pass of every source at start (a restart embeds only what changed)."""
    metrics_host: str = "127.0.0.1"
    """Listening address of the Prometheus ``/metrics`` endpoint (with ``metrics_port``)."""
    metrics_port: int | None = Field(None, ge=0, le=65535)
    """Prometheus ``/metrics`` port (prometheus-client); ``None`` disables it, 0 picks a free port
    (written to ``daemon-status.json``)."""
    control_port: int | None = Field(None, ge=0, le=65535)
    """Deprecated and ignored: the control endpoint is now the local control socket
    (``control_socket``), never a TCP port. Still accepted (with a warning) so old configs load."""
    control_socket: Annotated[Path | None, PathRole.SOCKET] = None
    """The control socket's path (a Unix domain socket; see docs/DEPLOY.md, "The admin commands").
    Default: ``$RUNTIME_DIRECTORY/control.sock`` when systemd gives one (``RuntimeDirectory=ancre``),
    else ``<data_dir>/run/control.sock``. Set it when the admin's shell can't find it by itself
    (several instances on one host)."""
    admin_group: str = "ancre-admin"
    """Unix group whose members (with root and the service user) may use the control socket as
    an admin: search and ask as any user, request passes. The socket is created mode 0660 with
    this group when it exists."""
    watchdog_interval_s: float | None = Field(None, gt=0)
    """Interval of systemd ``WATCHDOG=1`` keep-alives; default: half of ``$WATCHDOG_USEC``."""
    status_interval_s: float = Field(5.0, gt=0)
    """How often ``STATUS=`` (systemd) and ``daemon-status.json`` are refreshed when idle."""
    stop_timeout_s: float = Field(8.0, gt=0)
    """On SIGTERM: how long to wait for the current item and the BM25 rebuild before closing."""
    log_format: Literal["json", "text"] = "json"
    """Log lines on stdout: one JSON object per line (journald) or plain text."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """Level of ancre's own log lines unless ``[logging] ancre`` is set."""

    @field_validator("control_port")
    @classmethod
    def _deprecated_port(cls, v: int | None) -> int | None:
        if v is not None:
            log.warning("daemon.control_port is deprecated and ignored: the control endpoint is the local socket "
                        "(daemon.control_socket); it never listens on TCP")
        return v


def control_socket_path(cfg: DaemonConfig, data_dir: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Where the process owning the index serves its control socket: ``cfg.control_socket``, else
    the first directory of ``$RUNTIME_DIRECTORY`` (systemd ``RuntimeDirectory=``), else
    ``<data_dir>/run``, + ``control.sock``."""
    env = os.environ if environ is None else environ
    if cfg.control_socket is not None:
        return Path(cfg.control_socket)
    runtime_dir = env.get("RUNTIME_DIRECTORY", "").split(":")[0]
    if runtime_dir:
        return Path(runtime_dir) / CONTROL_SOCKET_NAME
    return Path(data_dir) / "run" / CONTROL_SOCKET_NAME


def owned_data_dir(data_dir: Path | str) -> str:
    """``data_dir`` as the owner of an index names it on its control socket and a client compares
    it: absolute, symbolic links resolved (``os.path.realpath``), so two spellings of one folder
    agree and two instances' folders never do."""
    return os.path.realpath(Path(data_dir).expanduser())


def control_socket_candidates(cfg: DaemonConfig, data_dir: Path, environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """Where a client looks for the control socket, in order: :func:`control_socket_path` as this
    process would compute it, then (unless ``cfg.control_socket`` is set) systemd's
    ``/run/ancre/control.sock`` — an admin's shell has no ``$RUNTIME_DIRECTORY``."""
    first = control_socket_path(cfg, data_dir, environ)
    if cfg.control_socket is not None:
        return (first,)
    return tuple(dict.fromkeys((first, Path(data_dir) / "run" / CONTROL_SOCKET_NAME, SYSTEMD_RUNTIME_DIR / CONTROL_SOCKET_NAME)))


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

LIBRARY_LOGGERS: dict[str, tuple[str, ...]] = {
    "smbprotocol": ("smbprotocol", "smbclient", "spnego"),
    "uvicorn": ("uvicorn",),
    "apscheduler": ("apscheduler",),
}
"""``[logging]`` component → the loggers (and their children) it sets: smbprotocol ships the
``smbprotocol`` and ``smbclient`` packages and authenticates with pyspnego (``spnego``)."""


class LoggingConfig(BaseModel):
    """``[logging]``: a level per component, for the daemon, ``ancre api`` / ``ancre serve`` and
    the CLI. Library chatter (smbprotocol writes an INFO line per SMB request) is at WARNING unless
    asked for. ``loggers`` sets any other logger by name, e.g. ``{ "ancre.sync" = "DEBUG",
    httpx = "INFO" }``; a logger's level applies to its children."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    ancre: LogLevel | None = None
    """ancre's own loggers; default ``daemon.log_level`` (INFO) in the daemon and the API, WARNING
    in the other commands (``$ANCRE_LOG_LEVEL`` there)."""
    smbprotocol: LogLevel = "WARNING"
    """The SMB client (``smbprotocol``, ``smbclient``, ``spnego``): INFO logs every SMB request."""
    uvicorn: LogLevel = "INFO"
    """The API's HTTP server (INFO: one access line per request)."""
    apscheduler: LogLevel = "WARNING"
    """The daemon's scheduler (INFO: a line per scheduled run)."""
    default: LogLevel = "WARNING"
    """Every other logger (ldap3, httpx, watchdog, …): the root logger's level."""
    loggers: dict[str, LogLevel] = Field(default_factory=dict)
    """More loggers by name → level; wins over the settings above for that logger."""

    @field_validator("loggers")
    @classmethod
    def _names(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [k for k in v if not k.strip() or k != k.strip()]
        if bad:
            raise ValueError(f"logger names must be non-empty, without surrounding spaces: {bad!r}")
        return v

    def levels(self, ancre_default: str, *, cli: bool = False) -> dict[str, str]:
        """Logger name → level name (``""`` is the root logger). ``ancre_default`` is ancre's level
        when ``ancre`` is unset. ``cli``: leave the root logger and, unless set in the file, ancre's
        loggers alone (the CLI keeps its WARNING / ``$ANCRE_LOG_LEVEL`` console)."""
        out: dict[str, str] = {}
        if not cli or "default" in self.model_fields_set:
            out[""] = self.default
        if not cli or self.ancre is not None:
            out["ancre"] = self.ancre or ancre_default
        for component, names in LIBRARY_LOGGERS.items():
            for name in names:
                out[name] = getattr(self, component)
        out.update(self.loggers)
        return out


__all__ = [
    "CONTROL_SOCKET_NAME",
    "LIBRARY_LOGGERS",
    "DaemonConfig",
    "LogLevel",
    "LoggingConfig",
    "WatchMode",
    "control_socket_candidates",
    "control_socket_path",
    "owned_data_dir",
]
