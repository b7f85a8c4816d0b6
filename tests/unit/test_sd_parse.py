"""Hand-built self-relative security descriptors (MS-DTYP 2.4.6) through ``acl.sd_parse``: exact
rights when well formed (padding after the last ACE included), *nobody* when truncated, overrunning
or holding an ACE the engine does not understand."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from smbprotocol.security_descriptor import (
    AccessAllowedAce,
    AccessDeniedAce,
    AclPacket,
    SDControl,
    SIDPacket,
    SMB2CreateSDBuffer,
)

from ancre.acl.engine import READ, AceType, read_acl
from ancre.acl.sd_parse import acl_from_descriptor, parse_security_descriptor, parse_sid
from ancre.errors import AclError
from ancre.models import Acl

DOM = "S-1-5-21-1004336348-1177238915-682003330"
DIRECTION, TECH, STAG = f"{DOM}-1101", f"{DOM}-1102", f"{DOM}-1103"
ADMINS, EVERYONE = "S-1-5-32-544", "S-1-1-0"
FULL = 0x001F01FF
SELF_RELATIVE, DACL_PRESENT, DACL_PROTECTED = 0x8000, 0x0004, 0x1000


def p(*sids: str) -> frozenset[str]:
    return frozenset(f"sid:{s}" for s in sids)


# ---------------------------------------------------------------- a byte-level builder
def sid_bytes(sid: str) -> bytes:
    parts = sid.split("-")
    subs = [int(x) for x in parts[3:]]
    return struct.pack("<BB", 1, len(subs)) + int(parts[2]).to_bytes(6, "big") + struct.pack(f"<{len(subs)}I", *subs)


def ace(ace_type: int, sid: str, mask: int = READ, flags: int = 0, *, body: bytes | None = None, extra: bytes = b"") -> bytes:
    """One ACE: header + (``body`` or mask + SID) + ``extra`` (application data), padded to 4."""
    payload = body if body is not None else struct.pack("<I", mask) + sid_bytes(sid)
    payload += extra
    payload += b"\0" * (-(len(payload) + 4) % 4)
    return struct.pack("<BBH", ace_type, flags, 4 + len(payload)) + payload


def acl(*aces: bytes, count: int | None = None, padding: bytes = b"", revision: int = 2) -> bytes:
    body = b"".join(aces) + padding
    return struct.pack("<BBHHH", revision, 0, 8 + len(body), len(aces) if count is None else count, 0) + body


def sd(
    dacl: bytes | None,
    *,
    owner: str | None = ADMINS,
    group: str | None = f"{DOM}-513",
    control: int = SELF_RELATIVE | DACL_PRESENT,
    revision: int = 1,
) -> bytes:
    """Header, owner, group, then the DACL at the end (so any truncation cuts into a referenced part)."""
    buf = b""
    offs = []
    for part in (sid_bytes(owner) if owner else None, sid_bytes(group) if group else None, dacl):
        if part is None:
            offs.append(0)
            continue
        offs.append(20 + len(buf))
        buf += part
    off_owner, off_group, off_dacl = offs
    return struct.pack("<BBHIIII", revision, 0, control, off_owner, off_group, 0, off_dacl) + buf


ALLOW, DENY = AceType.ACCESS_ALLOWED, AceType.ACCESS_DENIED
CLIENTS_FILE_DACL = (  # test-deny-explicite.docx as Samba stores it
    ace(DENY, STAG, READ),
    ace(ALLOW, ADMINS, FULL, 0x10),
    ace(ALLOW, DIRECTION, READ, 0x10),
    ace(ALLOW, TECH, READ, 0x10),
)


# ---------------------------------------------------------------- well-formed
def test_descriptor_built_by_smbprotocol_round_trips() -> None:
    def sidp(s: str) -> SIDPacket:
        x = SIDPacket()
        x.from_string(s)
        return x

    deny, allow = AccessDeniedAce(), AccessAllowedAce()
    deny["mask"], deny["sid"] = READ, sidp(STAG)
    allow["mask"], allow["sid"], allow["ace_flags"] = READ, sidp(TECH), 0x10
    dacl = AclPacket()
    dacl["aces"] = [deny, allow]
    buf = SMB2CreateSDBuffer()
    buf["control"].set_flag(SDControl.SELF_RELATIVE)
    buf.set_owner(sidp(ADMINS))
    buf.set_group(sidp(f"{DOM}-513"))
    buf.set_dacl(dacl)

    parsed = parse_security_descriptor(buf.pack())
    assert (parsed.owner, parsed.group, parsed.protected) == (ADMINS, f"{DOM}-513", False)
    assert [(a.type, a.sid, a.mask, a.flags) for a in parsed.dacl or ()] == [(DENY, STAG, READ, 0), (ALLOW, TECH, READ, 0x10)]
    assert read_acl(parsed) == Acl(p(TECH), p(STAG))


def test_the_deny_file_reads_as_its_aces_say() -> None:
    raw = sd(acl(*CLIENTS_FILE_DACL))
    result = acl_from_descriptor(raw)
    assert result == Acl(p(ADMINS, DIRECTION, TECH), p(STAG))
    chloe = p(TECH, STAG, EVERYONE)
    bruno = p(TECH, EVERYONE)
    assert not result.readable_by(chloe) and result.readable_by(bruno)


@pytest.mark.parametrize(
    "padding",
    [b"\0" * 4, b"\xff" * 12, ace(ALLOW, EVERYONE, READ), ace(DENY, TECH, READ) + b"\0" * 8],
    ids=["zeros", "garbage", "an-allow-everyone-ace", "a-deny-ace-and-zeros"],
)
def test_padding_after_the_last_ace_is_ignored(padding: bytes) -> None:
    exact = acl_from_descriptor(sd(acl(*CLIENTS_FILE_DACL)))
    padded = sd(acl(*CLIENTS_FILE_DACL, padding=padding))
    parsed = parse_security_descriptor(padded)
    assert len(parsed.dacl or ()) == 4  # parsed by AceCount, as Windows does
    result = acl_from_descriptor(padded)
    assert result == exact and result.reason is None
    assert EVERYONE not in {s[4:] for s in result.allow}


def test_null_dacl_is_everyone_and_empty_dacl_is_nobody() -> None:
    absent = sd(None, control=SELF_RELATIVE)  # SE_DACL_PRESENT unset
    present_no_offset = sd(None, control=SELF_RELATIVE | DACL_PRESENT)  # NULL DACL, OffsetDacl 0
    for raw in (absent, present_no_offset):
        assert parse_security_descriptor(raw).dacl is None
        assert acl_from_descriptor(raw) == Acl(p(EVERYONE))
    empty = acl_from_descriptor(sd(acl()))
    assert parse_security_descriptor(sd(acl())).dacl == ()
    assert empty.allow == frozenset() and empty.reason == "empty DACL: nobody"


def test_protected_owner_group_and_no_owner() -> None:
    parsed = parse_security_descriptor(sd(acl(ace(ALLOW, TECH)), owner=None, group=None, control=SELF_RELATIVE | DACL_PRESENT | DACL_PROTECTED))
    assert parsed.protected and parsed.owner is None and parsed.group is None


def test_inherit_only_aces_do_not_apply_to_the_object() -> None:
    raw = sd(acl(ace(ALLOW, TECH, READ, 0x08 | 0x03), ace(ALLOW, DIRECTION, READ, 0x03)))
    assert acl_from_descriptor(raw) == Acl(p(DIRECTION))


def test_sid_with_a_48_bit_authority() -> None:
    raw = struct.pack("<BB", 1, 1) + (2**40).to_bytes(6, "big") + struct.pack("<I", 7)
    assert parse_sid(raw, 0, len(raw), "x") == ("S-1-0x010000000000-7", 12)


# ---------------------------------------------------------------- malformed → nobody
def test_every_truncation_is_nobody() -> None:
    raw = sd(acl(*CLIENTS_FILE_DACL))
    for n in range(len(raw)):
        with pytest.raises(AclError):
            parse_security_descriptor(raw[:n])
        result = acl_from_descriptor(raw[:n])
        assert result.allow == frozenset() and result.reason and result.reason.startswith("acl_unreadable:"), n


def test_ace_overrunning_the_acl_is_nobody() -> None:
    good = acl(*CLIENTS_FILE_DACL)
    # the last ACE claims 8 more bytes than the ACL holds; the buffer itself goes on (a group SID after it)
    last = 8 + sum(len(a) for a in CLIENTS_FILE_DACL[:-1])
    bad = bytearray(good)
    struct.pack_into("<H", bad, last + 2, len(CLIENTS_FILE_DACL[-1]) + 8)
    raw = sd(bytes(bad) + sid_bytes(EVERYONE))
    with pytest.raises(AclError, match="overruns the ACL"):
        parse_security_descriptor(raw)
    assert acl_from_descriptor(raw).allow == frozenset()


def test_more_aces_counted_than_the_acl_holds_is_nobody() -> None:
    raw = sd(acl(*CLIENTS_FILE_DACL, count=5))
    with pytest.raises(AclError, match="overruns the ACL"):
        parse_security_descriptor(raw)
    # zero padding read as a fifth ACE: AceSize 0 is invalid
    raw = sd(acl(*CLIENTS_FILE_DACL, count=5, padding=b"\0" * 16))
    with pytest.raises(AclError, match="invalid AceSize 0"):
        parse_security_descriptor(raw)


def test_sid_overrunning_its_ace_is_nobody() -> None:
    body = struct.pack("<I", READ) + sid_bytes(TECH)
    short = struct.pack("<BBH", ALLOW, 0, 4 + 12) + body[:12]  # AceSize says 16, the SID needs 24
    raw = sd(acl(short, padding=body[12:] + b"\0" * 4))
    with pytest.raises(AclError, match=r"SID .* overruns"):
        parse_security_descriptor(raw)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b.__setitem__(0, 2), "revision 2"),
        (lambda b: struct.pack_into("<H", b, 2, DACL_PRESENT), "not self-relative"),
        (lambda b: struct.pack_into("<I", b, 4, 4000), "owner: SID at offset 4000"),
        (lambda b: struct.pack_into("<I", b, 4, 8), "points into the descriptor header"),
        (lambda b: struct.pack_into("<I", b, 16, 10), "DACL: offset 10 points into"),
        (lambda b: b.__setitem__(20, 3), "SID revision 3"),
        (lambda b: b.__setitem__(21, 16), "16 sub-authorities"),
    ],
    ids=["sd-revision", "absolute", "owner-offset-out", "owner-in-header", "dacl-in-header", "sid-revision", "sid-too-long"],
)
def test_malformed_headers_and_sids_are_errors(mutate, message: str) -> None:
    raw = bytearray(sd(acl(*CLIENTS_FILE_DACL)))
    mutate(raw)
    with pytest.raises(AclError, match=message):
        parse_security_descriptor(bytes(raw))
    assert acl_from_descriptor(bytes(raw)).allow == frozenset()


@pytest.mark.parametrize("revision", [2, 3, 4], ids=["ACL_REVISION", "ACL_REVISION3", "ACL_REVISION_DS"])
def test_acl_revisions_2_3_and_4_read_the_same(revision: int) -> None:
    """winnt.h: MIN_ACL_REVISION 2 … MAX_ACL_REVISION 4; smbcacls --set writes 3."""
    result = acl_from_descriptor(sd(acl(*CLIENTS_FILE_DACL, revision=revision)))
    assert result.reason is None and result == acl_from_descriptor(sd(acl(*CLIENTS_FILE_DACL)))
    assert p(STAG) <= result.deny and p(TECH) <= result.allow


@pytest.mark.parametrize("revision", [0, 1, 5, 7, 0xFF])
def test_acl_revisions_outside_2_to_4_are_malformed(revision: int) -> None:
    with pytest.raises(AclError, match=f"ACL revision {revision} \\(expected 2, 3 or 4\\)"):
        parse_security_descriptor(sd(acl(*CLIENTS_FILE_DACL, revision=revision)))
    closed = acl_from_descriptor(sd(acl(*CLIENTS_FILE_DACL, revision=revision)))
    assert closed.allow == frozenset() and (closed.reason or "").startswith("acl_unreadable: DACL: ACL revision")


def test_bad_acl_revision_and_unaligned_ace_size() -> None:
    with pytest.raises(AclError, match="ACL revision 7"):
        parse_security_descriptor(sd(acl(*CLIENTS_FILE_DACL, revision=7)))
    odd = bytearray(acl(ace(ALLOW, TECH), padding=b"\0" * 8))
    struct.pack_into("<H", odd, 8 + 2, 26)  # not a multiple of 4
    with pytest.raises(AclError, match="invalid AceSize 26"):
        parse_security_descriptor(sd(bytes(odd)))


# ---------------------------------------------------------------- ACE types the engine does not understand
def _object_ace(ace_type: int, sid: str, *, with_guid: bool = True) -> bytes:
    flags = 0x1 if with_guid else 0
    body = struct.pack("<II", READ, flags) + (b"\x11" * 16 if with_guid else b"") + sid_bytes(sid)
    return ace(ace_type, sid, body=body)


def test_unknown_deny_type_ace_is_nobody() -> None:
    raw = sd(acl(_object_ace(AceType.ACCESS_DENIED_OBJECT, STAG), ace(ALLOW, TECH)))
    parsed = parse_security_descriptor(raw)
    assert parsed.dacl is not None and parsed.dacl[0].sid == STAG  # SID found after the object GUID
    result = acl_from_descriptor(raw)
    assert result.allow == frozenset()
    assert "deny-type" in (result.reason or "") and "ACCESS_DENIED_OBJECT" in (result.reason or "")


@pytest.mark.parametrize("ace_type", [AceType.ACCESS_DENIED_CALLBACK, AceType.ACCESS_ALLOWED_CALLBACK])
def test_conditional_ace_is_nobody(ace_type: int) -> None:
    condition = b"artx" + b"\x01\x02\x03\x04"  # application data of a conditional ACE (MS-DTYP 2.4.4.17)
    raw = sd(acl(ace(ace_type, TECH, READ, extra=condition), ace(ALLOW, DIRECTION)))
    assert parse_security_descriptor(raw).dacl[0].sid == TECH  # type: ignore[index]
    result = acl_from_descriptor(raw)
    assert result.allow == frozenset() and "conditional/callback" in (result.reason or "")


def test_unknown_ace_code_is_nobody() -> None:
    raw = sd(acl(ace(0x2A, TECH), ace(ALLOW, DIRECTION)))
    result = acl_from_descriptor(raw)
    assert result.allow == frozenset() and "unknown type 0x2A" in (result.reason or "")


def test_unknown_allow_type_aces_are_ignored() -> None:
    compound = ace(AceType.ACCESS_ALLOWED_COMPOUND, EVERYONE, body=struct.pack("<IHH", READ, 1, 0) + sid_bytes(EVERYONE) + sid_bytes(TECH))
    raw = sd(acl(_object_ace(AceType.ACCESS_ALLOWED_OBJECT, EVERYONE, with_guid=False), compound, ace(DENY, STAG), ace(ALLOW, TECH)))
    assert acl_from_descriptor(raw) == Acl(p(TECH), p(STAG))


# ---------------------------------------------------------------- never raises, never opens
@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mutated_descriptors_never_raise_and_never_widen_to_everyone(data: st.DataObject) -> None:
    raw = bytearray(sd(acl(*CLIENTS_FILE_DACL)))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    result = acl_from_descriptor(bytes(raw[:cut]))
    assert isinstance(result, Acl)
    if result.reason is not None and result.reason.startswith("acl_unreadable"):
        assert result.allow == frozenset()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_raise(raw: bytes) -> None:
    assert isinstance(acl_from_descriptor(raw), Acl)


