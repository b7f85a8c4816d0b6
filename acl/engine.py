"""The one ACL engine of ancre: NT security descriptors reduced to the *read* right.

Terms and numbers follow [MS-DTYP] (Windows Data Types): access masks (2.4.3, and the file rights of
winnt.h), ACE header types and flags (2.4.4.1), security descriptor control bits (2.4.6), and the
inheritance algorithm (2.5.3.4, "ACE Inheritance Rules" in the Win32 security docs). A connector
feeds :func:`read_acl` a :class:`SecurityDescriptor` (parsed from SMB, or computed from an ACL
manifest with :func:`inherit`); the result is an :class:`~ancre.models.Acl` of ``sid:S-…``
principals that goes into the Qdrant payload.

Read evaluation is a *set* model, not Windows' ordered walk of the DACL:

- ``allow`` = SIDs of effective ACCESS_ALLOWED ACEs whose mask grants read (:func:`grants_read`);
- ``deny``  = SIDs of effective ACCESS_DENIED ACEs whose mask touches read (:func:`denies_read`);
- a user reads iff one of their principals is in ``allow`` and none is in ``deny``.

This is at least as strict as the ordered evaluation of Windows' AccessCheck (MS-DTYP 2.5.3.2): a
deny for any of the user's principals wins even where a (non-canonical) DACL puts an allow before it,
so any disagreement errs towards "not readable" — the fail-closed direction. For canonical DACLs
(explicit deny, explicit allow, inherited deny, inherited allow) both agree.

Not modelled (each makes the engine stricter, never looser): generic rights and CREATOR OWNER /
CREATOR GROUP are not mapped when inherited (generic bits still count as read, a CREATOR OWNER ACE
matches nobody); the owner's implicit READ_CONTROL/WRITE_DAC is irrelevant to reading data; SACL
ACEs (mandatory label, central access policy) are not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from ancre.errors import AclError
from ancre.models import EVERYONE, Acl, sid_principal

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

READ_BITS = FILE_READ_DATA | GENERIC_READ | GENERIC_ALL
"""Bits that carry the right to read data: an ALLOW ACE with any of them grants read, a DENY ACE
with any of them denies read. FILE_ALL_ACCESS includes FILE_READ_DATA."""

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


def grants_read(mask: int) -> bool:
    """Whether an ALLOW ACE with this access mask grants reading the data: FILE_READ_DATA
    (FILE_LIST_DIRECTORY on a folder), GENERIC_READ, GENERIC_ALL, or anything including them
    (FILE_ALL_ACCESS, READ, MODIFY)."""
    return bool(mask & READ_BITS)


def denies_read(mask: int) -> bool:
    """Whether a DENY ACE with this mask denies reading: iff it intersects FILE_READ_DATA |
    GENERIC_READ | GENERIC_ALL. A deny of write (or of attributes only) leaves reading alone."""
    return bool(mask & READ_BITS)


# --- evaluation (one function behind read_acl and explain_read) ----------------------------------
@dataclass(frozen=True)
class _Evaluation:
    acl: Acl
    allow: tuple[Ace, ...] = ()
    """Effective ACEs granting read, in DACL order."""
    deny: tuple[Ace, ...] = ()
    """Effective ACEs denying read, in DACL order."""
    rule: str | None = None
    """Set when the whole descriptor decides (NULL/empty DACL, unreadable, unsupported ACE)."""


EMPTY_DACL_RULE = "empty DACL: nobody"
"""Reason of the ACL of an empty DACL: a deliberate *nobody*, not a problem."""
SHARE_ADMITS_NONE_RULE = "share permissions: share_allow admits none of the NTFS readers"
"""Reason of an NTFS ∩ share result with no reader left: deliberate, not a problem."""
_DELIBERATE_NOBODY = frozenset({EMPTY_DACL_RULE, SHARE_ADMITS_NONE_RULE})


def acl_problem(acl: Acl) -> str | None:
    """Why nobody may read ``acl``'s document when that is *not* what its ACL says: the ACL could
    not be read, parsed, resolved or understood (``acl.reason``: ``acl_unreadable: …``,
    ``unsupported … ACE …``, a broken manifest entry, no rights configured). ``None`` for an ACL
    read normally and for a deliberate nobody (an empty DACL, share permissions admitting none of
    the readers). Such documents are problems: ``ancre status`` and the pass reports list them."""
    if acl.reason is None or acl.reason in _DELIBERATE_NOBODY:
        return None
    return acl.reason


def _evaluate(sd: SecurityDescriptor | None, unreadable_reason: str | None) -> _Evaluation:
    if sd is None:
        rule = f"unreadable security descriptor: {unreadable_reason or 'not available'}"
        return _Evaluation(Acl.nobody(rule), rule=rule)
    if sd.dacl is None:
        return _Evaluation(Acl(frozenset({EVERYONE})), rule="NULL DACL: everyone")
    if not sd.dacl:
        rule = EMPTY_DACL_RULE
        return _Evaluation(Acl.nobody(rule), rule=rule)
    allow: list[Ace] = []
    deny: list[Ace] = []
    for ace in sd.dacl:
        if ace.flags & INHERIT_ONLY_ACE:
            continue  # only for children: not part of this object's effective ACL
        if ace.type == AceType.ACCESS_ALLOWED:
            if grants_read(ace.mask):
                allow.append(ace)
        elif ace.type == AceType.ACCESS_DENIED:
            if denies_read(ace.mask):
                deny.append(ace)
        elif ace.type in _IGNORABLE_ALLOW_TYPES:
            continue  # could only widen access: ignoring it fails closed
        else:
            if ace.type in _CALLBACK_TYPES:
                kind = "conditional/callback"
            elif ace.type in _DENY_TYPES:
                kind = "deny-type"
            else:
                kind = "non-access"
            rule = f"unsupported {kind} ACE {_type_name(int(ace.type))} for {ace.sid}"
            return _Evaluation(Acl.nobody(rule), rule=rule)
    acl = Acl(frozenset(a.principal for a in allow), frozenset(a.principal for a in deny))
    return _Evaluation(acl, tuple(allow), tuple(deny))


def read_acl(
    sd: SecurityDescriptor | None, *, is_container: bool = False, unreadable_reason: str | None = None
) -> Acl:
    """Reduce a security descriptor to who may read the object, as ``sid:S-…`` principals.

    - ``sd is None`` (could not be read): ``Acl.nobody("unreadable security descriptor: <reason>")``;
    - NULL DACL: everyone (``allow = {sid:S-1-1-0}``); empty DACL: nobody;
    - INHERIT_ONLY ACEs do not apply to the object itself;
    - ALLOW ACEs granting read (:func:`grants_read`) fill ``allow``, DENY ACEs touching read
      (:func:`denies_read`) fill ``deny``; a deny always wins (see the module note on the set model);
    - an unknown allow-type ACE (compound, object) is ignored; any other ACE the engine does not
      understand (deny-object, conditional/callback, audit, unknown code) makes the object
      ``Acl.nobody("unsupported … ACE …")``.

    ``is_container``: the object is a folder. Reading is FILE_LIST_DIRECTORY there, the same bit as
    FILE_READ_DATA, so it does not change the result today. Never raises.
    """
    del is_container  # same read bit for files and folders (MS-DTYP 2.4.3 / winnt.h)
    return _evaluate(sd, unreadable_reason).acl


@dataclass(frozen=True)
class Decision:
    """Why a principal set may or may not read an object.

    ``deciding_ace`` is the ACE that decided (the first matching deny, else the first matching
    allow), ``None`` when the descriptor as a whole decided; ``rule`` is a short text such as
    ``"explicit deny ACE for S-…"``, ``"inherited allow ACE for S-…"``, ``"no ACE grants read"``,
    ``"NULL DACL: everyone"``, ``"empty DACL: nobody"``, ``"unreadable security descriptor: …"``.
    """

    readable: bool
    deciding_ace: Ace | None
    rule: str


def explain_read(
    sd: SecurityDescriptor | None,
    principals: frozenset[str],
    *,
    is_container: bool = False,
    unreadable_reason: str | None = None,
) -> Decision:
    """Whether ``principals`` (``sid:S-…`` strings, a user's P(user)) may read the object, and why.

    Same evaluation as :func:`read_acl`: ``readable`` always equals
    ``read_acl(sd).readable_by(principals)``. An empty principal set reads nothing. Never raises.
    """
    del is_container
    ev = _evaluate(sd, unreadable_reason)
    readable = ev.acl.readable_by(principals)
    if not principals:
        return Decision(False, None, "empty principal set: reads nothing")
    if ev.rule is not None:
        return Decision(readable, None, ev.rule)
    for ace in ev.deny:
        if ace.principal in principals:
            origin = "inherited" if ace.inherited else "explicit"
            return Decision(False, ace, f"{origin} deny ACE for {ace.sid}")
    for ace in ev.allow:
        if ace.principal in principals:
            origin = "inherited" if ace.inherited else "explicit"
            return Decision(True, ace, f"{origin} allow ACE for {ace.sid}")
    return Decision(False, None, "no ACE grants read")


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
