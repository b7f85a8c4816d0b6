"""The one exception tree of ancre: everything raised on purpose derives from :class:`AncreError`."""

from __future__ import annotations


class AncreError(Exception):
    """Root of every error ancre raises on purpose."""


class ConfigError(AncreError):
    """The configuration is invalid; the message names the offending key (e.g. ``sources[0].root``)."""


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
    """The embedded store is already opened by another process (it can have one owner only)."""


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
    """The local control socket (README "Running under systemd") could not be used: the owner
    of the index stopped answering, or answered with an error this client does not know."""


class ControlPermissionError(ControlError):
    """The caller may not use the control socket (its file mode/group refuse it), or may not do
    this through it (choosing another user is for root, the service user and the admin group)."""


class ControlBusyError(ControlError):
    """Refused by the owner of the index while it is busy (a pass running or queued), or because
    the operation needs the index for itself (reindex)."""
