"""Who is in which group: the ``Directory`` protocol, a JSON-file directory and a TTL cache.

P(user) (docs/ARCHITECTURE.md "Data model and the rights filter") is the user's own SID, every group SID reached through nested
membership, Everyone (``sid:S-1-1-0``), Authenticated Users (``sid:S-1-5-11``) and NETWORK
(``sid:S-1-5-2``, in every network logon's token). The SIDs a file server adds to a session's token
besides (its local groups, the authentication package) are that server's: the SMB source resolves
them on the ACE side (:mod:`ancre.acl.token`). An identity the
directory does not know gets the empty set (it reads nothing); a directory that cannot be read
raises :class:`~ancre.errors.DirectoryError` — never an empty set that a caller could mistake for
"no filter".
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ancre.errors import DirectoryError
from ancre.models import AUTHENTICATED_USERS, EVERYONE, NETWORK, fold_name, identity_defect, sid_principal

_SID_PATTERN = r"^S-1-\d+(-\d+)*$"

WELL_KNOWN: dict[str, str] = {"Everyone": "S-1-1-0", "Authenticated Users": "S-1-5-11", "NETWORK": "S-1-5-2"}
"""Well-known SIDs every directory knows (MS-DTYP 2.4.2.4); a file may add more (Administrators…)."""

_WELL_KNOWN_DOMAINS = ("builtin", "nt authority")
"""Name prefixes Windows shows for well-known SIDs (``BUILTIN\\Administrators``)."""



@runtime_checkable
class Directory(Protocol):
    """Users and groups, as the query core and the ACL manifests need them.

    Names are matched exactly after :func:`fold_name` (NFC, ASCII-only lowercasing), with or
    without a ``DOMAIN\\`` prefix; a user name containing ``@`` is a UPN and matches only UPNs.
    SIDs returned by :meth:`sid_of` are bare (``"S-1-5-21-…"``); principals are prefixed
    (``"sid:S-1-5-21-…"``).
    """

    def principals(self, user: str) -> frozenset[str]:
        """P(user): own SID, all groups transitively, Everyone, Authenticated Users, NETWORK, as
        ``sid:S-…`` strings. Unknown user → ``frozenset()``. Raises ``DirectoryError`` when the
        directory cannot be read or reached."""
        ...

    def sid_of(self, name: str) -> str | None:
        """Bare SID of a user, group or well-known name (``"Authenticated Users"``, ``"Everyone"``,
        ``"Administrators"``, ``"AXONIX\\GG_RH"``), ``None`` if unknown. Raises ``DirectoryError``."""
        ...

    def name_of(self, sid: str) -> str | None:
        """Display name of a SID (bare or ``sid:``-prefixed): ``"AXONIX\\GG_RH"``, ``"Everyone"``;
        ``None`` if unknown. Raises ``DirectoryError``."""
        ...

    def users(self) -> list[str]:
        """Every user's account name (sAMAccountName), sorted. Raises ``DirectoryError``."""
        ...


@runtime_checkable
class AccountResolver(Protocol):
    """Optional capability of a directory: which account a user name designates."""

    def account_of(self, user: str) -> str | None:
        """The sAMAccountName of the account ``user`` (sAMAccountName, ``DOMAIN\\sam`` or UPN,
        matched as :meth:`Directory.principals` matches it) designates; ``None`` if unknown.
        Raises ``DirectoryError``."""
        ...


@dataclass(frozen=True)
class AccountName:
    """One name a user can be designated by: the ``account`` (sAMAccountName), the ``attribute``
    it is read from (``sAMAccountName``, ``userPrincipalName``, ``mail``) and its ``value`` exactly
    as the directory holds it."""

    account: str
    attribute: str
    value: str


@runtime_checkable
class AccountNames(Protocol):
    """Optional capability of a directory: every name each user can be designated by, as stored
    (``ancre check`` reports those no identity could ever match, issue 40)."""

    def account_names(self) -> list[AccountName]:
        """Every user's names (:class:`AccountName`), as the directory holds them. Raises
        ``DirectoryError``."""
        ...


def resolve_account(directory: Directory, user: str) -> str | None:
    """The directory account ``user`` designates (:meth:`AccountResolver.account_of`), or
    ``user`` itself when the directory can't tell. Raises ``DirectoryError``."""
    if isinstance(directory, AccountResolver):
        return directory.account_of(user)
    return user


@runtime_checkable
class DomainSidProvider(Protocol):
    """Optional capability of a directory: the SID of the users' domain."""

    def domain_sid(self) -> str | None:
        """The domain SID (``S-1-5-21-a-b-c``) of the directory's accounts, ``None`` if unknown.
        Raises ``DirectoryError``."""
        ...


def directory_domain_sid(directory: Directory | None) -> str | None:
    """:meth:`DomainSidProvider.domain_sid` of ``directory`` (looking through a
    :class:`CachedDirectory`), ``None`` when it can't tell. Raises ``DirectoryError``."""
    inner = directory.inner if isinstance(directory, CachedDirectory) else directory
    return inner.domain_sid() if isinstance(inner, DomainSidProvider) else None


@runtime_checkable
class MembershipTracer(Protocol):
    """Optional capability of a directory: how a user comes to hold a principal (for explanations)."""

    def membership_path(self, user: str, sid: str) -> tuple[str, ...] | None:
        """Group names from one of the user's direct groups to the group ``sid`` (bare or prefixed),
        e.g. ``("GG_Techniciens", "GG_Personnel")``; ``()`` for the user's own SID; ``(name,)`` for
        Everyone / Authenticated Users; ``None`` if the user does not hold it or is unknown."""
        ...


# --- the directory.json format --------------------------------------------------------------------
class _Model(BaseModel):
    # parsed with model_validate_json: strict JSON types (no "1234" → int or 12 → "12" coercion);
    # an unknown key is refused, named (a user's "member_of" for "groups" would read nothing)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _GroupEntry(_Model):
    sid: str = Field(pattern=_SID_PATTERN)
    member_of: tuple[str, ...] = ()


class _UserEntry(_Model):
    sid: str = Field(pattern=_SID_PATTERN)
    upn: str | None = None
    groups: tuple[str, ...] = ()


class _DirectoryFile(_Model):
    note: str | None = None
    """Free text for whoever maintains the file; not read."""
    domain_sid: str | None = Field(None, pattern=_SID_PATTERN)
    netbios: str = Field(min_length=1)
    groups: dict[str, _GroupEntry] = {}
    users: dict[str, _UserEntry] = {}
    well_known: dict[str, Annotated[str, Field(pattern=_SID_PATTERN)]] = {}


def _bare(sid: str) -> str:
    return sid.removeprefix("sid:")


def _validated(text: bytes, where: str) -> _DirectoryFile:
    """The file's JSON ``text`` checked against its schema; raises ``DirectoryError`` naming the
    first offending key (``where``: the file, for the message)."""
    try:
        return _DirectoryFile.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "(root)"
        raise DirectoryError(f"{where}: {loc}: {first['msg']} ({e.error_count()} error(s))") from None


def _claim_accounts(
    f: _DirectoryFile, where: str, well_known: dict[str, str], short: dict[str, str], display: dict[str, str]
) -> dict[str, str]:
    """``{folded name: SID}`` of the file's groups then users, each name and SID claimed once
    (``short`` and ``display`` get each account's names). Raises ``DirectoryError`` for a name or
    SID already used (by another account or a well-known principal)."""
    domain_names: dict[str, str] = {}
    seen_sids: dict[str, str] = {}

    def claim(kind: str, name: str, sid: str) -> None:
        key = fold_name(name)
        if key in domain_names or key in well_known:
            raise DirectoryError(f"{where}: {kind}.{name}: name already used by another account")
        if sid in seen_sids or sid in short:
            raise DirectoryError(f"{where}: {kind}.{name}: SID {sid} already used by {seen_sids.get(sid) or short[sid]}")
        domain_names[key] = sid
        seen_sids[sid] = name
        short[sid] = name
        display[sid] = f"{f.netbios}\\{name}"

    for name, g in f.groups.items():
        claim("groups", name, g.sid)
    for name, u in f.users.items():
        claim("users", name, u.sid)
    return domain_names


def _group_ref(
    where: str, group_sid: dict[str, str], well_known: dict[str, str], kind: str, owner: str, name: str
) -> str:
    """The SID of the group ``name`` (``NETBIOS\\`` prefix tolerated) that ``kind.owner`` lists:
    one of the file's groups, else a well-known principal; raises ``DirectoryError`` otherwise."""
    key = fold_name(name.rpartition("\\")[2])
    if key in group_sid:
        return group_sid[key]
    if key in well_known:
        return well_known[key]
    raise DirectoryError(f"{where}: {kind}.{owner}: unknown group {name!r}")


def _user_keys(f: _DirectoryFile, where: str, domain_names: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``({folded sam and NETBIOS\\sam: sam}, {folded UPN: sam})`` of the file's users; each UPN
    is also added to ``domain_names``. Raises ``DirectoryError`` for an account name with ``@``
    or a name or UPN used twice."""
    user_key: dict[str, str] = {}
    upn_key: dict[str, str] = {}
    for name, u in f.users.items():
        if "@" in name:
            raise DirectoryError(
                f"{where}: users.{name}: an account name cannot contain '@' (that is a UPN: put it in 'upn')"
            )
        keys = [(user_key, name), (user_key, f"{f.netbios}\\{name}")] + ([(upn_key, u.upn)] if u.upn else [])
        for table, k in keys:
            if fold_name(k) in table:
                raise DirectoryError(f"{where}: users.{name}: {k!r} is already another user's name or UPN")
            table[fold_name(k)] = name
        if u.upn:
            if fold_name(u.upn) in domain_names:
                raise DirectoryError(f"{where}: users.{name}: UPN {u.upn!r} clashes with an account name")
            domain_names[fold_name(u.upn)] = u.sid
    return user_key, upn_key


@dataclass(frozen=True)
class _Snapshot:
    """One parsed version of the file; replaced as a whole on reload."""

    netbios: str
    domain_sid: str | None
    user_key: dict[str, str]
    """folded sAMAccountName / NETBIOS\\sam → sAMAccountName (:func:`fold_name`)."""
    upn_key: dict[str, str]
    """folded UPN → sAMAccountName."""
    user_sid: dict[str, str]
    """sAMAccountName → SID."""
    user_upn: dict[str, str]
    """sAMAccountName → UPN as written in the file (users with one)."""
    user_groups: dict[str, tuple[str, ...]]
    """sAMAccountName → SIDs of its direct groups."""
    parents: dict[str, tuple[str, ...]]
    """group SID → SIDs of the groups it is a member of."""
    domain_names: dict[str, str]
    """folded user/group name (and UPN) → SID."""
    well_known: dict[str, str]
    """folded well-known name → SID."""
    short_name: dict[str, str]
    """SID → short name (``GG_RH``, ``alice``, ``Everyone``)."""
    display: dict[str, str]
    """SID → display name (``AXONIX\\GG_RH``, ``Everyone``)."""

    @classmethod
    def parse(cls, text: bytes, where: str) -> _Snapshot:
        """Parse and check the file's text; raises ``DirectoryError`` naming the offending key."""
        f = _validated(text, where)
        well_known: dict[str, str] = {fold_name(k): v for k, v in WELL_KNOWN.items()}
        short: dict[str, str] = {v: k for k, v in WELL_KNOWN.items()}
        for name, sid in f.well_known.items():
            well_known[fold_name(name)] = sid
            short.setdefault(sid, name)
        display = dict(short)
        domain_names = _claim_accounts(f, where, well_known, short, display)
        group_sid = {fold_name(n): g.sid for n, g in f.groups.items()}

        def ref(kind: str, owner: str, name: str) -> str:
            return _group_ref(where, group_sid, well_known, kind, owner, name)

        parents = {g.sid: tuple(ref("groups", n, m) for m in g.member_of) for n, g in f.groups.items()}
        user_key, upn_key = _user_keys(f, where, domain_names)
        return cls(
            netbios=f.netbios,
            domain_sid=f.domain_sid,
            user_key=user_key,
            upn_key=upn_key,
            user_sid={n: u.sid for n, u in f.users.items()},
            user_upn={n: u.upn for n, u in f.users.items() if u.upn},
            user_groups={n: tuple(ref("users", n, g) for g in u.groups) for n, u in f.users.items()},
            parents=parents,
            domain_names=domain_names,
            well_known=well_known,
            short_name=short,
            display=display,
        )

    def user(self, name: str) -> str | None:
        """The sAMAccountName ``name`` designates: a name with ``@`` is a UPN and matches UPNs
        only; any other matches account names (``sam``, ``NETBIOS\\sam``). Exact after
        :func:`fold_name`; a name carrying whitespace at either end or an invisible character
        (:func:`~ancre.models.identity_defect`) designates no account."""
        if identity_defect(name, inner_space=True) is not None:
            return None  # taken as it is, or no account: never stripped into another one
        key = fold_name(name)
        return (self.upn_key if "@" in key else self.user_key).get(key)

    def group_walk(self, user: str) -> dict[str, str | None]:
        """Every group SID the user holds → the SID it was reached from (``None`` = direct group).
        Breadth-first, so the recorded route is a shortest one; cycles are cut by the visited set."""
        came_from: dict[str, str | None] = {}
        queue: deque[str] = deque()
        for g in self.user_groups[user]:
            if g not in came_from:
                came_from[g] = None
                queue.append(g)
        while queue:
            g = queue.popleft()
            for p in self.parents.get(g, ()):
                if p not in came_from:
                    came_from[p] = g
                    queue.append(p)
        return came_from


class FileDirectory:
    """A directory read from a JSON file in the corpus ``directory.json`` format::

        {"domain_sid": "S-1-5-21-…", "netbios": "AXONIX",
         "groups": {"GG_RH": {"sid": "S-…-1105", "member_of": ["GG_Personnel"]}, …},
         "users": {"alice": {"sid": "S-…-1201", "upn": "alice.martin@axonix.ch", "groups": ["GG_Direction"]}, …},
         "well_known": {"Everyone": "S-1-1-0", "Authenticated Users": "S-1-5-11", "Administrators": "S-1-5-32-544"}}

    Users are found by sAMAccountName, UPN or ``NETBIOS\\sam``, exactly after :func:`fold_name`
    (a name with ``@`` by UPN only). Nested groups
    are resolved transitively (cycles are harmless). The file is re-read when its mtime, size or
    inode changes, so an admin's edit takes effect at the next query. Every method raises
    :class:`~ancre.errors.DirectoryError` when the file is missing, unreadable or malformed (the
    message names the file and the offending key); a bad edit is never silently ignored.
    Thread-safe.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._snap: _Snapshot | None = None

    def _current(self) -> _Snapshot:
        try:
            st = os.stat(self.path)
        except OSError as e:
            raise DirectoryError(f"directory file {self.path}: cannot read: {e.strerror or e}") from None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        with self._lock:
            if self._snap is None or stamp != self._stamp:
                # a failed read or parse leaves no snapshot: every query fails until the file is fixed
                self._snap = None
                try:
                    text = self.path.read_bytes()
                except OSError as e:
                    raise DirectoryError(f"directory file {self.path}: cannot read: {e.strerror or e}") from None
                self._snap = _Snapshot.parse(text, f"directory file {self.path}")
                self._stamp = stamp
            return self._snap

    def principals(self, user: str) -> frozenset[str]:
        """See :meth:`Directory.principals`."""
        snap = self._current()
        name = snap.user(user)
        if name is None:
            return frozenset()
        sids = {snap.user_sid[name], *snap.group_walk(name)}
        return frozenset(sid_principal(s) for s in sids) | {EVERYONE, AUTHENTICATED_USERS, NETWORK}

    def sid_of(self, name: str) -> str | None:
        """See :meth:`Directory.sid_of`. Accepts ``NETBIOS\\x``, ``BUILTIN\\x``, ``NT AUTHORITY\\x``."""
        snap = self._current()
        name = name.strip()
        domain, _, short = name.rpartition("\\")
        key = fold_name(short)
        if not domain:
            return snap.domain_names.get(key) or snap.well_known.get(key)
        if fold_name(domain) == fold_name(snap.netbios):
            return snap.domain_names.get(key) or snap.well_known.get(key)
        if fold_name(domain) in _WELL_KNOWN_DOMAINS:
            return snap.well_known.get(key)
        return None

    def name_of(self, sid: str) -> str | None:
        """See :meth:`Directory.name_of`."""
        return self._current().display.get(_bare(sid))

    def account_of(self, user: str) -> str | None:
        """See :meth:`AccountResolver.account_of`."""
        return self._current().user(user)

    def domain_sid(self) -> str | None:
        """See :meth:`DomainSidProvider.domain_sid`: the file's ``domain_sid``."""
        return self._current().domain_sid

    def users(self) -> list[str]:
        """See :meth:`Directory.users`."""
        return sorted(self._current().user_sid)

    def account_names(self) -> list[AccountName]:
        """See :meth:`AccountNames.account_names`: each user's key in the file and its ``upn``."""
        snap = self._current()
        out = [AccountName(sam, "sAMAccountName", sam) for sam in sorted(snap.user_sid)]
        return out + [AccountName(sam, "userPrincipalName", upn) for sam, upn in sorted(snap.user_upn.items())]

    def membership_path(self, user: str, sid: str) -> tuple[str, ...] | None:
        """See :meth:`MembershipTracer.membership_path`."""
        snap = self._current()
        name = snap.user(user)
        if name is None:
            return None
        sid = _bare(sid)
        if sid == snap.user_sid[name]:
            return ()
        if sid_principal(sid) in (EVERYONE, AUTHENTICATED_USERS, NETWORK):
            return (snap.short_name.get(sid, sid),)
        came_from = snap.group_walk(name)
        if sid not in came_from:
            return None
        route: list[str] = []
        cur: str | None = sid
        while cur is not None:
            route.append(snap.short_name.get(cur, cur))
            cur = came_from[cur]
        return tuple(reversed(route))


class CachedDirectory:
    """A :class:`Directory` that remembers each user's principals for ``ttl_s`` seconds.

    Both answers are cached: a known user's set and an unknown user's empty set (so a changed
    membership or a newly created user shows after at most ``ttl_s``). A ``DirectoryError`` from the
    inner directory is not cached and propagates. ``sid_of``/``name_of``/``users`` go straight to
    the inner directory. ``clock`` returns seconds (monotonic); tests inject a fake one.
    """

    def __init__(self, inner: Directory, ttl_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if ttl_s < 0:
            raise ValueError(f"ttl_s must be >= 0, got {ttl_s}")
        self.inner = inner
        self.ttl_s = ttl_s
        self._clock = clock
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}
        self._accounts: dict[str, tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    def principals(self, user: str) -> frozenset[str]:
        """See :meth:`Directory.principals`; served from the cache while younger than ``ttl_s``."""
        now = self._clock()
        with self._lock:
            hit = self._cache.get(user)
        if hit is not None and now - hit[0] < self.ttl_s:
            return hit[1]
        result = self.inner.principals(user)
        with self._lock:
            self._cache[user] = (now, result)
        return result

    def account_of(self, user: str) -> str | None:
        """The inner directory's :meth:`AccountResolver.account_of` (``user`` itself if it has
        none), cached like the principals."""
        now = self._clock()
        with self._lock:
            hit = self._accounts.get(user)
        if hit is not None and now - hit[0] < self.ttl_s:
            return hit[1]
        result = resolve_account(self.inner, user)
        with self._lock:
            self._accounts[user] = (now, result)
        return result

    def invalidate(self, user: str | None = None) -> None:
        """Forget one user's cached principals and account, or everyone's when ``user`` is ``None``."""
        with self._lock:
            if user is None:
                self._cache.clear()
                self._accounts.clear()
            else:
                self._cache.pop(user, None)
                self._accounts.pop(user, None)

    def sid_of(self, name: str) -> str | None:
        """See :meth:`Directory.sid_of` (not cached)."""
        return self.inner.sid_of(name)

    def name_of(self, sid: str) -> str | None:
        """See :meth:`Directory.name_of` (not cached)."""
        return self.inner.name_of(sid)

    def users(self) -> list[str]:
        """See :meth:`Directory.users` (not cached)."""
        return self.inner.users()

    def account_names(self) -> list[AccountName]:
        """The inner directory's :meth:`AccountNames.account_names` (not cached), ``[]`` if it has none."""
        return self.inner.account_names() if isinstance(self.inner, AccountNames) else []

    def membership_path(self, user: str, sid: str) -> tuple[str, ...] | None:
        """The inner directory's :meth:`MembershipTracer.membership_path`, ``None`` if it has none."""
        if isinstance(self.inner, MembershipTracer):
            return self.inner.membership_path(user, sid)
        return None
