"""Self-relative SECURITY_DESCRIPTOR bytes (as an SMB2 QUERY_INFO returns them) → the ACL engine's
:class:`~ancre.acl.engine.SecurityDescriptor`, with every bound checked.

Layouts from [MS-DTYP]: SECURITY_DESCRIPTOR 2.4.6 (20-byte header: Revision, Sbz1, Control,
OffsetOwner, OffsetGroup, OffsetSacl, OffsetDacl), SID 2.4.2.2, ACL 2.4.5 (8-byte header: AclRevision,
Sbz1, AclSize, AceCount, Sbz2), ACE_HEADER 2.4.4.1 and the ACE bodies 2.4.4.2-2.4.4.17.

Checks (any failure raises :class:`~ancre.errors.AclError`, which callers turn into *nobody*):

- the header is complete, Revision is 1 and the descriptor is self-relative (SE_SELF_RELATIVE);
- every non-zero offset lies after the header and its SID/ACL lies wholly inside the buffer;
- a SID has revision 1, at most 15 sub-authorities and fits where it is;
- the DACL's AclRevision is 2, 3 or 4 (winnt.h ACL_REVISION2…ACL_REVISION4, MIN_ACL_REVISION to
  MAX_ACL_REVISION; MS-DTYP 2.4.5 names 2, ACL_REVISION, and 4, ACL_REVISION_DS; Samba's
  ``smbcacls --set`` writes 3 — the ACE layout is the same in all three), its AclSize covers at least its header and stays in the
  buffer, and its AceCount ACEs are read one after another, each with an AceSize that is a
  multiple of 4, at least its header, inside the ACL (an ACE overrunning the ACL is an error) and
  large enough for the SID its type places in it.

As Windows does, the ACEs are parsed *by AceCount*: bytes after the last ACE up to AclSize are
padding and ignored. The SACL is not requested over SMB and is not read.

Why not smbprotocol's ``SMB2CreateSDBuffer``/``AclPacket`` for the unpacking: they slice without
checking that an ACE stays inside its ACL or that offsets stay inside the buffer, and ``SIDPacket``
reads only the low 32 bits of the 48-bit identifier authority. The format is fixed-size fields
read with :mod:`struct` here; the constants are smbprotocol's.
"""

from __future__ import annotations

import struct

from smbprotocol.security_descriptor import SDControl

from ancre.acl.engine import Ace, AceType, SecurityDescriptor, read_acl
from ancre.errors import AclError
from ancre.models import Acl

SD_HEADER_SIZE = 20
"""Bytes of the self-relative SECURITY_DESCRIPTOR header (MS-DTYP 2.4.6)."""
ACL_HEADER_SIZE = 8
"""Bytes of the ACL header (MS-DTYP 2.4.5)."""
ACE_HEADER_SIZE = 4
"""Bytes of ACE_HEADER (MS-DTYP 2.4.4.1)."""
SID_MAX_SUB_AUTHORITIES = 15
"""MS-DTYP 2.4.2.2: SubAuthorityCount is at most 15."""
ACL_REVISIONS = (0x02, 0x03, 0x04)
"""ACL_REVISION (2), ACL_REVISION3 and ACL_REVISION_DS (4): winnt.h's MIN_ACL_REVISION to
MAX_ACL_REVISION (MS-DTYP 2.4.5 documents 2 and 4; Samba's smbcacls writes 3). Revision 1 and
anything above 4 are malformed."""
NULL_SID = "S-1-0-0"
"""Stands for the trustee of an ACE whose type this parser cannot lay out (the engine then makes
the object *nobody*: such an ACE is not understood)."""

ACE_OBJECT_TYPE_PRESENT = 0x1
ACE_INHERITED_OBJECT_TYPE_PRESENT = 0x2

_OBJECT_ACE_TYPES = frozenset(
    {
        AceType.ACCESS_ALLOWED_OBJECT,
        AceType.ACCESS_DENIED_OBJECT,
        AceType.SYSTEM_AUDIT_OBJECT,
        AceType.SYSTEM_ALARM_OBJECT,
        AceType.ACCESS_ALLOWED_CALLBACK_OBJECT,
        AceType.ACCESS_DENIED_CALLBACK_OBJECT,
        AceType.SYSTEM_AUDIT_CALLBACK_OBJECT,
        AceType.SYSTEM_ALARM_CALLBACK_OBJECT,
    }
)
"""ACE types laid out as Mask, Flags, [ObjectType], [InheritedObjectType], Sid (MS-DTYP 2.4.4.3+)."""


def parse_sid(data: bytes, offset: int, end: int, what: str) -> tuple[str, int]:
    """The SID at ``data[offset:end]`` as ``"S-1-…"`` and its length in bytes (8 + 4 × count).

    Raises :class:`AclError` naming ``what`` when it does not fit before ``end`` or is malformed.
    """
    if offset + 8 > end:
        raise AclError(f"{what}: SID at offset {offset} is truncated (needs 8 bytes, {max(end - offset, 0)} left)")
    revision, count = data[offset], data[offset + 1]
    if revision != 1:
        raise AclError(f"{what}: SID revision {revision} at offset {offset} (expected 1)")
    if count > SID_MAX_SUB_AUTHORITIES:
        raise AclError(f"{what}: SID at offset {offset} has {count} sub-authorities (max {SID_MAX_SUB_AUTHORITIES})")
    size = 8 + 4 * count
    if offset + size > end:
        raise AclError(f"{what}: SID at offset {offset} overruns its bounds ({size} bytes, {end - offset} left)")
    authority = int.from_bytes(data[offset + 2 : offset + 8], "big")
    subs = struct.unpack_from(f"<{count}I", data, offset + 8)
    auth = str(authority) if authority < 2**32 else f"0x{authority:012X}"
    return "-".join(["S-1", auth, *(str(s) for s in subs)]), size


def _ace_sid_offset(ace_type: int, data: bytes, pos: int, ace_end: int, where: str) -> int | None:
    """Offset of the trustee SID inside the ACE at ``pos``; ``None`` for a type of unknown layout."""
    if ace_type in _OBJECT_ACE_TYPES:
        if pos + 12 > ace_end:
            raise AclError(f"{where}: object ACE too short for its flags")
        (obj_flags,) = struct.unpack_from("<I", data, pos + 8)
        off = pos + 12
        if obj_flags & ACE_OBJECT_TYPE_PRESENT:
            off += 16
        if obj_flags & ACE_INHERITED_OBJECT_TYPE_PRESENT:
            off += 16
        return off
    if ace_type == AceType.ACCESS_ALLOWED_COMPOUND:
        return pos + 12  # Mask, CompoundAceType, Reserved, ServerSid, ClientSid
    if ace_type <= max(AceType):
        return pos + 8  # Mask, Sid (plain, callback, mandatory label, resource attribute, scoped policy)
    return None


def _parse_acl(data: bytes, offset: int, what: str) -> tuple[Ace, ...]:
    if offset < SD_HEADER_SIZE:
        raise AclError(f"{what}: offset {offset} points into the descriptor header")
    if offset + ACL_HEADER_SIZE > len(data):
        raise AclError(f"{what}: ACL header at offset {offset} is truncated (descriptor is {len(data)} bytes)")
    revision, _sbz1, acl_size, ace_count, _sbz2 = struct.unpack_from("<BBHHH", data, offset)
    if revision not in ACL_REVISIONS:
        raise AclError(f"{what}: ACL revision {revision} (expected 2, 3 or 4)")
    if acl_size < ACL_HEADER_SIZE:
        raise AclError(f"{what}: AclSize {acl_size} is smaller than the ACL header")
    acl_end = offset + acl_size
    if acl_end > len(data):
        raise AclError(f"{what}: AclSize {acl_size} at offset {offset} overruns the descriptor ({len(data)} bytes): truncated")
    aces: list[Ace] = []
    pos = offset + ACL_HEADER_SIZE
    for i in range(ace_count):
        where = f"{what}: ACE {i + 1} of {ace_count} at offset {pos}"
        if pos + ACE_HEADER_SIZE > acl_end:
            raise AclError(f"{where}: header overruns the ACL (AclSize {acl_size})")
        ace_type, ace_flags, ace_size = struct.unpack_from("<BBH", data, pos)
        if ace_size < ACE_HEADER_SIZE or ace_size % 4:
            raise AclError(f"{where}: invalid AceSize {ace_size} (at least 4 and a multiple of 4)")
        ace_end = pos + ace_size
        if ace_end > acl_end:
            raise AclError(f"{where}: AceSize {ace_size} overruns the ACL (AclSize {acl_size})")
        if ace_size < 8:
            raise AclError(f"{where}: AceSize {ace_size} leaves no room for an access mask")
        (mask,) = struct.unpack_from("<I", data, pos + 4)
        sid_off = _ace_sid_offset(ace_type, data, pos, ace_end, where)
        if sid_off is None:
            # a type this parser can't lay out: keep it (with a stand-in trustee) so the engine,
            # which does not understand it either, decides — an unknown type makes it nobody
            try:
                sid, _ = parse_sid(data, pos + 8, ace_end, where)
            except AclError:
                sid = NULL_SID
        else:
            sid, _ = parse_sid(data, sid_off, ace_end, where)
        aces.append(Ace(ace_type, sid, mask, ace_flags))
        pos = ace_end
    # bytes between the last ACE and AclSize: padding, legal and ignored (parsed by AceCount)
    return tuple(aces)


def parse_security_descriptor(data: bytes) -> SecurityDescriptor:
    """Parse a self-relative SECURITY_DESCRIPTOR (MS-DTYP 2.4.6) into owner, group, DACL, protected.

    DACL: ``None`` (a NULL DACL: everyone) when SE_DACL_PRESENT is unset or OffsetDacl is 0;
    ``()`` (an empty DACL: nobody) when AceCount is 0; else the ACEs in order. Raises
    :class:`AclError` on any malformed or truncated part (see the module note for the checks).
    """
    data = bytes(data)
    if len(data) < SD_HEADER_SIZE:
        raise AclError(f"truncated security descriptor: {len(data)} bytes, the header alone is {SD_HEADER_SIZE}")
    revision, _sbz1, control, off_owner, off_group, _off_sacl, off_dacl = struct.unpack_from("<BBHIIII", data, 0)
    if revision != 1:
        raise AclError(f"security descriptor revision {revision} (expected 1)")
    if not control & SDControl.SELF_RELATIVE:
        raise AclError("security descriptor is not self-relative (SE_SELF_RELATIVE unset)")

    def sid_at(off: int, what: str) -> str | None:
        if off == 0:
            return None
        if off < SD_HEADER_SIZE:
            raise AclError(f"{what}: offset {off} points into the descriptor header")
        return parse_sid(data, off, len(data), what)[0]

    owner = sid_at(off_owner, "owner")
    group = sid_at(off_group, "group")
    dacl: tuple[Ace, ...] | None = None
    if control & SDControl.DACL_PRESENT and off_dacl != 0:
        dacl = _parse_acl(data, off_dacl, "DACL")
    return SecurityDescriptor(
        owner=owner, group=group, dacl=dacl, protected=bool(control & SDControl.DACL_PROTECTED)
    )


def acl_from_descriptor(data: bytes, *, is_container: bool = False) -> Acl:
    """Who may read, from raw descriptor bytes: :func:`parse_security_descriptor` then
    :func:`~ancre.acl.engine.read_acl`. A malformed descriptor gives
    ``Acl.nobody("acl_unreadable: <why>")``. Never raises."""
    try:
        sd = parse_security_descriptor(data)
    except AclError as e:
        return Acl.nobody(f"acl_unreadable: {e}")
    return read_acl(sd, is_container=is_container)


__all__ = ["acl_from_descriptor", "parse_security_descriptor", "parse_sid"]
