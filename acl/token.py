"""Who holds an ACE's SID: the access token a Windows (or Samba) file server builds for a domain
user's *network logon*, as far as the ACL engine needs it.

A user's principal set P(user) (:mod:`ancre.acl.providers`) holds the user's SID, every group of
``tokenGroups`` (nested, universal, domain-local, the primary group), Everyone, Authenticated Users
and NETWORK. The token a file server builds for an SMB session holds more, and its extra SIDs are
resolved *on the ACE side*, per file server, by :class:`TokenRules`: an ACE's SID ``s`` is held by a
user iff ``P ∩ holders(s) ≠ ∅``. That keeps P(user) the same for every source while each SMB
source evaluates SIDs the way its own server does.

The rules, from [MS-DTYP] 2.4.2.4 (well-known SIDs), [MS-PAC]/[MS-APDS] (what the logon adds) and
[MS-SAMR] 3.1.5.9.2 (alias membership), checked against the token a Samba AD DC builds
(``tests/integration/test_acl_differential.py``):

- **always** in a network logon: Everyone (S-1-1-0), Authenticated Users (S-1-5-11), NETWORK
  (S-1-5-2); This Organization (S-1-5-15) when the server adds it (Windows does for users of its
  forest, Samba does not): ``this_organization``;
- **never** for a domain user over the network: INTERACTIVE, BATCH, SERVICE, ANONYMOUS, LOCAL,
  CONSOLE LOGON, DIALUP, the CREATOR placeholders, PRINCIPAL SELF, SYSTEM, service and
  app-package SIDs, local accounts of the server;
- **undecided**: SIDs whose presence depends on *how* the user authenticated (the
  authentication-package SIDs S-1-5-64-x, NTLM S-1-5-64-10 among them; the asserted-identity SIDs
  S-1-18-x; the certificate This Organization S-1-5-65-1; claims SIDs), integrity labels
  (S-1-16-x), logon-session SIDs and any well-known SID not listed here. An ALLOW for one grants
  nobody; a DENY for one applies to everyone (fail closed) and the reason is recorded;
- **local groups of the file server** (aliases: BUILTIN S-1-5-32-x, a member server's own groups,
  a DC's domain-local groups), which ``tokenGroups`` never returns for the well-known members
  (BUILTIN\\Users holds Authenticated Users, Pre-Windows 2000 Compatible Access holds it too) nor for
  a member server at all: held iff P holds one of the alias's members, transitively
  (:class:`LocalGroups`, read over SAMR or configured). When they are not known, their SIDs are
  undecided; so is membership through Everyone / Authenticated Users / NETWORK in a local group
  that is not BUILTIN (Windows expands it, a Samba DC does not);
- any other domain SID (S-1-5-21-…): held iff it is in P.

In :attr:`TokenMode.DIRECTORY` (ACL manifests: no file server) every SID is plainly matched
against P.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from ancre.errors import AclError
from ancre.models import AUTHENTICATED_USERS, EVERYONE, NETWORK, sid_principal

EVERYONE_SID = "S-1-1-0"
AUTHENTICATED_USERS_SID = "S-1-5-11"
NETWORK_SID = "S-1-5-2"
THIS_ORGANIZATION_SID = "S-1-5-15"
OWNER_RIGHTS_SID = "S-1-3-4"
"""OWNER RIGHTS ([MS-DTYP] 2.4.2.4): an ACE for it applies to the object's owner (Windows Server 2008
and later), and its presence cancels the owner's implicit READ_CONTROL | WRITE_DAC."""
BUILTIN_DOMAIN = "S-1-5-32"
"""The BUILTIN domain: every machine (and every DC of a domain, together) has its own aliases there."""

UNIVERSAL = frozenset({EVERYONE, AUTHENTICATED_USERS, NETWORK})
"""Principals every resolved user holds (the directory adds them to P(user)): a need containing
one of them is always met, a deny containing one refuses everybody."""


class Presence(StrEnum):
    """Whether a domain user's network-logon token holds a well-known SID."""

    ALWAYS = "always"
    NEVER = "never"
    UNDECIDED = "undecided"


_A, _N, _U = Presence.ALWAYS, Presence.NEVER, Presence.UNDECIDED

WELL_KNOWN_SIDS: Mapping[str, tuple[str, Presence]] = {
    "S-1-0-0": ("NULL SID", _N),
    "S-1-1-0": ("Everyone", _A),
    "S-1-2-0": ("LOCAL", _N),
    "S-1-2-1": ("CONSOLE LOGON", _N),
    "S-1-3-0": ("CREATOR OWNER", _N),
    "S-1-3-1": ("CREATOR GROUP", _N),
    "S-1-3-2": ("CREATOR OWNER SERVER", _N),
    "S-1-3-3": ("CREATOR GROUP SERVER", _N),
    "S-1-3-4": ("OWNER RIGHTS", _N),  # replaced by the owner in the walk, never held as such
    "S-1-5-1": ("DIALUP", _N),
    "S-1-5-2": ("NETWORK", _A),
    "S-1-5-3": ("BATCH", _N),
    "S-1-5-4": ("INTERACTIVE", _N),
    "S-1-5-6": ("SERVICE", _N),
    "S-1-5-7": ("ANONYMOUS LOGON", _N),
    "S-1-5-8": ("PROXY", _N),
    "S-1-5-9": ("ENTERPRISE DOMAIN CONTROLLERS", _N),
    "S-1-5-10": ("PRINCIPAL SELF", _N),
    "S-1-5-11": ("Authenticated Users", _A),
    "S-1-5-12": ("RESTRICTED", _N),
    "S-1-5-13": ("TERMINAL SERVER USER", _N),
    "S-1-5-14": ("REMOTE INTERACTIVE LOGON", _N),
    "S-1-5-15": ("This Organization", _U),
    "S-1-5-17": ("IUSR", _N),
    "S-1-5-18": ("SYSTEM", _N),
    "S-1-5-19": ("LOCAL SERVICE", _N),
    "S-1-5-20": ("NETWORK SERVICE", _N),
    "S-1-5-33": ("WRITE RESTRICTED", _N),
    "S-1-5-113": ("Local account", _N),
    "S-1-5-114": ("Local account and member of Administrators group", _N),
    "S-1-5-1000": ("Other Organization", _N),
    "S-1-5-64-10": ("NTLM Authentication", _U),
    "S-1-5-64-14": ("SChannel Authentication", _U),
    "S-1-5-64-21": ("Digest Authentication", _U),
    "S-1-5-65-1": ("This Organization Certificate", _U),
    "S-1-18-1": ("Authentication authority asserted identity", _U),
    "S-1-18-2": ("Service asserted identity", _U),
    "S-1-18-3": ("Fresh public key identity", _U),
    "S-1-18-4": ("Key trust identity", _U),
    "S-1-18-5": ("Key property MFA", _U),
    "S-1-18-6": ("Key property attestation", _U),
}
"""Well-known SIDs ([MS-DTYP] 2.4.2.4) → (name, presence in a domain user's network-logon token)."""

_PREFIXES: tuple[tuple[str, str, Presence], ...] = (
    ("S-1-5-64-", "an authentication-package SID (depends on how the user authenticated)", _U),
    ("S-1-18-", "an asserted-identity SID (depends on how the user authenticated)", _U),
    ("S-1-16-", "a mandatory integrity label", _U),
    ("S-1-5-5-", "a logon-session SID", _U),
    ("S-1-5-21-0-0-0-", "a claims / compound-identity SID", _U),
    ("S-1-5-80-", "an NT SERVICE account", _N),
    ("S-1-5-82-", "an IIS application pool", _N),
    ("S-1-5-83-", "a virtual machine", _N),
    ("S-1-5-90-", "a Window Manager account", _N),
    ("S-1-5-96-", "a Font Driver Host account", _N),
    ("S-1-15-", "an app-package or capability SID", _N),
)

BUILTIN_NAMES: Mapping[str, str] = {
    "S-1-5-32-544": "Administrators",
    "S-1-5-32-545": "Users",
    "S-1-5-32-546": "Guests",
    "S-1-5-32-547": "Power Users",
    "S-1-5-32-548": "Account Operators",
    "S-1-5-32-549": "Server Operators",
    "S-1-5-32-550": "Print Operators",
    "S-1-5-32-551": "Backup Operators",
    "S-1-5-32-552": "Replicator",
    "S-1-5-32-554": "Pre-Windows 2000 Compatible Access",
    "S-1-5-32-555": "Remote Desktop Users",
    "S-1-5-32-556": "Network Configuration Operators",
    "S-1-5-32-558": "Performance Monitor Users",
    "S-1-5-32-559": "Performance Log Users",
    "S-1-5-32-560": "Windows Authorization Access Group",
    "S-1-5-32-562": "Distributed COM Users",
    "S-1-5-32-568": "IIS_IUSRS",
    "S-1-5-32-569": "Cryptographic Operators",
    "S-1-5-32-573": "Event Log Readers",
    "S-1-5-32-574": "Certificate Service DCOM Access",
    "S-1-5-32-578": "Hyper-V Administrators",
    "S-1-5-32-579": "Access Control Assistance Operators",
    "S-1-5-32-580": "Remote Management Users",
}
"""BUILTIN aliases by SID ([MS-DTYP] 2.4.2.4), for names in explanations and configuration."""


def well_known_name(sid: str) -> str | None:
    """The name of a well-known or BUILTIN SID (``"NETWORK"``, ``"BUILTIN\\Users"``), ``None``
    for any other SID."""
    if sid in WELL_KNOWN_SIDS:
        return WELL_KNOWN_SIDS[sid][0]
    if sid in BUILTIN_NAMES:
        return f"BUILTIN\\{BUILTIN_NAMES[sid]}"
    return None


def domain_of(sid: str) -> str:
    """``"S-1-5-21-1-2-3-1105"`` → ``"S-1-5-21-1-2-3"`` (the SID without its last RID)."""
    return sid.rsplit("-", 1)[0]


class TokenMode(StrEnum):
    """How ACE SIDs are matched: against P(user) alone, or as a file server's network logon does."""

    DIRECTORY = "directory"
    """P(user) is the token (ACL manifests, no file server): every SID is matched plainly."""
    NETWORK = "network"
    """The token of a domain user's SMB session on one file server (see the module note)."""


@dataclass(frozen=True)
class LocalGroups:
    """The local groups (aliases, [MS-SAMR] 2.2.4) of one file server and their direct members.

    ``members``: alias SID → member SIDs (users, groups, well-known SIDs, other aliases), for the
    BUILTIN aliases and those of the server's account domain (a member server's own groups; a DC's
    domain-local groups). ``names``: alias SID → name for explanations. ``origin``: where they come
    from (``"SAMR on \\\\srv"``, ``"config"``). ``complete``: every alias of the server is listed
    (SAMR's answer), so a local SID that is not an alias is a local account; a configured list alone
    is not complete: a local SID it does not name is undecided."""

    members: Mapping[str, frozenset[str]]
    names: Mapping[str, str] = field(default_factory=dict)
    origin: str = ""
    complete: bool = True

    def merged(self, override: Mapping[str, frozenset[str]], origin: str) -> LocalGroups:
        """These groups with ``override``'s entries replacing (or adding) aliases' members."""
        return LocalGroups(ChainMap(dict(override), self.members), self.names,  # type: ignore[arg-type]  # ChainMap only reads members, which may be a lazy read-only mapping
                           f"{self.origin} + {origin}" if self.origin else origin, self.complete)


@dataclass(frozen=True)
class Holders:
    """Which users hold one SID in their token, in terms of P(user).

    ``surely``: a user with ``P ∩ surely ≠ ∅`` holds it (an ALLOW for the SID applies to them);
    ``maybe``: only a user with ``P ∩ maybe ≠ ∅`` may hold it (a DENY applies to them), ``maybe ⊇
    surely``; ``undecided``: why ancre can't tell for part of the holders (a DENY then reaches
    everyone: ``EVERYONE ∈ maybe``); ``route``: how the SID is held, for explanations
    (``"in every network logon"``, ``"local group BUILTIN\\Users of the file server (SAMR on …)"``)."""

    surely: frozenset[str] = frozenset()
    maybe: frozenset[str] = frozenset()
    undecided: tuple[str, ...] = ()
    route: str | None = None

    @classmethod
    def plain(cls, sid: str, route: str | None = None) -> Holders:
        """Held exactly by the users whose P holds ``sid:<sid>``."""
        p = frozenset({sid_principal(sid)})
        return cls(p, p, (), route)

    @classmethod
    def nobody(cls, route: str) -> Holders:
        """Held by no domain user over the network."""
        return cls(frozenset(), frozenset(), (), route)

    @classmethod
    def unknown(cls, why: str) -> Holders:
        """Undecidable: an ALLOW grants nobody, a DENY reaches everyone."""
        return cls(frozenset(), frozenset({EVERYONE}), (why,), why)

    def __or__(self, other: Holders) -> Holders:
        return Holders(self.surely | other.surely, self.maybe | other.maybe, self.undecided + other.undecided, self.route)


@dataclass(frozen=True)
class TokenRules:
    """How one file server's access check sees a user's token (see the module note).

    ``mode``: :attr:`TokenMode.DIRECTORY` (default: P(user) is the token) or
    :attr:`TokenMode.NETWORK`. For a network logon: ``local_groups``, the server's aliases
    (``None``: not known — their SIDs are then undecided, ``local_groups_problem`` says why);
    ``account_domain``, the domain SID of the server's own accounts (a member server's machine SID;
    on a domain controller, the AD domain), ``None`` when unknown; ``primary_domain``, the AD domain
    the users come from; ``this_organization``: whether the server adds This Organization
    (S-1-5-15) to the token (``None``: undecided); ``assumed``: SID → whether every session's token
    holds it, for SIDs otherwise undecided that the administrator can vouch for (every user
    authenticates with NTLM: ``{"S-1-5-64-10": True}``).

    A domain SID (S-1-5-21-…) of the account domain of a member server is one of its local groups
    or accounts; of the primary (or any other) domain, a domain account or group matched against
    P; while the account domain is not known, any SID outside the primary domain may be the
    server's own, so it is undecided. Immutable and thread-safe; :meth:`holders` is memoised.
    """

    mode: TokenMode = TokenMode.DIRECTORY
    local_groups: LocalGroups | None = None
    local_groups_problem: str | None = None
    account_domain: str | None = None
    primary_domain: str | None = None
    this_organization: bool | None = None
    assumed: Mapping[str, bool] = field(default_factory=dict)
    _memo: dict[str, Holders] = field(default_factory=dict, compare=False, repr=False, hash=False)

    @classmethod
    def network(
        cls,
        local_groups: LocalGroups | None,
        *,
        account_domain: str | None = None,
        primary_domain: str | None = None,
        problem: str | None = None,
        this_organization: bool | None = None,
        assumed: Mapping[str, bool] | None = None,
    ) -> TokenRules:
        """The rules of a file server's network logon (``problem``: why ``local_groups`` is ``None``)."""
        return cls(TokenMode.NETWORK, local_groups, problem, account_domain, primary_domain, this_organization,
                   dict(assumed or {}))

    @property
    def is_domain_controller(self) -> bool:
        """Whether the file server is a DC of the users' domain (its accounts are the domain's)."""
        return self.account_domain is not None and self.account_domain == self.primary_domain

    def describe(self) -> str:
        """One line for explanations: how the server's token is modelled."""
        if self.mode == TokenMode.DIRECTORY:
            return "token: the directory's principals"
        if self.local_groups is None:
            groups = f"not known ({self.local_groups_problem or 'not read'})"
        else:
            groups = f"from {self.local_groups.origin or 'the server'}"
        return f"token: network logon; local groups of the file server {groups}"

    def holders(self, sid: str) -> Holders:
        """Who holds ``sid`` (bare ``S-1-…``) in this server's token. Never raises."""
        hit = self._memo.get(sid)
        if hit is None:
            hit = self._holders(sid, frozenset())
            self._memo[sid] = hit
        return hit

    def _is_local(self, sid: str) -> bool:
        dom = domain_of(sid)
        return dom == BUILTIN_DOMAIN or (dom == self.account_domain and not self.is_domain_controller)

    def _holders(self, sid: str, seen: frozenset[str]) -> Holders:
        if self.mode == TokenMode.DIRECTORY:
            return Holders.plain(sid)
        if sid in self.assumed:
            name = well_known_name(sid) or sid
            if self.assumed[sid]:
                return Holders(frozenset({EVERYONE}), frozenset({EVERYONE}), (), f"{name}: in every session's token (assumed)")
            return Holders.nobody(f"{name}: in no session's token (assumed)")
        if sid == THIS_ORGANIZATION_SID and self.this_organization is not None:
            if self.this_organization:
                return Holders(frozenset({EVERYONE}), frozenset({EVERYONE}), (),
                               "This Organization: in every network logon (this_organization = true)")
            return Holders.nobody("This Organization: the file server does not add it (this_organization = false)")
        known = WELL_KNOWN_SIDS.get(sid)
        if known is not None:
            name, presence = known
            if presence == Presence.ALWAYS:
                return Holders.plain(sid, f"{name}: in every network logon")
            if presence == Presence.NEVER:
                return Holders.nobody(f"{name}: never in a domain user's network logon")
            how = (
                "set this_organization on the source" if sid == THIS_ORGANIZATION_SID
                else "depends on how the user authenticates"
            )
            return Holders.unknown(f"{name} ({sid}): {how}")
        for prefix, what, presence in _PREFIXES:
            if sid.startswith(prefix):
                if presence == Presence.NEVER:
                    return Holders.nobody(f"{sid}: {what}, never a domain user's network logon")
                return Holders.unknown(f"{sid}: {what}")
        groups = self.local_groups
        if groups is not None and sid in groups.members and (self._is_local(sid) or self.is_domain_controller):
            return self._alias(sid, groups, seen)
        if self._is_local(sid):
            name = well_known_name(sid) or sid
            if groups is None or not groups.complete:
                return Holders.unknown(
                    f"{name} ({sid}): a local group of the file server whose members are not known "
                    f"({self.local_groups_problem or 'not read'})"
                )
            return Holders.nobody(f"{name} ({sid}): a local account of the file server, not a domain user")
        if sid.startswith("S-1-5-21-"):
            if self.account_domain is None and domain_of(sid) != self.primary_domain:
                return Holders.unknown(
                    f"{sid}: not of the users' domain, and the file server's own domain is not known "
                    f"({self.local_groups_problem or 'not read'}): it may be one of its local groups"
                )
            return Holders.plain(sid)
        return Holders.unknown(f"{sid}: a SID of a kind ancre does not model")

    def _alias(self, sid: str, groups: LocalGroups, seen: frozenset[str]) -> Holders:
        """Held iff P holds a member, transitively; a domain-local group of a DC's own domain is
        held through ``tokenGroups`` too (its domain members are left to it: always current)."""
        name = groups.names.get(sid) or well_known_name(sid) or sid
        route = f"local group {name} of the file server ({groups.origin or 'server'})"
        own_domain = self.is_domain_controller and domain_of(sid) == self.primary_domain
        out = Holders.plain(sid, route) if own_domain else Holders(route=route)
        seen = seen | {sid}
        try:
            members = groups.members[sid]  # read from the server when first needed
        except AclError as e:
            return out | Holders.unknown(f"{name} ({sid}): its members can't be read ({e})")
        for member in sorted(members):
            if member in seen:
                continue
            if own_domain and domain_of(member) == self.primary_domain and member not in groups.members:
                continue  # a domain account or global group: tokenGroups reports the alias itself
            known = WELL_KNOWN_SIDS.get(member)
            if known is not None and known[1] == Presence.ALWAYS and domain_of(sid) != BUILTIN_DOMAIN:
                # BUILTIN groups take Everyone / Authenticated Users / NETWORK members into every
                # token (Windows and Samba alike); other local groups do on Windows, not on a Samba
                # DC (checked by tests/integration/test_acl_differential.py)
                out = out | Holders.unknown(
                    f"{name} ({sid}) holds {known[0]}: whether the token expands it depends on the server"
                )
                continue
            sub = self._holders(member, seen) if member in groups.members else self.holders(member)
            out = out | sub
        return Holders(out.surely, out.maybe, out.undecided, route)


DIRECTORY_RULES = TokenRules()
"""P(user) is the token: every SID plainly matched (ACL manifests, tests)."""


__all__ = [
    "AUTHENTICATED_USERS_SID",
    "BUILTIN_DOMAIN",
    "BUILTIN_NAMES",
    "DIRECTORY_RULES",
    "EVERYONE_SID",
    "NETWORK_SID",
    "OWNER_RIGHTS_SID",
    "THIS_ORGANIZATION_SID",
    "UNIVERSAL",
    "WELL_KNOWN_SIDS",
    "Holders",
    "LocalGroups",
    "Presence",
    "TokenMode",
    "TokenRules",
    "domain_of",
    "well_known_name",
]
