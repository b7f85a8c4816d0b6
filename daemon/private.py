"""Moved to :mod:`ancre.index.private` (the query core opens the data directory too); kept so
existing imports keep working."""

from ancre.index.private import PRIVATE_UMASK, make_private, restrict_umask, tighten_tree

__all__ = ["PRIVATE_UMASK", "make_private", "restrict_umask", "tighten_tree"]
