"""The ``[reports]`` section: what the admin's exposure report counts as *broad*
(docs/REPORTS.md). Used as :class:`ancre.config.Settings` ``reports``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ReportsConfig(BaseModel):
    """Broad principals of ``ancre report exposure``, on top of the well-known ones (Everyone,
    Authenticated Users, Domain Users, BUILTIN\\Users, Entra ``everyone-internal``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    broad_share: float = Field(0.8, gt=0.0, le=1.0)
    """A document readable by more than this share of the directory's users is broadly
    readable, whatever principal opened it (a group that holds nearly everyone)."""
    broad_principals: tuple[str, ...] = ()
    """More principals to treat as broad: directory names (``AXONIX\\GG_Tous``) or prefixed
    principals (``sid:S-1-5-21-…``, ``aad:<group id>``)."""


__all__ = ["ReportsConfig"]
