"""The ACL engine: MS-DTYP's ordered access check for FILE_GENERIC_READ, compiled into grants, and
ACE inheritance. Hypothesis compares the compiled rights with a transcription of the MS-DTYP
2.5.3.2 pseudocode run on an explicit token (``_reference_access``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ancre.acl.engine import (
    CONTAINER_INHERIT_ACE,
    FILE_ALL_ACCESS,
    FILE_GENERIC_READ,
    FILE_LIST_DIRECTORY,
    FILE_READ_ATTRIBUTES,
    FILE_READ_DATA,
    FILE_READ_EA,
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
    READ_ACCESS,
    READ_CONTROL,
    SYNCHRONIZE,
    WRITE,
    WRITE_DAC,
    Ace,
    AceType,
    SecurityDescriptor,
    canonical_order,
    compile_read,
    denies_read,
    explain_read,
    grants_read,
    inherit,
    map_generic,
    read_acl,
)
from ancre.acl.token import LocalGroups, TokenRules
from ancre.errors import AclError
from ancre.models import AUTHENTICATED_USERS, EVERYONE, NETWORK, Acl, ChunkPayload, Grant

ALICE = "S-1-5-21-1-2-3-1201"
BOB = "S-1-5-21-1-2-3-1202"
RH = "S-1-5-21-1-2-3-1105"
STAGIAIRES = "S-1-5-21-1-2-3-1103"
PERSONNEL = "S-1-5-21-1-2-3-1106"
ADMINS = "S-1-5-32-544"
OWNER_RIGHTS = "S-1-3-4"
OICI = OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE
UNIVERSAL = frozenset({EVERYONE, AUTHENTICATED_USERS, NETWORK})


def allow(sid: str, mask: int = READ, flags: int = 0) -> Ace:
    return Ace(AceType.ACCESS_ALLOWED, sid, mask, flags)


def deny(sid: str, mask: int = READ, flags: int = 0) -> Ace:
    return Ace(AceType.ACCESS_DENIED, sid, mask, flags)


def sd(*aces: Ace, owner: str | None = None) -> SecurityDescriptor:
    return SecurityDescriptor(owner=owner, dacl=tuple(aces))


def p(*sids: str) -> frozenset[str]:
    """A resolved user's principals: the SIDs given plus Everyone, Authenticated Users, NETWORK."""
    return frozenset(f"sid:{s}" for s in sids) | UNIVERSAL


def bare(*sids: str) -> frozenset[str]:
    return frozenset(f"sid:{s}" for s in sids)


def readable(desc: SecurityDescriptor | None, principals: frozenset[str], **kw: object) -> bool:
    got = compile_read(desc, **kw).readable_by(principals)  # type: ignore[arg-type]
    assert explain_read(desc, principals, **kw).readable == got  # type: ignore[arg-type]
    return got


# --- constants and masks ---------------------------------------------------------------------------
def test_mask_constants_match_winnt() -> None:
    assert FILE_ALL_ACCESS == FULL == 0x1F01FF
    assert READ == 0x1200A9 and MODIFY == 0x1301BF and WRITE == 0x116
    assert FILE_GENERIC_READ == READ_ACCESS == 0x120089
    assert GENERIC_READ == 0x80000000 and GENERIC_ALL == 0x10000000
    assert (OBJECT_INHERIT_ACE, CONTAINER_INHERIT_ACE, NO_PROPAGATE_INHERIT_ACE, INHERIT_ONLY_ACE, INHERITED_ACE) == (
        0x1, 0x2, 0x4, 0x8, 0x10,
    )
    assert AceType.ACCESS_ALLOWED == 0 and AceType.ACCESS_DENIED == 1 and AceType.ACCESS_ALLOWED_CALLBACK == 9


def test_generic_mapping_of_files() -> None:
    assert map_generic(GENERIC_READ) == FILE_GENERIC_READ
    assert map_generic(GENERIC_ALL) == FILE_ALL_ACCESS
    assert map_generic(GENERIC_WRITE) == 0x120116 and map_generic(GENERIC_EXECUTE) == 0x1200A0
    assert map_generic(FILE_READ_DATA | GENERIC_EXECUTE) == 0x1200A1


@pytest.mark.parametrize("mask", [FULL, READ, MODIFY, FILE_GENERIC_READ])
def test_masks_that_grant_read_alone(mask: int) -> None:
    assert grants_read(mask) and denies_read(mask)


@pytest.mark.parametrize("mask", [FILE_READ_DATA, GENERIC_READ, GENERIC_ALL, FILE_READ_ATTRIBUTES])
def test_partial_or_generic_allow_masks_do_not_grant_read_alone(mask: int) -> None:
    assert not grants_read(mask) and denies_read(mask)


@pytest.mark.parametrize("mask", [WRITE, FILE_WRITE_DATA, GENERIC_WRITE & ~0, 0])
def test_write_masks_neither_grant_nor_deny(mask: int) -> None:
    if mask == GENERIC_WRITE:  # maps to FILE_GENERIC_WRITE, which holds READ_CONTROL and SYNCHRONIZE
        assert denies_read(mask)
    else:
        assert not grants_read(mask) and not denies_read(mask)


# --- the ordered walk -----------------------------------------------------------------
def test_explicit_allow_before_inherited_deny_is_readable() -> None:
    """The canonical DACL Windows' editors write for "explicit allow overrides inherited deny"."""
    dacl = sd(allow(RH), deny(STAGIAIRES, READ, INHERITED_ACE), allow(PERSONNEL, READ, INHERITED_ACE))
    assert readable(dacl, p(RH, STAGIAIRES))
    assert not readable(dacl, p(PERSONNEL, STAGIAIRES))
    assert readable(dacl, p(PERSONNEL))
    d = explain_read(dacl, p(RH, STAGIAIRES))
    assert d.deciding_ace == allow(RH) and d.rule == f"explicit allow ACE for {RH}"


def test_an_explicit_deny_first_still_wins() -> None:
    """The demo's CLIENTS/test-deny-explicite.docx: the explicit deny for GG_Stagiaires comes first."""
    dacl = sd(deny(STAGIAIRES), allow(RH, READ, INHERITED_ACE))
    assert not readable(dacl, p(RH, STAGIAIRES)) and readable(dacl, p(RH))
    d = explain_read(dacl, p(RH, STAGIAIRES))
    assert d.deciding_ace == deny(STAGIAIRES) and d.rule == f"explicit deny ACE for {STAGIAIRES}"
    assert d.decided_by == frozenset({f"sid:{STAGIAIRES}"})


def test_non_canonical_order_is_walked_as_written() -> None:
    dacl = sd(allow(RH), deny(RH))
    assert readable(dacl, p(RH))
    assert not readable(sd(deny(RH), allow(RH)), p(RH))


def test_deny_of_write_only_does_not_deny_read() -> None:
    acl = read_acl(sd(deny(STAGIAIRES, WRITE), deny(STAGIAIRES, FILE_WRITE_DATA), allow(STAGIAIRES)))
    assert acl.readable_by(p(STAGIAIRES))


# --- which right is read --------------------------------------------------------------
@pytest.mark.parametrize("bit", [FILE_READ_DATA, READ_CONTROL, SYNCHRONIZE, FILE_READ_EA, FILE_READ_ATTRIBUTES])
def test_every_bit_of_file_generic_read_is_needed(bit: int) -> None:
    assert not readable(sd(allow(RH, FILE_GENERIC_READ & ~bit)), p(RH))
    assert not readable(sd(deny(RH, bit), allow(RH)), p(RH))
    assert readable(sd(allow(RH, FILE_GENERIC_READ & ~bit), allow(PERSONNEL, bit)), p(RH, PERSONNEL))
    d = explain_read(sd(deny(RH, bit), allow(RH)), p(RH))
    assert not d.readable and d.deciding_ace == deny(RH, bit)


def test_read_data_alone_is_not_read() -> None:
    """Granted FILE_READ_DATA but denied FILE_READ_EA: the bytes, not the document as Word opens it."""
    dacl = sd(deny(STAGIAIRES, FILE_READ_EA), allow(STAGIAIRES, READ))
    assert not readable(dacl, p(STAGIAIRES))
    d = explain_read(dacl, p(STAGIAIRES))
    assert d.rule == f"explicit deny ACE for {STAGIAIRES} (FILE_READ_EA)"
    assert [v.name for v in d.bits if not v.granted] == ["FILE_READ_EA"]
    assert explain_read(sd(allow(RH, FILE_READ_DATA)), p(RH)).rule == "no ACE grants READ_CONTROL"


def test_generic_bits_grant_nothing_but_deny_what_they_map_to() -> None:
    assert not readable(sd(allow(RH, GENERIC_READ)), p(RH))
    assert not readable(sd(allow(RH, GENERIC_ALL)), p(RH))
    assert not readable(sd(deny(RH, GENERIC_READ), allow(RH)), p(RH))
    assert not readable(sd(deny(RH, GENERIC_WRITE), allow(RH)), p(RH))  # FILE_GENERIC_WRITE holds READ_CONTROL
    assert readable(sd(deny(RH, WRITE), allow(RH)), p(RH))


def test_read_attributes_from_the_parent_folder() -> None:
    """[MS-FSA] 2.1.5.1.2.1: FILE_LIST_DIRECTORY on the parent grants FILE_READ_ATTRIBUTES."""
    file = sd(allow(RH, FILE_GENERIC_READ & ~FILE_READ_ATTRIBUTES))
    folder = sd(allow(RH, FILE_LIST_DIRECTORY))
    assert not readable(file, p(RH))
    assert readable(file, p(RH), parent=folder)
    assert not readable(file, p(RH), parent=sd(deny(RH, FILE_LIST_DIRECTORY), allow(RH)))
    assert not readable(file, p(RH), parent=folder, attributes_from_parent=False)
    d = explain_read(file, p(RH), parent=folder)
    assert d.bits[-1].source == "parent" and d.bits[-1].granted


# --- the owner and OWNER RIGHTS ---------------------------------------------------
def test_the_owner_gets_read_control_implicitly() -> None:
    no_rc = FILE_GENERIC_READ & ~READ_CONTROL
    assert not readable(sd(allow(ALICE, no_rc), owner=BOB), p(ALICE))
    assert readable(sd(allow(ALICE, no_rc), owner=ALICE), p(ALICE))
    assert readable(sd(allow(ALICE, no_rc), owner=RH), p(ALICE, RH))  # a group owner
    # before the walk: a later deny of READ_CONTROL can't take it back
    assert readable(sd(allow(ALICE, no_rc), deny(ALICE, READ_CONTROL), owner=ALICE), p(ALICE))
    d = explain_read(sd(allow(ALICE, no_rc), owner=ALICE), p(ALICE))
    assert next(v for v in d.bits if v.bit == READ_CONTROL).source == "owner"


def test_owner_rights_applies_to_the_owner() -> None:
    # a deny aimed at the owner is not lost
    dacl = sd(deny(OWNER_RIGHTS, READ), allow(RH), owner=ALICE)
    assert not readable(dacl, p(ALICE, RH)) and readable(dacl, p(BOB, RH))
    d = explain_read(dacl, p(ALICE, RH))
    assert d.deciding_ace == deny(OWNER_RIGHTS) and d.decided_by == frozenset({f"sid:{ALICE}"})
    assert d.route is not None and "OWNER RIGHTS" in d.route
    # an allow for the owner is not lost either, also when the owner is a group
    assert readable(sd(allow(OWNER_RIGHTS), owner=ALICE), p(ALICE))
    assert readable(sd(allow(OWNER_RIGHTS), owner=RH), p(ALICE, RH))
    assert not readable(sd(allow(OWNER_RIGHTS), owner=RH), p(ALICE))
    assert not readable(sd(allow(OWNER_RIGHTS)), p(ALICE))  # no owner: nobody


def test_owner_rights_cancels_the_implicit_read_control() -> None:
    no_rc = FILE_GENERIC_READ & ~READ_CONTROL
    assert not readable(sd(allow(ALICE, no_rc), allow(OWNER_RIGHTS, WRITE_DAC), owner=ALICE), p(ALICE))
    # even inherit-only (Samba ignores it there; Windows may not: the safe side)
    assert not readable(sd(allow(ALICE, no_rc), allow(OWNER_RIGHTS, WRITE_DAC, OICI | INHERIT_ONLY_ACE), owner=ALICE), p(ALICE))


# --- descriptor-wide rules -----------------------------------------------------------------------------
def test_inherit_only_aces_do_not_apply_to_the_object() -> None:
    only_for_children = sd(allow(RH, READ, OICI | INHERIT_ONLY_ACE), deny(ALICE, READ, OICI | INHERIT_ONLY_ACE), allow(ALICE))
    assert read_acl(only_for_children) == Acl(p(ALICE) - UNIVERSAL)
    assert not readable(only_for_children, p(RH)) and readable(only_for_children, p(ALICE))


def test_null_dacl_is_everyone_empty_dacl_is_nobody() -> None:
    null = SecurityDescriptor(dacl=None)
    assert read_acl(null) == Acl(frozenset({EVERYONE}))
    assert readable(null, p(ALICE))
    assert explain_read(null, p(ALICE)).rule == "NULL DACL: everyone"
    empty = SecurityDescriptor(owner=ALICE, dacl=())
    assert read_acl(empty).allow == frozenset() and read_acl(empty).reason == "empty DACL: nobody"
    assert not readable(empty, p(ALICE))
    assert explain_read(empty, p(ALICE)).rule == "empty DACL: nobody"
    assert SecurityDescriptor().dacl == ()  # the default is closed, not NULL


def test_unreadable_descriptor_is_nobody_with_reason() -> None:
    acl = read_acl(None, unreadable_reason="STATUS_ACCESS_DENIED")
    assert acl.allow == frozenset() and "STATUS_ACCESS_DENIED" in (acl.reason or "")
    d = explain_read(None, p(ALICE))
    assert not d.readable and d.rule.startswith("unreadable security descriptor: ")


def test_unknown_allow_type_is_ignored() -> None:
    obj = Ace(AceType.ACCESS_ALLOWED_OBJECT, ALICE, READ)
    compound = Ace(AceType.ACCESS_ALLOWED_COMPOUND, ALICE, READ)
    acl = read_acl(sd(obj, compound, allow(RH)))
    assert acl == Acl(frozenset({f"sid:{RH}"}), frozenset())
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
    assert explain_read(sd(allow(RH, WRITE)), p(RH)).rule == "no ACE grants read"
    assert not explain_read(SecurityDescriptor(dacl=None), frozenset()).readable


def test_a_simple_dacl_stays_a_plain_acl() -> None:
    dacl = sd(deny(STAGIAIRES), allow(RH), allow(ADMINS, FULL), allow(PERSONNEL, READ, INHERITED_ACE))
    assert read_acl(dacl) == Acl(
        frozenset({f"sid:{RH}", f"sid:{ADMINS}", f"sid:{PERSONNEL}"}), frozenset({f"sid:{STAGIAIRES}"})
    )


def test_bits_granted_by_different_aces_need_both() -> None:
    """FILE_READ_DATA from one group, the other bits from another: a user needs both groups, which
    the stored ACL says with a grant whose ``also`` holds the second need."""
    dacl = sd(allow(RH, FILE_READ_DATA), allow(PERSONNEL, FILE_GENERIC_READ & ~FILE_READ_DATA))
    acl = read_acl(dacl)
    assert acl.readable_by(p(RH, PERSONNEL)) and not acl.readable_by(p(RH)) and not acl.readable_by(p(PERSONNEL))
    assert acl.clauses == (Grant(frozenset({f"sid:{RH}"}), also=frozenset({frozenset({f"sid:{PERSONNEL}"})})),)
    assert Grant.from_dict(acl.clauses[0].to_dict()) == acl.clauses[0]


_PAYLOAD = {"source": "s", "doc_id": "s:1", "path": "x", "filename": "x", "chunk_index": 0, "text": ""}


# --- the reference: MS-DTYP 2.5.3.2 on an explicit token ------------------------------------------
def _reference_access(desc: SecurityDescriptor | None, token: frozenset[str], desired: int) -> bool:
    """MS-DTYP 2.5.3.2 AccessCheck transcribed: the remaining bits, ACE by ACE (``token``: bare SIDs)."""
    if desc is None:
        return False
    if desc.dacl is None:
        return True
    remaining = desired
    if desc.owner is not None and desc.owner in token and not any(a.sid == OWNER_RIGHTS for a in desc.dacl):
        remaining &= ~(READ_CONTROL | WRITE_DAC)
    for ace in desc.dacl:
        if ace.flags & INHERIT_ONLY_ACE:
            continue
        sid = desc.owner if ace.sid == OWNER_RIGHTS else ace.sid
        if sid is None or sid not in token:
            continue
        if ace.type == AceType.ACCESS_ALLOWED:
            remaining &= ~ace.mask
        elif ace.type == AceType.ACCESS_DENIED and remaining & map_generic(ace.mask):
            return False
    return remaining & ~(GENERIC_READ | GENERIC_WRITE | GENERIC_EXECUTE | GENERIC_ALL) == 0


def _reference_read(desc: SecurityDescriptor | None, token: frozenset[str], parent: SecurityDescriptor | None) -> bool:
    """FILE_GENERIC_READ with [MS-FSA]'s FILE_READ_ATTRIBUTES from the parent's FILE_LIST_DIRECTORY."""
    if _reference_access(desc, token, FILE_GENERIC_READ):
        return True
    rest = FILE_GENERIC_READ & ~FILE_READ_ATTRIBUTES
    return (
        parent is not None
        and _reference_access(desc, token, rest)
        and _reference_access(parent, token, FILE_LIST_DIRECTORY)
    )


_SIDS = [ALICE, BOB, RH, STAGIAIRES, PERSONNEL, ADMINS, "S-1-1-0", "S-1-5-11", "S-1-5-2", OWNER_RIGHTS]
_MASKS = [READ, WRITE, FULL, FILE_GENERIC_READ, FILE_READ_DATA, FILE_READ_EA, READ_CONTROL, SYNCHRONIZE,
          FILE_READ_ATTRIBUTES, FILE_GENERIC_READ & ~FILE_READ_EA, FILE_GENERIC_READ & ~READ_CONTROL, WRITE_DAC]
_aces = st.builds(
    Ace,
    st.sampled_from([0, 0, 0, 1, 1, 5]),
    st.sampled_from(_SIDS),
    st.sampled_from(_MASKS),
    st.sampled_from([0, 0, OICI, OICI | INHERIT_ONLY_ACE, INHERITED_ACE]),
)
_sds = st.builds(
    SecurityDescriptor,
    owner=st.sampled_from([None, ALICE, RH, ADMINS]),
    dacl=st.one_of(st.none(), st.lists(_aces, max_size=7).map(tuple)),
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.none(), _sds), st.one_of(st.none(), _sds), st.frozensets(st.sampled_from(_SIDS[:6])))
def test_compiled_rights_agree_with_the_reference(
    desc: SecurityDescriptor | None, parent: SecurityDescriptor | None, sids: frozenset[str]
) -> None:
    principals = p(*sids)
    token = frozenset(x[4:] for x in principals)
    expected = _reference_read(desc, token, parent)
    rights = compile_read(desc, parent=parent)
    assert rights.readable_by(principals) == expected
    acl = rights.acl()  # what sync stores: grants, exact
    assert acl.readable_by(principals) == expected
    assert ChunkPayload.from_dict({**_PAYLOAD, **ChunkPayload.acl_fields(acl)}).readable_by(principals) == expected
    if expected:  # the store's prefilter never refuses a reader
        assert acl.allow & principals and not (acl.deny & principals)
    d = explain_read(desc, principals, parent=parent)
    assert d.readable == expected
    if d.deciding_ace is not None and not d.readable:
        assert d.deciding_ace.is_deny
    if d.readable and d.deciding_ace is not None:
        assert not d.deciding_ace.is_deny and d.decided_by <= principals


# --- network-logon token: local groups and undecidable SIDs ---------------------------------------
USERS = "S-1-5-32-545"
PRE2000 = "S-1-5-32-554"
LOCAL_READERS = "S-1-5-21-9-9-9-1001"  # a member server's own local group
NTLM = "S-1-5-64-10"
_GROUPS = LocalGroups(
    {USERS: frozenset({"S-1-5-4", "S-1-5-21-1-2-3-513", "S-1-5-11"}), PRE2000: frozenset({"S-1-5-11"}),
     LOCAL_READERS: frozenset({RH, ADMINS}), ADMINS: frozenset({"S-1-5-21-1-2-3-512", BOB})},
    origin="test",
)
NET = TokenRules.network(_GROUPS, account_domain="S-1-5-21-9-9-9", primary_domain="S-1-5-21-1-2-3")


def _server_token(principals: frozenset[str], undecided: frozenset[str]) -> frozenset[str]:
    """The token a server builds, computed the other way round: P's SIDs, then every alias holding
    one of the token's SIDs (to a fixpoint), plus the undecided SIDs this logon happens to hold."""
    token = {x[4:] for x in principals} | set(undecided)
    changed = True
    while changed:
        changed = False
        for alias, members in _GROUPS.members.items():
            if alias not in token and members & token:
                token.add(alias)
                changed = True
    return frozenset(token)


_NET_SIDS = [ALICE, BOB, RH, STAGIAIRES, USERS, PRE2000, LOCAL_READERS, ADMINS, NTLM, "S-1-5-4", "S-1-5-15",
             "S-1-5-11", "S-1-1-0", OWNER_RIGHTS, "S-1-5-21-9-9-9-1002"]
_net_aces = st.builds(Ace, st.sampled_from([0, 0, 1]), st.sampled_from(_NET_SIDS), st.sampled_from(_MASKS[:6]), st.just(0))
_net_sds = st.builds(
    SecurityDescriptor, owner=st.sampled_from([None, ALICE, ADMINS, LOCAL_READERS]),
    dacl=st.lists(_net_aces, max_size=6).map(tuple),
)


@settings(max_examples=400, deadline=None)
@given(_net_sds, st.frozensets(st.sampled_from([ALICE, BOB, RH, STAGIAIRES, "S-1-5-21-1-2-3-512", "S-1-5-21-1-2-3-513"])),
       st.frozensets(st.sampled_from([NTLM, "S-1-5-15"])))
def test_network_token_is_never_wider_than_the_server(
    desc: SecurityDescriptor, sids: frozenset[str], held: frozenset[str]
) -> None:
    """Whatever undecided SIDs (NTLM Authentication, This Organization) the logon holds, ancre
    never grants what the server's access check refuses; without them in the DACL it is exact."""
    principals = p(*sids)
    rights = compile_read(desc, rules=NET)
    granted = rights.readable_by(principals)
    assert rights.acl().readable_by(principals) == granted
    assert explain_read(desc, principals, rules=NET).readable == granted
    server = _reference_read(desc, _server_token(principals, held), None)
    if granted:
        assert server
    if not any(a.sid in (NTLM, "S-1-5-15") for a in desc.dacl or ()):
        assert granted == server
    if rights.notes:
        assert rights.reason is not None and rights.reason.startswith("undecidable token SID")


def test_network_token_well_known_sids() -> None:
    assert readable(sd(allow("S-1-5-2")), p(ALICE), rules=NET)  # NETWORK
    assert not readable(sd(deny("S-1-5-2"), allow(ALICE)), p(ALICE), rules=NET)
    assert not readable(sd(allow("S-1-5-4")), p(ALICE), rules=NET)  # INTERACTIVE: never over the network
    assert readable(sd(deny("S-1-5-4"), allow(ALICE)), p(ALICE), rules=NET)


def test_a_builtin_group_holding_authenticated_users_grants_everyone() -> None:
    """BUILTIN\\Users and Pre-Windows 2000 Compatible Access hold Authenticated Users: tokenGroups
    never says so, the server's token does."""
    assert readable(sd(allow(PRE2000)), p(ALICE), rules=NET)
    assert not readable(sd(deny(USERS), allow(ALICE)), p(ALICE), rules=NET)
    d = explain_read(sd(allow(USERS)), p(ALICE), rules=NET)
    assert d.readable and d.route is not None and "BUILTIN\\Users" in d.route


def test_a_local_group_deny_is_never_lost() -> None:
    dacl = sd(deny(LOCAL_READERS), allow("S-1-5-11"))
    assert not readable(dacl, p(ALICE, RH), rules=NET)  # RH is a member of the server's local group
    assert not readable(dacl, p(BOB), rules=NET)  # BOB through BUILTIN\Administrators, itself a member
    assert readable(dacl, p(ALICE), rules=NET)
    d = explain_read(dacl, p(BOB), rules=NET)
    assert d.deciding_ace == deny(LOCAL_READERS) and d.decided_by == frozenset({f"sid:{BOB}"})


def test_unknown_local_groups_close_a_deny_and_open_no_allow() -> None:
    unknown = TokenRules.network(None, primary_domain="S-1-5-21-1-2-3", problem="SAMR refused")
    rights = compile_read(sd(deny(LOCAL_READERS), allow("S-1-5-11")), rules=unknown)
    assert not rights.readable_by(p(ALICE)) and "SAMR refused" in (rights.reason or "")
    assert not readable(sd(allow(USERS)), p(ALICE), rules=unknown)
    assert readable(sd(allow(ALICE), deny(USERS)), p(ALICE), rules=unknown)  # the allow came first


def test_undecidable_deny_closes_from_its_position() -> None:
    dacl = sd(allow(RH), deny(NTLM), allow("S-1-5-11"))
    rights = compile_read(dacl, rules=NET)
    assert rights.readable_by(p(RH)) and not rights.readable_by(p(ALICE))
    assert rights.reason is not None and "NTLM Authentication (S-1-5-64-10)" in rights.reason
    assert "applied to everyone" in rights.reason
    assert read_acl(dacl, rules=NET).reason == rights.reason
    assert not compile_read(sd(allow(NTLM)), rules=NET).readable_by(p(ALICE))


def test_this_organization_as_configured() -> None:
    dacl = sd(allow("S-1-5-15"))
    assert not readable(dacl, p(ALICE), rules=NET)
    assert readable(dacl, p(ALICE), rules=TokenRules.network(_GROUPS, account_domain="S-1-5-21-9-9-9", this_organization=True))
    assert not readable(sd(deny("S-1-5-15"), allow(ALICE)), p(ALICE), rules=TokenRules.network(_GROUPS, account_domain="S-1-5-21-9-9-9", this_organization=True))
    assert readable(sd(deny("S-1-5-15"), allow(ALICE)), p(ALICE), rules=TokenRules.network(_GROUPS, account_domain="S-1-5-21-9-9-9", this_organization=False))


# --- inheritance -----------------------------------------------------------------------------------
def test_file_takes_object_inherit_aces_only() -> None:
    parent = sd(allow(RH, READ, OICI), allow(ALICE, READ, CONTAINER_INHERIT_ACE), allow(ADMINS, FULL, OBJECT_INHERIT_ACE), allow(STAGIAIRES))
    child = inherit(parent, (), child_is_container=False, protected=False)
    assert child.dacl == (allow(RH, READ, INHERITED_ACE), allow(ADMINS, FULL, INHERITED_ACE))
    assert read_acl(child).allow == bare(RH, ADMINS)


def test_folder_takes_container_inherit_effective_and_object_inherit_as_inherit_only() -> None:
    parent = sd(allow(RH, READ, OICI), allow(ALICE, READ, CONTAINER_INHERIT_ACE), allow(ADMINS, FULL, OBJECT_INHERIT_ACE))
    folder = inherit(parent, (), child_is_container=True, protected=False)
    assert folder.dacl == (
        allow(RH, READ, OICI | INHERITED_ACE),
        allow(ALICE, READ, CONTAINER_INHERIT_ACE | INHERITED_ACE),
        allow(ADMINS, FULL, OBJECT_INHERIT_ACE | INHERIT_ONLY_ACE | INHERITED_ACE),
    )
    assert read_acl(folder, is_container=True).allow == bare(RH, ALICE)  # ADMINS only for the files
    file = inherit(folder, (), child_is_container=False, protected=False)
    assert read_acl(file).allow == bare(RH, ADMINS)  # the CI-only ACE does not reach files
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
    assert read_acl(file).allow == bare(RH, ALICE, ADMINS)
    sub = inherit(parent, (), child_is_container=True, protected=False)
    assert allow(RH, READ, INHERITED_ACE) in sub.dacl  # effective, inheritance flags cleared
    assert all(a.sid != ALICE for a in sub.dacl)  # OI|NP: only the parent's own files
    grandchild = inherit(sub, (), child_is_container=False, protected=False)
    assert read_acl(grandchild).allow == bare(ADMINS)
    assert read_acl(inherit(sub, (), child_is_container=True, protected=False)).allow == bare(ADMINS)


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


def test_well_known_members_of_a_non_builtin_local_group_are_undecided() -> None:
    """BUILTIN groups take Authenticated Users into every token; a domain-local (or member-server)
    group holding it does on Windows, not on a Samba DC: ancre can't tell."""
    dl = "S-1-5-21-1-2-3-2200"
    groups = LocalGroups({dl: frozenset({"S-1-5-11", RH}), USERS: frozenset({"S-1-5-11"})}, origin="test")
    dc = TokenRules.network(groups, account_domain="S-1-5-21-1-2-3", primary_domain="S-1-5-21-1-2-3")
    assert readable(sd(allow(dl)), p(ALICE, dl), rules=dc)  # tokenGroups says alice is a member
    assert not readable(sd(allow(dl)), p(BOB), rules=dc)  # only through Authenticated Users: undecided
    assert not readable(sd(deny(dl), allow(BOB)), p(BOB), rules=dc)
    assert readable(sd(allow(USERS)), p(BOB), rules=dc)  # BUILTIN: decided


def test_a_configured_list_of_local_groups_is_not_complete() -> None:
    """Where SAMR was not read, a local SID the configuration does not name stays undecided."""
    stated = TokenRules.network(LocalGroups({LOCAL_READERS: frozenset({RH})}, complete=False),
                                account_domain="S-1-5-21-9-9-9", primary_domain="S-1-5-21-1-2-3")
    other = "S-1-5-21-9-9-9-1002"
    assert not readable(sd(deny(other), allow("S-1-5-11")), p(ALICE), rules=stated)
    assert readable(sd(deny(other), allow("S-1-5-11")), p(ALICE), rules=NET)  # SAMR's complete list: a local account
    assert not readable(sd(deny(LOCAL_READERS), allow("S-1-5-11")), p(RH), rules=stated)
