"""Principal providers for tests: a table (as an ``aad:`` / ``sp:`` provider answers from Graph),
one whose service is down, one that misbehaves. Each satisfies
:class:`ancre.acl.providers.PrincipalProvider`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ancre.errors import DirectoryError


@dataclass(frozen=True)
class StaticProvider:
    """Answers from ``table`` (user → principals); an unknown user gets ``frozenset()``."""

    name: str
    table: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def principals(self, user: str) -> frozenset[str]:
        return self.table.get(user, frozenset())


@dataclass(frozen=True)
class DownProvider:
    """A provider whose service cannot be reached: every call raises ``DirectoryError``."""

    name: str = "entra"

    def principals(self, user: str) -> frozenset[str]:
        raise DirectoryError("graph.microsoft.com unreachable")


@dataclass(frozen=True)
class OddProvider:
    """A provider that misbehaves: raises ``answer`` when it is an exception, else returns it as is."""

    answer: object
    name: str = "odd"

    def principals(self, user: str) -> frozenset[str]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[return-value]
