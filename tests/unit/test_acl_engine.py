"""The ACL engine: read reduction of security descriptors and ACE inheritance (MS-DTYP)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ancre.acl.engine import (
    CONTAINER_INHERIT_ACE,
    FILE_ALL_ACCESS,
    FILE_GENERIC_READ,
    FILE_READ_ATTRIBUTES,
    FILE_READ_DATA,
    FILE_WRITE_DATA,
    FULL,
    GENERIC_ALL,
    GENERIC_EXECUTE,
    GENERIC_READ,
    GENERIC_WRITE,
    INHERIT_ONLY_ACE,
    INHERITED_ACE,
    MODIFY,
    NO_PROPAGATE_INHERIT_ACE,
    OBJECT_INHERIT_ACE,
    READ,
    WRITE,
    Ace,
    AceType,
    SecurityDescriptor,
    canonical_order,
    denies_read,
    explain_read,
    grants_read,
    inherit,
    read_acl,
)
from ancre.errors import AclError
from ancre.models import EVERYONE, Acl

ALICE = "S-1-5-21-1-2-3-1201"
RH = "S-1-5-21-1-2-3-1105"
STAGIAIRES = "S-1-5-21-1-2-3-1103"
ADMINS = "S-1-5-32-544"
OICI = OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE


def allow(sid: str, mask: int = READ, flags: int = 0) -> Ace:
    return Ace(AceType.ACCESS_ALLOWED, sid, mask, flags)


def deny(sid: str, mask: int = READ, flags: int = 0) -> Ace:
    return Ace(AceType.ACCESS_DENIED, sid, mask, flags)


def sd(*aces: Ace) -> SecurityDescriptor:
    return SecurityDescriptor(dacl=tuple(aces))


def p(*sids: str) -> frozenset[str]:
    return frozenset(f"sid:{s}" for s in sids)


# --- constants and masks ---------------------------------------------------------------------------
def test_mask_constants_match_winnt() -> None:
    assert FILE_ALL_ACCESS == FULL == 0x1F01FF
    assert READ == 0x1200A9 and MODIFY == 0x1301BF and WRITE == 0x116
    assert FILE_GENERIC_READ == 0x120089
    assert GENERIC_READ == 0x80000000 and GENERIC_ALL == 0x10000000
    assert (OBJECT_INHERIT_ACE, CONTAINER_INHERIT_ACE, NO_PROPAGATE_INHERIT_ACE, INHERIT_ONLY_ACE, INHERITED_ACE) == (
        0x1, 0x2, 0x4, 0x8, 0x10,
    )
    assert AceType.ACCESS_ALLOWED == 0 and AceType.ACCESS_DENIED == 1 and AceType.ACCESS_ALLOWED_CALLBACK == 9


@pytest.mark.parametrize("mask", [FILE_READ_DATA, GENERIC_READ, GENERIC_ALL, FULL, READ, MODIFY, FILE_GENERIC_READ])
def test_read_granting_masks(mask: int) -> None:
    assert grants_read(mask) and denies_read(mask)


@pytest.mark.parametrize("mask", [WRITE, FILE_WRITE_DATA, GENERIC_WRITE, GENERIC_EXECUTE, FILE_READ_ATTRIBUTES, 0])
def test_masks_without_read(mask: int) -> None:
    assert not grants_read(mask) and not denies_read(mask)


# --- read evaluation -------------------------------------------------------------------------------
def test_allow_gives_principals_prefixed() -> None:
    acl = read_acl(sd(allow(RH), allow(ADMINS, FULL)))
    assert acl == Acl(p(RH, ADMINS), frozenset())
    assert acl.readable_by(p(RH, "S-1-1-0"))
    assert not acl.readable_by(p(ALICE))


def test_deny_wins_whatever_the_order() -> None:
    for dacl in ((deny(STAGIAIRES), allow(RH)), (allow(RH), deny(STAGIAIRES))):
        acl = read_acl(sd(*dacl))
        assert not acl.readable_by(p(RH, STAGIAIRES))
        assert acl.readable_by(p(RH))
        d = explain_read(sd(*dacl), p(RH, STAGIAIRES))
        assert not d.readable and d.deciding_ace == deny(STAGIAIRES)
        assert d.rule == f"explicit deny ACE for {STAGIAIRES}"


def test_deny_of_write_only_does_not_deny_read() -> None:
    acl = read_acl(sd(deny(STAGIAIRES, WRITE), deny(STAGIAIRES, GENERIC_WRITE), allow(STAGIAIRES)))
    assert acl.deny == frozenset()
    assert acl.readable_by(p(STAGIAIRES))


def test_generic_rights() -> None:
    assert read_acl(sd(allow(RH, GENERIC_READ))).readable_by(p(RH))
    assert read_acl(sd(allow(RH, GENERIC_ALL))).readable_by(p(RH))
    assert not read_acl(sd(allow(RH, GENERIC_WRITE | GENERIC_EXECUTE))).readable_by(p(RH))
    assert not read_acl(sd(allow(RH), deny(RH, GENERIC_ALL))).readable_by(p(RH))
    assert not read_acl(sd(allow(RH), deny(RH, FILE_READ_DATA))).readable_by(p(RH))


def test_allow_without_read_bit_grants_nothing() -> None:
    acl = read_acl(sd(allow(RH, WRITE)))
    assert acl.allow == frozenset() and not acl.readable_by(p(RH))
    assert explain_read(sd(allow(RH, WRITE)), p(RH)).rule == "no ACE grants read"


def test_inherit_only_aces_do_not_apply_to_the_object() -> None:
    only_for_children = sd(allow(RH, READ, OICI | INHERIT_ONLY_ACE), deny(ALICE, READ, OICI | INHERIT_ONLY_ACE), allow(ALICE))
    acl = read_acl(only_for_children)
    assert acl.allow == p(ALICE) and acl.deny == frozenset()
    assert not acl.readable_by(p(RH))
    assert acl.readable_by(p(ALICE))


def test_null_dacl_is_everyone_empty_dacl_is_nobody() -> None:
    null = SecurityDescriptor(dacl=None)
    assert read_acl(null) == Acl(frozenset({EVERYONE}))
    assert read_acl(null).readable_by(p(ALICE, "S-1-1-0"))
    assert explain_read(null, p(ALICE, "S-1-1-0")).rule == "NULL DACL: everyone"
    empty = SecurityDescriptor(dacl=())
    assert read_acl(empty).allow == frozenset() and read_acl(empty).reason == "empty DACL: nobody"
    assert explain_read(empty, p(ALICE, "S-1-1-0")).rule == "empty DACL: nobody"
    assert SecurityDescriptor().dacl == ()  # the default is closed, not NULL


def test_unreadable_descriptor_is_nobody_with_reason() -> None:
    acl = read_acl(None, unreadable_reason="STATUS_ACCESS_DENIED")
    assert acl.allow == frozenset() and "STATUS_ACCESS_DENIED" in (acl.reason or "")
    d = explain_read(None, p(ALICE, "S-1-1-0"))
    assert not d.readable and d.rule.startswith("unreadable security descriptor: ")


def test_unknown_allow_type_is_ignored() -> None:
    obj = Ace(AceType.ACCESS_ALLOWED_OBJECT, ALICE, READ)
    compound = Ace(AceType.ACCESS_ALLOWED_COMPOUND, ALICE, READ)
    acl = read_acl(sd(obj, compound, allow(RH)))
    assert acl == Acl(p(RH), frozenset())
    assert not acl.readable_by(p(ALICE))


@pytest.mark.parametrize(
    ("ace_type", "kind"),
    [
        (AceType.ACCESS_DENIED_OBJECT, "deny-type"),
        (AceType.ACCESS_DENIED_CALLBACK, "conditional/callback"),
        (AceType.ACCESS_ALLOWED_CALLBACK, "conditional/callback"),
        (AceType.ACCESS_ALLOWED_CALLBACK_OBJECT, "conditional/callback"),
        (AceType.SYSTEM_AUDIT, "non-access"),
        (0x2A, "non-access"),
    ],
)
def test_ace_the_engine_cannot_evaluate_makes_nobody(ace_type: int, kind: str) -> None:
    odd = Ace(ace_type, STAGIAIRES, READ)
    acl = read_acl(sd(allow(RH), odd))
    assert acl.allow == frozenset() and acl.deny == frozenset()
    assert acl.reason is not None and acl.reason.startswith(f"unsupported {kind} ACE") and STAGIAIRES in acl.reason
    assert not acl.readable_by(p(RH))
    assert not explain_read(sd(allow(RH), odd), p(RH)).readable


def test_inherit_only_unsupported_ace_does_not_poison_the_object() -> None:
    odd = Ace(AceType.ACCESS_DENIED_CALLBACK, STAGIAIRES, READ, OICI | INHERIT_ONLY_ACE)
    assert read_acl(sd(allow(RH), odd)).readable_by(p(RH))


def test_ace_validation() -> None:
    assert Ace(0x2A, "s-1-5-11", READ).type == 0x2A and Ace(0x2A, "s-1-5-11", READ).sid == "S-1-5-11"
    assert Ace(1, ALICE, READ).type is AceType.ACCESS_DENIED
    with pytest.raises(AclError):
        Ace(AceType.ACCESS_ALLOWED, "sid:S-1-5-11", READ)
    with pytest.raises(AclError):
        Ace(AceType.ACCESS_ALLOWED, "GG_RH", READ)
    with pytest.raises(AclError):
        Ace(AceType.ACCESS_ALLOWED, ALICE, 1 << 32)


def test_explain_read_rules() -> None:
    d = explain_read(sd(allow(RH, READ, INHERITED_ACE)), p(RH))
    assert d.readable and d.rule == f"inherited allow ACE for {RH}" and d.deciding_ace is not None
    assert explain_read(sd(allow(RH)), p(RH)).rule == f"explicit allow ACE for {RH}"
    assert explain_read(sd(deny(RH, READ, INHERITED_ACE), allow(RH)), p(RH)).rule == f"inherited deny ACE for {RH}"
    assert not explain_read(SecurityDescriptor(dacl=None), frozenset()).readable


_SIDS = [ALICE, RH, STAGIAIRES, ADMINS, "S-1-1-0"]
_aces = st.builds(
    Ace,
    st.sampled_from([0, 0, 0, 1, 1, 5, 6, 9]),
    st.sampled_from(_SIDS),
    st.sampled_from([READ, WRITE, FULL, GENERIC_READ, GENERIC_WRITE, FILE_READ_ATTRIBUTES]),
    st.sampled_from([0, OICI, OICI | INHERIT_ONLY_ACE, INHERITED_ACE]),
)
_sds = st.one_of(
    st.none(),
    st.builds(SecurityDescriptor, dacl=st.one_of(st.none(), st.lists(_aces, max_size=6).map(tuple))),
)


@settings(max_examples=300, deadline=None)
@given(_sds, st.frozensets(st.sampled_from(_SIDS)))
def test_explain_read_agrees_with_read_acl(desc: SecurityDescriptor | None, sids: frozenset[str]) -> None:
    principals = frozenset(f"sid:{s}" for s in sids)
    d = explain_read(desc, principals)
    assert d.readable == read_acl(desc).readable_by(principals)
    if d.deciding_ace is not None:
        assert d.deciding_ace.principal in principals
        assert d.deciding_ace.is_deny != d.readable


# --- inheritance -----------------------------------------------------------------------------------
def test_file_takes_object_inherit_aces_only() -> None:
    parent = sd(allow(RH, READ, OICI), allow(ALICE, READ, CONTAINER_INHERIT_ACE), allow(ADMINS, FULL, OBJECT_INHERIT_ACE), allow(STAGIAIRES))
    child = inherit(parent, (), child_is_container=False, protected=False)
    assert child.dacl == (allow(RH, READ, INHERITED_ACE), allow(ADMINS, FULL, INHERITED_ACE))
    assert read_acl(child).allow == p(RH, ADMINS)


def test_folder_takes_container_inherit_effective_and_object_inherit_as_inherit_only() -> None:
    parent = sd(allow(RH, READ, OICI), allow(ALICE, READ, CONTAINER_INHERIT_ACE), allow(ADMINS, FULL, OBJECT_INHERIT_ACE))
    folder = inherit(parent, (), child_is_container=True, protected=False)
    assert folder.dacl == (
        allow(RH, READ, OICI | INHERITED_ACE),
        allow(ALICE, READ, CONTAINER_INHERIT_ACE | INHERITED_ACE),
        allow(ADMINS, FULL, OBJECT_INHERIT_ACE | INHERIT_ONLY_ACE | INHERITED_ACE),
    )
    assert read_acl(folder, is_container=True).allow == p(RH, ALICE)  # ADMINS only for the files
    file = inherit(folder, (), child_is_container=False, protected=False)
    assert read_acl(file).allow == p(RH, ADMINS)  # the CI-only ACE does not reach files
    assert all(a.flags == INHERITED_ACE for a in file.dacl)


def test_inherit_only_parent_ace_becomes_effective_on_child() -> None:
    parent = sd(allow(RH, READ, OICI | INHERIT_ONLY_ACE))
    assert not read_acl(parent).readable_by(p(RH))
    folder = inherit(parent, (), child_is_container=True, protected=False)
    assert folder.dacl == (allow(RH, READ, OICI | INHERITED_ACE),)
    assert read_acl(folder).readable_by(p(RH))


def test_no_propagate_stops_after_one_generation() -> None:
    parent = sd(allow(RH, READ, OICI | NO_PROPAGATE_INHERIT_ACE), allow(ALICE, READ, OBJECT_INHERIT_ACE | NO_PROPAGATE_INHERIT_ACE), allow(ADMINS, FULL, OICI))
    file = inherit(parent, (), child_is_container=False, protected=False)
    assert read_acl(file).allow == p(RH, ALICE, ADMINS)
    sub = inherit(parent, (), child_is_container=True, protected=False)
    assert allow(RH, READ, INHERITED_ACE) in sub.dacl  # effective, inheritance flags cleared
    assert all(a.sid != ALICE for a in sub.dacl)  # OI|NP: only the parent's own files
    grandchild = inherit(sub, (), child_is_container=False, protected=False)
    assert read_acl(grandchild).allow == p(ADMINS)
    assert read_acl(inherit(sub, (), child_is_container=True, protected=False)).allow == p(ADMINS)


def test_protected_child_takes_no_parent_ace() -> None:
    parent = sd(allow(ADMINS, FULL, OICI), allow(ALICE, READ, OICI))
    child = inherit(parent, (allow(RH, READ, OICI),), child_is_container=True, protected=True)
    assert child.protected and child.dacl == (allow(RH, READ, OICI),)
    assert not read_acl(child).readable_by(p(ALICE))
    assert read_acl(inherit(parent, (), child_is_container=False, protected=True)).reason == "empty DACL: nobody"


def test_canonical_order_on_child() -> None:
    parent = sd(deny(STAGIAIRES, READ, OICI), allow(RH, READ, OICI))
    explicit = (allow(ALICE), deny(ADMINS, WRITE), allow(ADMINS, READ, INHERITED_ACE))
    child = inherit(parent, explicit, child_is_container=False, protected=False)
    assert child.dacl == (
        deny(ADMINS, WRITE),
        allow(ALICE),
        allow(ADMINS),  # declared explicit: INHERITED_ACE is cleared
        deny(STAGIAIRES, READ, INHERITED_ACE),
        allow(RH, READ, INHERITED_ACE),
    )
    assert canonical_order(tuple(reversed(child.dacl)))[0].is_deny


def test_null_parent_dacl_gives_nothing_to_inherit() -> None:
    child = inherit(SecurityDescriptor(dacl=None), (), child_is_container=False, protected=False)
    assert child.dacl == () and read_acl(child).allow == frozenset()
