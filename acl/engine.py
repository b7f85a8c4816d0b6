"""The one ACL engine of ancre: who may *read* an object, as the file server's access check decides.

Terms and numbers follow [MS-DTYP] (Windows Data Types): access masks (2.4.3, and the file rights of
winnt.h), ACE header types and flags (2.4.4.1), security descriptor control bits (2.4.6), the access
check algorithm (2.5.3.2), generic mapping (2.5.3.3 with the file system's FILE_GENERIC_* mapping)
and the inheritance algorithm (2.5.3.4). A connector feeds :func:`compile_read` (or
:func:`read_acl`) a :class:`SecurityDescriptor` (parsed from SMB, or computed from an ACL manifest
with :func:`inherit`) and the :class:`~ancre.acl.token.TokenRules` of its server; the result is an
:class:`~ancre.models.Acl` of ``sid:S-…`` principals that goes into the Qdrant payload.

**What "read" is.** The desired access is :data:`READ_ACCESS` = FILE_GENERIC_READ, what Explorer and
Word ask for. The server grants it iff *every* one of its five bits is granted.

**The ordered walk** (MS-DTYP 2.5.3.2). The server removes from the still-wanted bits the mask of
each ALLOW ACE whose SID is in the token and refuses as soon as a DENY ACE in the token covers a bit
still wanted. So, bit by bit: a bit is granted iff the first ACE of the DACL that applies to the
token and covers the bit is an ALLOW. Inherit-only ACEs are skipped; the owner gets READ_CONTROL
(and WRITE_DAC) before the walk unless the DACL holds an OWNER RIGHTS ACE; an OWNER RIGHTS ACE
applies to the owner (:data:`~ancre.acl.token.OWNER_RIGHTS_SID`). A NULL DACL grants everything,
an empty DACL nothing (but the owner's READ_CONTROL).

**Compiled into grants.** For one bit, ALLOW ACE *i* grants a user with principals P iff the user
holds its SID (``P ∩ holders(sid_i) ≠ ∅``) and none of the DENY ACEs before it that cover the bit
(``P ∩ deny_before_i = ∅``): the bit is a disjunction of such clauses. Read is the conjunction over
the five bits, expanded into a disjunction of :class:`Clause` (a hit needed in each of several sets,
none in one deny set) and simplified (identical bits merged, implied needs dropped, absorbed clauses
removed). Exact, for every P(user) that holds Everyone, Authenticated Users and NETWORK (every
directory-resolved user does).

**Sound where the two servers (or a server and ancre) may differ**, always towards "not readable":

- generic bits of an ALLOW ACE grant nothing (Windows' access check does not map them; NTFS and
  Samba store effective ACEs already mapped), those of a DENY ACE deny what they map to;
- FILE_READ_ATTRIBUTES comes from the file's walk or, as [MS-FSA] 2.1.5.1.2.1 grants it, from
  FILE_LIST_DIRECTORY on the parent folder (``parent``); Samba grants it unconditionally;
- any OWNER RIGHTS ACE, even inherit-only, cancels the owner's implicit READ_CONTROL;
- a SID the token may or may not hold (:class:`~ancre.acl.token.Holders` ``undecided``): its
  ALLOW grants nobody, its DENY reaches everyone from its position on, and the result carries the
  reason (``ancre status``, ``acl explain``);
- deny-object, conditional (callback) and non-access ACEs make the object readable by nobody;
  allow-object and compound ACEs are ignored.

Not modelled (each makes the engine stricter, never looser): CREATOR OWNER / CREATOR GROUP when
:func:`inherit` computes a manifest's descriptors (a CREATOR OWNER ACE matches nobody); SACL ACEs
(mandatory label, central access policy) are not read; privileges (backup/restore) are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum

from ancre.acl.token import DIRECTORY_RULES, OWNER_RIGHTS_SID, UNIVERSAL, Holders, TokenRules, well_known_name
from ancre.errors import AclError
from ancre.models import EVERYONE, Acl, Grant, sid_principal

# --- access mask bits (MS-DTYP 2.4.3; file-specific rights from winnt.h) ------------------------
FILE_READ_DATA = 0x00000001
"""Read a file's data; on a folder the same bit is FILE_LIST_DIRECTORY."""
FILE_LIST_DIRECTORY = FILE_READ_DATA
FILE_WRITE_DATA = 0x00000002
FILE_ADD_FILE = FILE_WRITE_DATA
FILE_APPEND_DATA = 0x00000004
FILE_ADD_SUBDIRECTORY = FILE_APPEND_DATA
FILE_READ_EA = 0x00000008
FILE_WRITE_EA = 0x00000010
FILE_EXECUTE = 0x00000020
FILE_TRAVERSE = FILE_EXECUTE
FILE_DELETE_CHILD = 0x00000040
FILE_READ_ATTRIBUTES = 0x00000080
FILE_WRITE_ATTRIBUTES = 0x00000100
DELETE = 0x00010000
READ_CONTROL = 0x00020000
WRITE_DAC = 0x00040000
WRITE_OWNER = 0x00080000
SYNCHRONIZE = 0x00100000
STANDARD_RIGHTS_REQUIRED = 0x000F0000
ACCESS_SYSTEM_SECURITY = 0x01000000
MAXIMUM_ALLOWED = 0x02000000
GENERIC_ALL = 0x10000000
GENERIC_EXECUTE = 0x20000000
GENERIC_WRITE = 0x40000000
GENERIC_READ = 0x80000000

FILE_ALL_ACCESS = STANDARD_RIGHTS_REQUIRED | SYNCHRONIZE | 0x1FF  # 0x1F01FF
FILE_GENERIC_READ = READ_CONTROL | FILE_READ_DATA | FILE_READ_ATTRIBUTES | FILE_READ_EA | SYNCHRONIZE  # 0x120089
FILE_GENERIC_WRITE = (
    READ_CONTROL | FILE_WRITE_DATA | FILE_WRITE_ATTRIBUTES | FILE_WRITE_EA | FILE_APPEND_DATA | SYNCHRONIZE
)  # 0x120116
FILE_GENERIC_EXECUTE = READ_CONTROL | FILE_READ_ATTRIBUTES | FILE_EXECUTE | SYNCHRONIZE  # 0x1200A0

# The simple permissions of the Windows security dialog / icacls, as used by ACL manifests.
FULL = FILE_ALL_ACCESS
"""Full control, 0x1F01FF."""
MODIFY = 0x001301BF
"""Modify (read, write, execute, delete), 0x1301BF."""
READ = 0x001200A9
"""Read & execute, 0x1200A9 (FILE_GENERIC_READ | FILE_GENERIC_EXECUTE)."""
WRITE = 0x00000116
"""Write (data, append, EA, attributes) without read, 0x116."""

NAMED_MASKS: dict[str, int] = {"FULL": FULL, "MODIFY": MODIFY, "READ": READ, "WRITE": WRITE}
"""Manifest right names → access masks."""

READ_ACCESS = FILE_GENERIC_READ
"""The desired access ancre decides "may read" with: FILE_GENERIC_READ (0x120089 = READ_CONTROL |
SYNCHRONIZE | FILE_READ_DATA | FILE_READ_ATTRIBUTES | FILE_READ_EA), what Explorer, Word and every
program opening a file with GENERIC_READ ask the server for. A user granted FILE_READ_DATA alone
could read the bytes with a hand-made request, but not open the document the way staff do: that
user does not read it (docs/WINDOWS-AD.md, "Which right is read")."""

READ_BITS = (FILE_READ_DATA, READ_CONTROL, SYNCHRONIZE, FILE_READ_EA, FILE_READ_ATTRIBUTES)
"""The bits of :data:`READ_ACCESS`, in the order explanations report them."""

BIT_NAMES: dict[int, str] = {
    FILE_READ_DATA: "FILE_READ_DATA",
    READ_CONTROL: "READ_CONTROL",
    SYNCHRONIZE: "SYNCHRONIZE",
    FILE_READ_EA: "FILE_READ_EA",
    FILE_READ_ATTRIBUTES: "FILE_READ_ATTRIBUTES",
}

# --- ACE flags (MS-DTYP 2.4.4.1 ACE_HEADER.AceFlags) --------------------------------------------
OBJECT_INHERIT_ACE = 0x01
CONTAINER_INHERIT_ACE = 0x02
NO_PROPAGATE_INHERIT_ACE = 0x04
INHERIT_ONLY_ACE = 0x08
INHERITED_ACE = 0x10
SUCCESSFUL_ACCESS_ACE_FLAG = 0x40
FAILED_ACCESS_ACE_FLAG = 0x80

_INHERITANCE_FLAGS = OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE | NO_PROPAGATE_INHERIT_ACE | INHERIT_ONLY_ACE


class AceType(IntEnum):
    """ACE_HEADER.AceType (MS-DTYP 2.4.4.1)."""

    ACCESS_ALLOWED = 0x00
    ACCESS_DENIED = 0x01
    SYSTEM_AUDIT = 0x02
    SYSTEM_ALARM = 0x03
    ACCESS_ALLOWED_COMPOUND = 0x04
    ACCESS_ALLOWED_OBJECT = 0x05
    ACCESS_DENIED_OBJECT = 0x06
    SYSTEM_AUDIT_OBJECT = 0x07
    SYSTEM_ALARM_OBJECT = 0x08
    ACCESS_ALLOWED_CALLBACK = 0x09
    ACCESS_DENIED_CALLBACK = 0x0A
    ACCESS_ALLOWED_CALLBACK_OBJECT = 0x0B
    ACCESS_DENIED_CALLBACK_OBJECT = 0x0C
    SYSTEM_AUDIT_CALLBACK = 0x0D
    SYSTEM_ALARM_CALLBACK = 0x0E
    SYSTEM_AUDIT_CALLBACK_OBJECT = 0x0F
    SYSTEM_ALARM_CALLBACK_OBJECT = 0x10
    SYSTEM_MANDATORY_LABEL = 0x11
    SYSTEM_RESOURCE_ATTRIBUTE = 0x12
    SYSTEM_SCOPED_POLICY_ID = 0x13


_IGNORABLE_ALLOW_TYPES = frozenset({AceType.ACCESS_ALLOWED_COMPOUND, AceType.ACCESS_ALLOWED_OBJECT})
"""Allow-type ACEs the engine does not evaluate: ignoring them can only narrow access."""
_DENY_TYPES = frozenset(
    {
        AceType.ACCESS_DENIED,
        AceType.ACCESS_DENIED_OBJECT,
        AceType.ACCESS_DENIED_CALLBACK,
        AceType.ACCESS_DENIED_CALLBACK_OBJECT,
    }
)
_CALLBACK_TYPES = frozenset(t for t in AceType if 0x09 <= t <= 0x10)
"""Callback ACEs; with an application-data condition they are the conditional ACEs of MS-DTYP 2.4.4.17."""

_SID_RE = re.compile(r"^S-1-\d+(-\d+)*$")


def _type_name(t: int) -> str:
    try:
        return f"{AceType(t).name} (0x{t:02X})"
    except ValueError:
        return f"unknown type 0x{t:02X}"


@dataclass(frozen=True)
class Ace:
    """One access control entry.

    ``type`` is an :class:`AceType` (a raw ``int`` is kept for codes the enum does not know);
    ``sid`` a bare SID string ``"S-1-…"`` (normalised to a capital ``S``); ``mask`` the 32-bit access
    mask; ``flags`` the ACE_HEADER flags (``OBJECT_INHERIT_ACE`` …). Raises
    :class:`~ancre.errors.AclError` on a malformed SID, mask or flags.
    """

    type: AceType | int
    sid: str
    mask: int
    flags: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.sid, str) or not isinstance(self.mask, int) or not isinstance(self.flags, int):
            raise AclError(f"malformed ACE: sid={self.sid!r} mask={self.mask!r} flags={self.flags!r}")
        if not isinstance(self.type, int):
            raise AclError(f"malformed ACE type: {self.type!r}")
        sid = self.sid.strip()
        if sid[:2] == "s-":
            sid = "S-" + sid[2:]
        if not _SID_RE.match(sid):
            raise AclError(f"not a SID string: {self.sid!r} (expected 'S-1-…')")
        if not 0 <= self.mask <= 0xFFFFFFFF or not 0 <= self.flags <= 0xFF or not 0 <= int(self.type) <= 0xFF:
            raise AclError(f"ACE out of range: type={self.type!r} mask={self.mask!r} flags={self.flags!r}")
        object.__setattr__(self, "sid", sid)
        try:
            object.__setattr__(self, "type", AceType(self.type))
        except ValueError:
            object.__setattr__(self, "type", int(self.type))

    @property
    def inherited(self) -> bool:
        """Whether the ACE carries INHERITED_ACE (it came from a parent)."""
        return bool(self.flags & INHERITED_ACE)

    @property
    def is_deny(self) -> bool:
        """Whether the ACE type is a deny type (plain, object or callback)."""
        return self.type in _DENY_TYPES

    @property
    def principal(self) -> str:
        """The SID as a principal string, ``"sid:S-…"``."""
        return sid_principal(self.sid)


@dataclass(frozen=True)
class SecurityDescriptor:
    """The parts of a SECURITY_DESCRIPTOR (MS-DTYP 2.4.6) that decide reading.

    ``owner``/``group``: bare SIDs or ``None``; ``dacl``: the ACEs in order, ``()`` for an *empty*
    DACL (nobody), ``None`` for a *NULL* DACL (no protection: everyone); ``protected``: the
    SE_DACL_PROTECTED control bit (the DACL takes no ACE from the parent). The default is an empty
    DACL: fail closed.
    """

    owner: str | None = None
    group: str | None = None
    dacl: tuple[Ace, ...] | None = ()
    protected: bool = False

    def __post_init__(self) -> None:
        if self.dacl is not None and not isinstance(self.dacl, tuple):
            object.__setattr__(self, "dacl", tuple(self.dacl))




@dataclass(frozen=True)
class GenericMapping:
    """A GENERIC_MAPPING ([MS-DTYP] 2.5.3.3): the specific rights each generic bit stands for."""

    read: int
    write: int
    execute: int
    all: int


FILE_GENERIC_MAPPING = GenericMapping(FILE_GENERIC_READ, FILE_GENERIC_WRITE, FILE_GENERIC_EXECUTE, FILE_ALL_ACCESS)
"""The file system's mapping (winnt.h FILE_GENERIC_*; used by NTFS and Samba for files and shares)."""


def map_generic(mask: int, mapping: GenericMapping = FILE_GENERIC_MAPPING) -> int:
    """``mask`` with its generic bits replaced by the specific rights they map to ([MS-DTYP]
    2.5.3.3): ``GENERIC_READ`` → ``0x120089``; specific bits are kept."""
    out = mask & ~(GENERIC_READ | GENERIC_WRITE | GENERIC_EXECUTE | GENERIC_ALL)
    if mask & GENERIC_READ:
        out |= mapping.read
    if mask & GENERIC_WRITE:
        out |= mapping.write
    if mask & GENERIC_EXECUTE:
        out |= mapping.execute
    if mask & GENERIC_ALL:
        out |= mapping.all
    return out


def _allow_bits(mask: int) -> int:
    """Bits an ALLOW ACE grants: its specific bits only (generic ones are not mapped at check time)."""
    return mask & ~(GENERIC_READ | GENERIC_WRITE | GENERIC_EXECUTE | GENERIC_ALL)


def _deny_bits(mask: int) -> int:
    """Bits a DENY ACE denies: its specific bits and what its generic bits map to."""
    return map_generic(mask)


def grants_read(mask: int) -> bool:
    """Whether an ALLOW ACE with this mask, alone in a DACL, grants :data:`READ_ACCESS`: its
    specific bits cover FILE_GENERIC_READ (READ, MODIFY, FULL, 0x120089 do; GENERIC_READ alone does
    not — servers store it mapped)."""
    return _allow_bits(mask) & READ_ACCESS == READ_ACCESS


def denies_read(mask: int) -> bool:
    """Whether a DENY ACE with this mask can refuse :data:`READ_ACCESS`: its bits, generic ones
    mapped, touch one of FILE_GENERIC_READ's. A deny of write only leaves reading alone."""
    return bool(_deny_bits(mask) & READ_ACCESS)


# --- compiled rights ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Clause:
    """One way to be granted: a hit in *every* set of ``need`` (``P ∩ n ≠ ∅``) and none in
    ``deny`` (``P ∩ deny = ∅``). Sets hold prefixed principals (``sid:S-…``)."""

    need: frozenset[frozenset[str]]
    deny: frozenset[str] = frozenset()

    def admits(self, principals: frozenset[str]) -> bool:
        """Whether a user holding ``principals`` is granted by this clause."""
        return all(n & principals for n in self.need) and not (self.deny & principals)


def _normalised(c: Clause) -> Clause | None:
    """``c`` simplified without changing whom it admits among users holding :data:`UNIVERSAL`;
    ``None`` when it admits none of them."""
    if c.deny & UNIVERSAL:
        return None
    needs = {(n & UNIVERSAL) or (n - c.deny) for n in c.need}  # a universal principal meets a need alone
    if any(not n for n in needs):
        return None
    if len(needs) > 1:
        kept = {n for n in needs if not (n & UNIVERSAL)}
        needs = kept or {min(needs, key=lambda n: (len(n), sorted(n)))}
    minimal = {n for n in needs if not any(m < n for m in needs)}
    return Clause(frozenset(minimal), c.deny)


def _implies(a: Clause, b: Clause) -> bool:
    """Whether every user ``b`` admits is admitted by ``a`` (a sufficient test; a need holding a
    :data:`UNIVERSAL` principal is always met)."""
    return a.deny <= b.deny and all(any(nb <= na for nb in b.need) for na in a.need if not na & UNIVERSAL)


def _pruned(clauses: Iterable[Clause]) -> list[Clause]:
    """Normalised, deduplicated, absorbed and merged clauses in a stable order. Two clauses with
    the same deny set that differ in one need only are merged (``(N ∧ A) ∨ (N ∧ B) = N ∧ (A ∪ B)``),
    so the common DACL (allows for several groups, one deny set) stays one clause."""
    pending = {n for c in clauses if (n := _normalised(c)) is not None}
    merged = True
    while merged:
        merged = False
        ordered = sorted(pending, key=_clause_key)
        for i, a in enumerate(ordered):
            for b in ordered[i + 1 :]:
                if a.deny != b.deny or len(a.need) != len(b.need):
                    continue
                only_a, only_b = a.need - b.need, b.need - a.need
                if len(only_a) == 1 and len(only_b) == 1:
                    union = next(iter(only_a)) | next(iter(only_b))
                    joined = _normalised(Clause((a.need & b.need) | {union}, a.deny))
                    pending -= {a, b}
                    if joined is not None:
                        pending.add(joined)
                    merged = True
                    break
            if merged:
                break
    out: list[Clause] = []
    for c in sorted(pending, key=_clause_key):
        if any(_implies(o, c) for o in out):
            continue
        out = [o for o in out if not _implies(c, o)]
        out.append(c)
    return out


def _clause_key(c: Clause) -> tuple[int, int, list[list[str]], list[str]]:
    return (len(c.need), len(c.deny), sorted(sorted(n) for n in c.need), sorted(c.deny))


MAX_CLAUSES = 64
"""Ways to read kept per object; beyond, the rest are dropped (fewer readers: the safe side) and
the result's ``reason`` says so."""


def _conjoin(dnfs: Iterable[tuple[Clause, ...]]) -> tuple[list[Clause], bool]:
    """The disjunctive form of the conjunction of ``dnfs`` (each a disjunction of clauses), and
    whether clauses had to be dropped (over :data:`MAX_CLAUSES`)."""
    result = [Clause(frozenset())]
    dropped = False
    for dnf in dict.fromkeys(dnfs):  # identical bits merged: (A ∨ B) ∧ (A ∨ B) = A ∨ B
        product = (Clause(r.need | c.need, r.deny | c.deny) for r in result for c in dnf)
        result = _pruned(product)
        if len(result) > MAX_CLAUSES:
            result, dropped = result[:MAX_CLAUSES], True
        if not result:
            break
    return result, dropped


@dataclass(frozen=True)
class ReadRights:
    """Who may read one object: the disjunction of ``clauses`` (readable iff one admits).

    ``reason``: why nobody may read when the descriptor as a whole decided it (unreadable,
    unsupported ACE), or why part of the ACL was closed (an undecidable SID, see
    :class:`~ancre.acl.token.Holders`); ``None`` when it was read normally. ``notes``: the
    undecided SIDs met, one line each (explanations)."""

    clauses: tuple[Clause, ...] = ()
    reason: str | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def nobody(cls, reason: str | None) -> ReadRights:
        """Readable by nobody (``reason`` ``None``: deliberately, e.g. no ACE grants read)."""
        return cls((), reason)

    def readable_by(self, principals: frozenset[str]) -> bool:
        """Whether a user holding ``principals`` may read. An empty set reads nothing."""
        return bool(principals) and any(c.admits(principals) for c in self.clauses)

    def both(self, other: ReadRights) -> ReadRights:
        """Readable by whoever both ``self`` and ``other`` admit (share ∩ NTFS)."""
        clauses, dropped = _conjoin((self.clauses, other.clauses))
        reason = self.reason or other.reason
        if dropped and reason is None:
            reason = f"ACL too complex: only {MAX_CLAUSES} ways to read kept"
        return ReadRights(tuple(clauses), reason, self.notes + tuple(n for n in other.notes if n not in self.notes))

    def acl(self) -> Acl:
        """The :class:`~ancre.models.Acl` stored with the object's chunks (see :func:`to_acl`)."""
        return to_acl(self)


def to_acl(rights: ReadRights) -> Acl:
    """``rights`` as an :class:`~ancre.models.Acl`: one :class:`~ancre.models.Grant` per clause
    (its smallest need as ``allow``, the other needs as ``also``; :meth:`Acl.of` makes a single
    one-need clause a plain ``Acl(allow, deny)``); no clause: readable by nobody, with the reason."""
    grants = []
    for c in rights.clauses:
        needs = sorted(c.need, key=lambda n: (len(n), sorted(n)))
        grants.append(Grant(needs[0], c.deny, None, frozenset(needs[1:])))
    return Acl.of(grants, rights.reason)


# --- the walk (one preparation behind compile_read and explain_read) ------------------------------
EMPTY_DACL_RULE = "empty DACL: nobody"
"""Reason of the ACL of an empty DACL: a deliberate *nobody*, not a problem."""
SHARE_ADMITS_NONE_RULE = "share permissions: share_allow admits none of the NTFS readers"
"""Reason of an NTFS ∩ share result with no reader left: deliberate, not a problem."""
_DELIBERATE_NOBODY = frozenset({EMPTY_DACL_RULE, SHARE_ADMITS_NONE_RULE})


def acl_problem(acl: Acl) -> str | None:
    """Why nobody (or fewer users than the DACL says) may read ``acl``'s document when that is
    *not* what its ACL says: the ACL could not be read, parsed, resolved or understood
    (``acl.reason``: ``acl_unreadable: …``, ``unsupported … ACE …``, ``undecidable token SID: …``,
    a broken manifest entry, no rights configured). ``None`` for an ACL read normally and for a
    deliberate nobody (an empty DACL, share permissions admitting none of the readers). Such
    documents are problems: ``ancre status`` and the pass reports list them."""
    if acl.reason is None or acl.reason in _DELIBERATE_NOBODY:
        return None
    return acl.reason


@dataclass(frozen=True)
class _Step:
    """One effective ACE of the DACL (not inherit-only), with who holds its SID."""

    index: int
    ace: Ace
    holders: Holders
    allow: int
    """Bits it grants (0 for a deny)."""
    deny: int
    """Bits it denies (0 for an allow)."""


@dataclass(frozen=True)
class _Prepared:
    """A descriptor ready to walk: ``rule`` set when the descriptor as a whole decides (NULL or
    empty DACL, unreadable, unsupported ACE)."""

    steps: tuple[_Step, ...] = ()
    owner: Holders = field(default_factory=Holders)
    implicit_owner: bool = False
    rule: str | None = None
    null: bool = False


def _prepare(sd: SecurityDescriptor | None, rules: TokenRules, unreadable_reason: str | None = None) -> _Prepared:
    if sd is None:
        return _Prepared(rule=f"unreadable security descriptor: {unreadable_reason or 'not available'}")
    if sd.dacl is None:
        return _Prepared(rule="NULL DACL: everyone", null=True)
    if sd.owner is not None:
        base = rules.holders(sd.owner)
        route = f"the owner {sd.owner}" + (f" ({base.route})" if base.route else "")
        owner = Holders(base.surely, base.maybe, base.undecided, route)
    else:
        owner = Holders(route="no owner")
    owner_rights = any(a.sid == OWNER_RIGHTS_SID for a in sd.dacl)
    steps: list[_Step] = []
    for i, ace in enumerate(sd.dacl):
        if ace.flags & INHERIT_ONLY_ACE:
            continue  # only for children: not part of this object's effective ACL
        if ace.type in (AceType.ACCESS_ALLOWED, AceType.ACCESS_DENIED):
            if ace.sid == OWNER_RIGHTS_SID:
                holders = Holders(owner.surely, owner.maybe, owner.undecided, f"OWNER RIGHTS: {owner.route}")
            else:
                holders = rules.holders(ace.sid)
            if ace.type == AceType.ACCESS_ALLOWED:
                steps.append(_Step(i, ace, holders, _allow_bits(ace.mask), 0))
            else:
                steps.append(_Step(i, ace, holders, 0, _deny_bits(ace.mask)))
        elif ace.type in _IGNORABLE_ALLOW_TYPES:
            continue  # could only widen access: ignoring it fails closed
        else:
            if ace.type in _CALLBACK_TYPES:
                kind = "conditional/callback"
            elif ace.type in _DENY_TYPES:
                kind = "deny-type"
            else:
                kind = "non-access"
            return _Prepared(rule=f"unsupported {kind} ACE {_type_name(int(ace.type))} for {ace.sid}")
    if not sd.dacl:
        return _Prepared(owner=owner, implicit_owner=True, rule=EMPTY_DACL_RULE)
    return _Prepared(tuple(steps), owner, not owner_rights)


def _bit_dnf(prep: _Prepared, bit: int) -> tuple[tuple[Clause, ...], list[str]]:
    """The clauses granting ``bit`` (the walk, see the module note) and the notes on undecided
    SIDs that may have narrowed it."""
    if prep.null:
        return (Clause(frozenset({frozenset({EVERYONE})})),), []
    clauses: list[Clause] = []
    notes: list[str] = []
    if prep.implicit_owner and bit & (READ_CONTROL | WRITE_DAC) and prep.owner.surely:
        clauses.append(Clause(frozenset({prep.owner.surely})))
    denied: set[str] = set()
    closing: list[_Step] = []
    for st in prep.steps:
        if st.allow & bit:
            if st.holders.undecided:
                what = "grants only through its known members" if st.holders.surely else "grants nobody"
                notes.append(f"ALLOW ACE {st.index + 1} for {_who(st.ace.sid)} {what} ({st.holders.undecided[0]})")
            if st.holders.surely:
                if closing:
                    c = closing[0]
                    notes.append(
                        f"DENY ACE {c.index + 1} for {_who(c.ace.sid)} is applied to everyone ({c.holders.undecided[0]})"
                    )
                    break
                clauses.append(Clause(frozenset({st.holders.surely}), frozenset(denied)))
        elif st.deny & bit:
            denied |= st.holders.maybe
            if st.holders.undecided:
                closing.append(st)
            elif EVERYONE in denied:
                break
    return tuple(clauses), notes


def _who(sid: str) -> str:
    name = well_known_name(sid)
    return f"{name} ({sid})" if name else sid


def compile_read(
    sd: SecurityDescriptor | None,
    *,
    rules: TokenRules = DIRECTORY_RULES,
    parent: SecurityDescriptor | None = None,
    desired: int = READ_ACCESS,
    unreadable_reason: str | None = None,
    attributes_from_parent: bool = True,
) -> ReadRights:
    """Who may open the object with ``desired`` access (default :data:`READ_ACCESS`), as
    :class:`ReadRights` (see the module note for the walk and its compilation).

    ``rules``: how the file server's token holds each SID (default: the directory's principals
    are the token); ``parent``: the parent folder's descriptor, whose FILE_LIST_DIRECTORY grants
    FILE_READ_ATTRIBUTES ([MS-FSA] 2.1.5.1.2.1; ``None``: unknown, not counted; share permissions
    pass ``attributes_from_parent=False``). ``sd is None`` (could not be read): nobody, with
    ``"unreadable security descriptor: <unreadable_reason>"``; an ACE the engine can't evaluate:
    nobody, ``"unsupported … ACE …"``; an empty DACL: nobody, :data:`EMPTY_DACL_RULE`. Never raises.
    """
    prep = _prepare(sd, rules, unreadable_reason)
    if prep.rule is not None and not prep.null and prep.rule != EMPTY_DACL_RULE:
        return ReadRights.nobody(prep.rule)
    dnfs: list[tuple[Clause, ...]] = []
    notes: list[str] = []
    parent_prep = _prepare(parent, rules) if parent is not None and attributes_from_parent else None
    for bit in READ_BITS:
        if not desired & bit:
            continue
        clauses, bit_notes = _bit_dnf(prep, bit)
        if bit == FILE_READ_ATTRIBUTES and parent_prep is not None and (parent_prep.rule is None or parent_prep.null):
            clauses = clauses + _bit_dnf(parent_prep, FILE_LIST_DIRECTORY)[0]
        dnfs.append(tuple(_pruned(clauses)))
        notes += [n for n in bit_notes if n not in notes]
    result, dropped = _conjoin(dnfs)
    reason = None
    if prep.rule == EMPTY_DACL_RULE and not result:
        reason = EMPTY_DACL_RULE
    elif notes:
        reason = "undecidable token SID: " + "; ".join(notes)
    elif dropped:
        reason = f"ACL too complex: only {MAX_CLAUSES} ways to read kept"
    return ReadRights(tuple(result), reason, tuple(notes))


def read_acl(
    sd: SecurityDescriptor | None,
    *,
    is_container: bool = False,
    unreadable_reason: str | None = None,
    rules: TokenRules = DIRECTORY_RULES,
    parent: SecurityDescriptor | None = None,
) -> Acl:
    """Who may read the object, as the :class:`~ancre.models.Acl` of :func:`compile_read`.

    - ``sd is None`` (could not be read): ``Acl.nobody("unreadable security descriptor: <reason>")``;
    - NULL DACL: everyone; empty DACL: nobody (:data:`EMPTY_DACL_RULE`);
    - the DACL walked in order, bit by bit, for :data:`READ_ACCESS` (module note);
    - an unknown allow-type ACE (compound, object) is ignored; any other ACE the engine does not
      understand (deny-object, conditional/callback, audit, unknown code) makes the object
      ``Acl.nobody("unsupported … ACE …")``.

    ``is_container``: the object is a folder (reading is FILE_LIST_DIRECTORY there, the same bit as
    FILE_READ_DATA, so the result is the same). Never raises.
    """
    del is_container  # same read bits for files and folders (MS-DTYP 2.4.3 / winnt.h)
    return compile_read(sd, rules=rules, parent=parent, unreadable_reason=unreadable_reason).acl()


# --- explanation of one user's decision ---------------------------------------------------------
@dataclass(frozen=True)
class BitVerdict:
    """How the walk decided one bit of :data:`READ_ACCESS` for one user.

    ``ace``/``index``: the ACE that decided (0-based position in the DACL; on the parent's DACL
    when ``source`` is ``"parent"``), ``None`` when no ACE did; ``source``: ``"ace"``, ``"owner"``
    (the owner's implicit READ_CONTROL), ``"parent"`` (FILE_LIST_DIRECTORY on the parent folder),
    ``"null"`` (a NULL DACL) or ``"none"`` (no ACE grants it); ``via``: the user's principals
    through which the ACE (or the owner) applied; ``route``: how its SID is held (``"NETWORK: in
    every network logon"``, a local group, OWNER RIGHTS), ``None`` for a plain principal."""

    bit: int
    granted: bool
    source: str
    ace: Ace | None = None
    index: int | None = None
    via: frozenset[str] = frozenset()
    route: str | None = None

    @property
    def name(self) -> str:
        """The bit's name (``FILE_READ_DATA``)."""
        return BIT_NAMES.get(self.bit, f"0x{self.bit:08X}")


def _walk_bit(prep: _Prepared, bit: int, principals: frozenset[str]) -> BitVerdict:
    if prep.null:
        return BitVerdict(bit, True, "null", via=principals & {EVERYONE})
    if prep.implicit_owner and bit & (READ_CONTROL | WRITE_DAC) and principals & prep.owner.surely:
        return BitVerdict(bit, True, "owner", via=principals & prep.owner.surely, route=prep.owner.route)
    for st in prep.steps:
        if st.allow & bit and principals & st.holders.surely:
            return BitVerdict(bit, True, "ace", st.ace, st.index, principals & st.holders.surely, st.holders.route)
        if st.deny & bit and principals & st.holders.maybe:
            return BitVerdict(bit, False, "ace", st.ace, st.index, principals & st.holders.maybe, st.holders.route)
    return BitVerdict(bit, False, "none")


@dataclass(frozen=True)
class Decision:
    """Why a principal set may or may not read an object.

    ``deciding_ace`` is the ACE that decided the headline (for a refusal, the deny — or nothing —
    refusing the first refused bit; for a grant, the allow granting FILE_READ_DATA), ``None`` when
    the descriptor as a whole decided; ``rule`` is a short text such as ``"explicit deny ACE for
    S-…"``, ``"inherited allow ACE for S-…"``, ``"no ACE grants read"``, ``"no ACE grants
    FILE_READ_EA"``, ``"NULL DACL: everyone"``, ``"empty DACL: nobody"``, ``"unreadable security
    descriptor: …"``. ``bits``: the verdict of each bit of :data:`READ_ACCESS` (empty when the
    descriptor as a whole decided); ``decided_by``: the user's principals through which the
    deciding ACE applied; ``route``: how its SID is held in the token (``None``: plainly);
    ``notes``: undecided SIDs met (see :class:`ReadRights`)."""

    readable: bool
    deciding_ace: Ace | None
    rule: str
    bits: tuple[BitVerdict, ...] = ()
    decided_by: frozenset[str] = frozenset()
    route: str | None = None
    notes: tuple[str, ...] = ()


def explain_read(
    sd: SecurityDescriptor | None,
    principals: frozenset[str],
    *,
    is_container: bool = False,
    unreadable_reason: str | None = None,
    rules: TokenRules = DIRECTORY_RULES,
    parent: SecurityDescriptor | None = None,
    attributes_from_parent: bool = True,
) -> Decision:
    """Whether ``principals`` (``sid:S-…`` strings, a user's P(user)) may read the object, and why:
    the walk of :func:`compile_read` run for this one user, bit by bit. ``readable`` always equals
    ``compile_read(sd, …).readable_by(principals)``. An empty principal set reads nothing. Never
    raises."""
    del is_container
    if not principals:
        return Decision(False, None, "empty principal set: reads nothing")
    prep = _prepare(sd, rules, unreadable_reason)
    if prep.rule is not None and not prep.null and prep.rule != EMPTY_DACL_RULE:
        return Decision(False, None, prep.rule)
    notes = compile_read(sd, rules=rules, parent=parent, unreadable_reason=unreadable_reason,
                         attributes_from_parent=attributes_from_parent).notes
    parent_prep = _prepare(parent, rules) if parent is not None and attributes_from_parent else None
    verdicts: list[BitVerdict] = []
    for bit in READ_BITS:
        v = _walk_bit(prep, bit, principals)
        if not v.granted and bit == FILE_READ_ATTRIBUTES and parent_prep is not None and (
            parent_prep.rule is None or parent_prep.null
        ):
            pv = _walk_bit(parent_prep, FILE_LIST_DIRECTORY, principals)
            if pv.granted:
                v = BitVerdict(bit, True, "parent", pv.ace, pv.index, pv.via, pv.route)
        verdicts.append(v)
    readable = all(v.granted for v in verdicts)
    if prep.rule == EMPTY_DACL_RULE:
        return Decision(False, None, EMPTY_DACL_RULE, tuple(verdicts), notes=notes)
    if prep.null:
        return Decision(True, None, "NULL DACL: everyone", tuple(verdicts), principals & {EVERYONE}, notes=notes)
    head = verdicts[0] if readable else next(v for v in verdicts if not v.granted)  # readable: FILE_READ_DATA
    if head.ace is None:
        if readable:
            return Decision(True, None, "the owner's implicit rights", tuple(verdicts), head.via, head.route, notes)
        what = "read" if head.bit == FILE_READ_DATA else head.name
        return Decision(False, None, f"no ACE grants {what}", tuple(verdicts), notes=notes)
    ace = head.ace
    origin = "inherited" if ace.inherited else "explicit"
    rule = f"{origin} {'deny' if ace.is_deny else 'allow'} ACE for {ace.sid}"
    if ace.is_deny and _deny_bits(ace.mask) & READ_ACCESS != READ_ACCESS:
        rule += f" ({head.name})"
    if head.source == "parent":
        rule = f"{rule} on the parent folder (FILE_LIST_DIRECTORY grants {head.name})"
    return Decision(readable, ace, rule, tuple(verdicts), head.via, head.route, notes)


# --- inheritance (MS-DTYP 2.5.3.4, simplified to file systems) -----------------------------------
def _inherited_copy(ace: Ace, child_is_container: bool) -> Ace | None:
    """The ACE a child takes from one parent ACE, or ``None`` (ACE Inheritance Rules)."""
    f = ace.flags
    if not child_is_container:
        if f & OBJECT_INHERIT_ACE:
            return Ace(ace.type, ace.sid, ace.mask, (f & ~_INHERITANCE_FLAGS) | INHERITED_ACE)
        return None
    if f & CONTAINER_INHERIT_ACE:
        if f & NO_PROPAGATE_INHERIT_ACE:  # effective on the child, inherited no further
            return Ace(ace.type, ace.sid, ace.mask, (f & ~_INHERITANCE_FLAGS) | INHERITED_ACE)
        return Ace(ace.type, ace.sid, ace.mask, (f & ~INHERIT_ONLY_ACE) | INHERITED_ACE)
    if f & OBJECT_INHERIT_ACE and not f & NO_PROPAGATE_INHERIT_ACE:
        # only for the folder's files: inherit-only on the folder itself
        return Ace(ace.type, ace.sid, ace.mask, f | INHERIT_ONLY_ACE | INHERITED_ACE)
    return None


def canonical_order(aces: tuple[Ace, ...] | list[Ace]) -> tuple[Ace, ...]:
    """Stable reorder: explicit deny, explicit allow, inherited deny, inherited allow."""
    return tuple(sorted(aces, key=lambda a: (a.inherited, not a.is_deny)))


def inherit(
    parent: SecurityDescriptor,
    child_explicit: tuple[Ace, ...],
    *,
    child_is_container: bool,
    protected: bool,
    owner: str | None = None,
    group: str | None = None,
) -> SecurityDescriptor:
    """The security descriptor of a child of ``parent`` that has its own ``child_explicit`` ACEs.

    Per the ACE inheritance rules (MS-DTYP 2.5.3.4.2, Win32 "ACE Inheritance Rules"):

    - a file takes the parent ACEs with OBJECT_INHERIT, as effective ACEs without inheritance flags;
    - a folder takes CONTAINER_INHERIT ACEs as effective ACEs (still inheritable), and
      OBJECT_INHERIT-only ACEs as INHERIT_ONLY (passed on to its files);
    - NO_PROPAGATE_INHERIT: the child gets the ACE with its inheritance flags cleared (and a folder
      does not take an OBJECT_INHERIT-only ACE at all);
    - inherited ACEs carry INHERITED_ACE; ``child_explicit`` ACEs lose it;
    - the child's DACL is in canonical order: explicit deny, explicit allow, inherited deny,
      inherited allow (stable within each group);
    - ``protected`` (SE_DACL_PROTECTED): the child takes no parent ACE.

    A NULL parent DACL has nothing to inherit. A child with neither explicit nor inherited ACEs gets
    an empty DACL (nobody). Generic rights and CREATOR OWNER are not mapped (see module note).
    ``owner``/``group`` are copied to the result.
    """
    explicit = [Ace(a.type, a.sid, a.mask, a.flags & ~INHERITED_ACE) for a in child_explicit]
    inherited: list[Ace] = []
    if not protected and parent.dacl:
        for ace in parent.dacl:
            copy = _inherited_copy(ace, child_is_container)
            if copy is not None:
                inherited.append(copy)
    return SecurityDescriptor(
        owner=owner, group=group, dacl=canonical_order(explicit + inherited), protected=protected
    )


def describe_mask(mask: int) -> str:
    """``0x1200A9`` → ``"READ (0x001200A9)"``; unnamed masks are shown in hex only."""
    for name, value in NAMED_MASKS.items():
        if mask == value:
            return f"{name} (0x{mask:08X})"
    return f"0x{mask:08X}"


def describe_ace(ace: Ace) -> str:
    """A one-line human form: ``"DENY READ (0x001200A9) for S-… [explicit]"``."""
    if ace.type == AceType.ACCESS_ALLOWED:
        kind = "ALLOW"
    elif ace.type == AceType.ACCESS_DENIED:
        kind = "DENY"
    else:
        kind = _type_name(int(ace.type))
    return f"{kind} {describe_mask(ace.mask)} for {ace.sid} [{'inherited' if ace.inherited else 'explicit'}]"
