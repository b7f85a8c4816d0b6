"""The one exception tree of ancre: everything raised on purpose derives from :class:`AncreError`."""

from __future__ import annotations


class AncreError(Exception):
    """Root of every error ancre raises on purpose."""


class ConfigError(AncreError):
    """The configuration is invalid; the message names the offending key (e.g. ``sources[0].root``)."""


class PathDeniedError(ConfigError):
    """A path key names a file or folder this user may not use (``key``: the key, e.g.
    ``data_dir``); raised from the :class:`PermissionError` that says which path, so that the CLI
    can say what permission is needed where and how to run the command instead."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class ExtractionError(AncreError):
    """A file could not be turned into text.

    ``reason`` is a short machine-readable status reason (``encrypted``, ``corrupt``, ``timeout``,
    ``crashed``, ``unsupported``, ``empty``, ``too_large``); ``detail`` is human-readable.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class EmbedderError(AncreError):
    """An embedding backend failed (server unreachable, bad answer, retries exhausted)."""


class StoreError(AncreError):
    """The vector store failed or is in an unusable state."""


class EmbedderMismatchError(StoreError):
    """The store was built with another embedder (name or dimension) than the configured one."""


class StoreLockedError(StoreError):
    """The embedded store is already opened by another process (it can have one owner only):
    ``owner`` says which (``PID n: command line``, as its ``LOCK`` file records it)."""

    def __init__(self, message: str, owner: str = "") -> None:
        super().__init__(message)
        self.owner = owner


class DiskFullError(StoreError):
    """The data folder's file system has less free space than a write or an index build needs
    plus the margin (``[store] min_free_mb``): refused before any byte was written (docs/OPERATIONS.md,
    "A full disk"). ``folder``, ``free`` and ``needed`` (bytes, the
    margin included) say where and how much; a pass that meets it stops as ``disk_full``."""

    def __init__(
        self, folder: object, *, free: int | None = None, needed: int | None = None, what: str = "the writes",
        margin: int = 0,
    ) -> None:
        self.folder, self.free, self.needed, self.what, self.margin = folder, free or 0, needed or 0, what, margin
        if free is None or needed is None:  # rebuilt from its message (the control socket's client)
            super().__init__(str(folder))
            return
        mib = 2**20
        need = (f"{what} need {needed / mib:.1f} MiB (with the {margin / mib:.0f} MiB margin of [store] min_free_mb)"
                if needed else f"{what} failed for want of space")
        super().__init__(
            f"disk full: the file system of {folder} has {free / mib:.1f} MiB free, {need}: free space there — "
            "indexing waits and resumes by itself, questions are answered from the index as it is"
        )


class StoreDamagedError(StoreError):
    """The index on disk is damaged (a crash left a segment the engine can't read): the message
    names the shard or segment and the way back, ``ancre reindex``."""


class StateDamagedError(AncreError):
    """The state database is damaged (SQLite: corrupt, or not a database): the message names the
    file and the way back."""


class DirectoryError(AncreError):
    """The directory (users and groups) could not be read or reached. Queries fail closed on it."""


class AclError(AncreError):
    """A security descriptor or ACL manifest could not be parsed. Callers turn it into *nobody*."""


class SourceUnavailableError(AncreError):
    """A source's root could not be listed (missing, unmounted, unreachable).

    Never to be read as "the source is empty": a pass that meets it purges nothing.
    """


class AuditError(AncreError):
    """An audit record could not be written. The answer is then withheld: every question must
    leave its record (nLPD), so a full disk or a read-only log folder fails closed."""


class ControlError(AncreError):
    """The local control socket (docs/DEPLOY.md, "The admin commands") could not be used: the owner
    of the index stopped answering, or answered with an error this client does not know."""


class ControlPermissionError(ControlError):
    """The caller may not use the control socket (its file mode/group refuse it), or may not do
    this through it (choosing another user is for root, the service user and the admin group)."""


class ControlBusyError(ControlError):
    """Refused by the owner of the index while it is busy (a pass running or queued), or because
    the operation needs the index for itself (reindex)."""
