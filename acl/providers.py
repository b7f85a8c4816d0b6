"""Where a user's principals come from: :class:`PrincipalProvider` and their union, :class:`PrincipalResolver`.

A *principal* is a prefixed string naming something a document's ACL can grant to: ``sid:S-1-…``
(a Windows user, group or well-known SID, from the file or LDAP directory), and later
``aad:<object id>`` (an Entra ID user or group) or ``sp:<site id>:<group id>`` (a SharePoint
group). Each kind comes from a provider; a user's principal set P(user) is the union of what every
configured provider says (docs/ARCHITECTURE.md).

Fail closed, in both directions:

- a provider that cannot answer raises :class:`~ancre.errors.DirectoryError` (or a subclass), and
  the whole resolution raises with it — never a partial set that silently lacks, say, the deny
  group a missing provider would have added;
- a user no provider knows gets ``frozenset()``, which reads nothing. An empty set is never "no
  filter": callers must not skip the ACL filter for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ancre.acl.directory import Directory
from ancre.errors import ConfigError, DirectoryError
from ancre.models import identity_defect


class PrincipalProviderError(DirectoryError):
    """A provider failed in a way other than :class:`DirectoryError` (a bug, a client library's own
    exception) or returned something that is not a set of prefixed principals. It is a
    ``DirectoryError`` so that every caller fails closed on it exactly as on a directory outage
    (the API answers 503, the CLI exits with an error)."""


@runtime_checkable
class PrincipalProvider(Protocol):
    """One source of principals for a user.

    ``name`` identifies the provider in explanations and logs (``"directory"``,
    ``"sharepoint-direction"``); unique among the providers of one resolver.
    """

    @property
    def name(self) -> str:
        """The provider's name (read-only: a frozen dataclass field satisfies it)."""
        ...

    def principals(self, user: str) -> frozenset[str]:
        """The principals ``user`` holds according to this provider, as prefixed strings
        (``"sid:S-1-5-21-…-1105"``); ``frozenset()`` when the provider does not know the user.
        ``user`` is the directory account name (sAMAccountName), a UPN or ``DOMAIN\\user``.
        Raises :class:`~ancre.errors.DirectoryError` (or a subclass) when it cannot answer."""
        ...


@dataclass(frozen=True)
class DirectoryProvider:
    """The ``sid:`` principals of a :class:`~ancre.acl.directory.Directory` (file or LDAP): the
    user's own SID, every group reached through nested membership, Everyone and Authenticated
    Users (:meth:`Directory.principals`). Raises ``DirectoryError`` as the directory does."""

    directory: Directory
    name: str = "directory"

    def principals(self, user: str) -> frozenset[str]:
        """See :meth:`PrincipalProvider.principals`."""
        return self.directory.principals(user)


def _checked(provider: PrincipalProvider, user: str) -> frozenset[str]:
    """``provider.principals(user)``, checked: a ``DirectoryError`` propagates as is; any other
    exception, a result that is not a set, or an element that is not a prefixed principal
    (``prefix:value``) raises :class:`PrincipalProviderError` naming the provider."""
    try:
        got = provider.principals(user)
    except DirectoryError:
        raise
    except Exception as e:  # whatever went wrong, the query must fail closed
        raise PrincipalProviderError(f"principal provider {provider.name!r} failed: {type(e).__name__}: {e}") from e
    if not isinstance(got, (frozenset, set)):
        raise PrincipalProviderError(
            f"principal provider {provider.name!r} returned {type(got).__name__}, not a set of principals"
        )
    for p in got:
        prefix, sep, rest = p.partition(":") if isinstance(p, str) else ("", "", "")
        if not (prefix and sep and rest):
            raise PrincipalProviderError(
                f"principal provider {provider.name!r} returned {p!r}, not a prefixed principal ('sid:S-1-…')"
            )
    return frozenset(got)


class PrincipalResolver:
    """The union of several providers: P(user) for the query core, explanations and the audit.

    ``providers`` are asked in order, every time (each caches as it sees fit: the directory keeps
    a user's groups ``directory.cache_ttl_s`` seconds). Raises :class:`~ancre.errors.ConfigError`
    at construction for no provider or two providers with the same name. Thread-safe when its
    providers are.
    """

    def __init__(self, providers: Sequence[PrincipalProvider]) -> None:
        if not providers:
            raise ConfigError("principals: at least one principal provider is required (the directory)")
        names = [p.name for p in providers]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"principals: two principal providers are named {dup[0]!r}")
        self.providers: tuple[PrincipalProvider, ...] = tuple(providers)

    @property
    def names(self) -> tuple[str, ...]:
        """The providers' names, in order."""
        return tuple(p.name for p in self.providers)

    def principals(self, user: str) -> frozenset[str]:
        """P(user): the union of every provider's principals for ``user``; ``frozenset()`` when
        none knows the user (reads nothing — never "no filter"). Raises
        :class:`~ancre.errors.DirectoryError` when any provider fails (no partial set), a
        :class:`PrincipalProviderError` when one misbehaves. A name carrying whitespace at either
        end or an invisible character (:func:`~ancre.models.identity_defect`) is no one's: no
        provider is asked, whatever it would have stripped."""
        if identity_defect(user, inner_space=True) is not None:
            return frozenset()
        out: set[str] = set()
        for provider in self.providers:
            out |= _checked(provider, user)
        return frozenset(out)

    def origins(self, user: str) -> Mapping[str, str]:
        """``{principal: provider name}`` for every principal of :meth:`principals` (its keys are
        exactly that set); a principal several providers give is attributed to the first in
        order. Raises as :meth:`principals`."""
        if identity_defect(user, inner_space=True) is not None:
            return {}
        out: dict[str, str] = {}
        for provider in self.providers:
            for p in sorted(_checked(provider, user)):
                out.setdefault(p, provider.name)
        return out


def directory_resolver(directory: Directory) -> PrincipalResolver:
    """P(user) from ``directory`` alone (one :class:`DirectoryProvider`): the resolver of a
    caller given no other providers (an explanation, an answer service built by hand). The
    composition root (:class:`ancre.query.bootstrap.Bootstrap`) adds every source's providers."""
    return PrincipalResolver([DirectoryProvider(directory)])


__all__ = ["DirectoryProvider", "PrincipalProvider", "PrincipalProviderError", "PrincipalResolver", "directory_resolver"]
