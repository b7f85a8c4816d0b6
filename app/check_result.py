"""One line of ``ancre check`` (:class:`CheckResult`) and whether a directory is configured:
shared by the checks of :mod:`ancre.app.check` and :mod:`ancre.app.check_reach`."""

from __future__ import annotations

from dataclasses import dataclass

from ancre.config import Settings
from ancre.settings import FileDirectoryConfig


@dataclass(frozen=True)
class CheckResult:
    """One line of ``ancre check``: ``part`` (``directory``, ``source partage``, ``store``…),
    ``ok``, what was found or went wrong (``detail``) and, on failure, what to change (``fix``)."""

    part: str
    ok: bool
    detail: str
    fix: str | None = None
    warn: bool = False
    """A passed check that found something the admin should fix (``ok`` stays true: ancre works,
    fail-closed, around it)."""

    @property
    def status(self) -> str:
        """``ok``, ``warn`` or ``FAIL``."""
        return "FAIL" if not self.ok else "warn" if self.warn else "ok"

    def line(self) -> str:
        """``ok   directory  …`` / ``warn identities …`` / ``FAIL directory  … — fix: …``."""
        text = f"{self.status:<4} {self.part:<16} {self.detail}"
        return text + (f" — fix: {self.fix}" if self.fix and (self.warn or not self.ok) else "")


def directory_configured(settings: Settings) -> bool:
    """Whether a directory is configured (``ldap``, or ``file`` with a ``path``)."""
    d = settings.directory
    return not isinstance(d, FileDirectoryConfig) or d.path is not None


__all__ = ["CheckResult", "directory_configured"]
