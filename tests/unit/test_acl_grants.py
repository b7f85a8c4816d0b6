"""``Acl`` as a disjunction of grants (models.Grant, Acl.of): exact evaluation, expiry, the
prefilter's soundness, payload round trip — against a reference model written here."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from ancre.models import Acl, ChunkPayload, Grant

PRINCIPALS = [f"sid:S-1-5-21-9-{n}" for n in range(6)]
NOW = 1_800_000_000.0

grant_st = st.builds(
    Grant,
    st.frozensets(st.sampled_from(PRINCIPALS), max_size=3),
    st.frozensets(st.sampled_from(PRINCIPALS), max_size=3),
    st.one_of(st.none(), st.sampled_from([NOW - 1, NOW, NOW + 1])),
)
user_st = st.frozensets(st.sampled_from(PRINCIPALS), max_size=4)


def reference(grants: list[Grant], user: frozenset[str], now: float) -> bool:
    """Readable iff some grant admits: allow hit, no deny hit, not yet expired; nothing for ∅."""
    if not user:
        return False
    return any(
        bool(g.allow & user) and not (g.deny & user) and (g.expires is None or now < g.expires) for g in grants
    )


@settings(max_examples=400, deadline=None)
@given(st.lists(grant_st, max_size=4), user_st)
def test_acl_of_grants_matches_the_reference_model(grants: list[Grant], user: frozenset[str]) -> None:
    acl = Acl.of(grants)
    assert acl.readable_by(user, NOW) == reference(grants, user, NOW)
    # the prefilter (allow/deny alone) is a necessary condition: it never refuses a reader
    if acl.readable_by(user, NOW):
        assert acl.allow & user and not (acl.deny & user)
    # the payload round trip keeps the decision
    payload = ChunkPayload(
        source="s", doc_id="s:1", path="a", filename="a", location="", chunk_index=0, text="t",
        acl_allow=tuple(sorted(acl.allow)), acl_deny=tuple(sorted(acl.deny)),
        content_hash="h", indexed_at=0.0, acl_grants=acl.grants_payload(),
    )
    again = ChunkPayload.from_dict(payload.to_dict())
    assert again.acl() == acl
    assert again.readable_by(user, NOW) == reference(grants, user, NOW)


def test_one_plain_grant_is_a_plain_acl_with_the_old_digest() -> None:
    acl = Acl.of([Grant(frozenset({"sid:A"}), frozenset({"sid:B"}))])
    assert acl == Acl(frozenset({"sid:A"}), frozenset({"sid:B"}))
    assert acl.exact_prefilter and acl.grants_payload() == ()
    assert acl.digest() == Acl(frozenset({"sid:A"}), frozenset({"sid:B"})).digest()


def test_an_explicit_allow_before_an_inherited_deny_is_kept() -> None:
    # allow A (no deny before it), then deny B, then allow C: a member of A and B reads (the
    # allow came first); a member of B and C does not; the plain set model refused both.
    acl = Acl.of([Grant(frozenset({"sid:A"})), Grant(frozenset({"sid:C"}), frozenset({"sid:B"}))])
    assert acl.readable_by(frozenset({"sid:A", "sid:B"}))
    assert not acl.readable_by(frozenset({"sid:B", "sid:C"}))
    assert acl.readable_by(frozenset({"sid:C"}))
    assert acl.deny == frozenset()  # the prefilter cannot carry B: only the grants decide
    assert not acl.exact_prefilter


def test_an_expired_grant_admits_nobody_from_that_instant() -> None:
    soon = time.time() + 3600
    acl = Acl.of([Grant(frozenset({"sid:A"}), expires=soon)])
    assert acl.readable_by(frozenset({"sid:A"}))
    assert not acl.readable_by(frozenset({"sid:A"}), now=soon)
    assert Acl.of([Grant(frozenset({"sid:A"}), expires=time.time() - 1)]).readable_by(frozenset({"sid:A"})) is False


def test_digest_tells_grants_apart() -> None:
    a = Acl.of([Grant(frozenset({"sid:A"})), Grant(frozenset({"sid:C"}), frozenset({"sid:B"}))])
    b = Acl.of([Grant(frozenset({"sid:A"}), frozenset({"sid:B"})), Grant(frozenset({"sid:C"}), frozenset({"sid:B"}))])
    assert a.digest() != b.digest()
    assert a.allow == b.allow


def test_malformed_stored_grants_fail_closed() -> None:
    payload = ChunkPayload(
        source="s", doc_id="s:1", path="a", filename="a", location="", chunk_index=0, text="t",
        acl_allow=("sid:A",), acl_deny=(), content_hash="h", indexed_at=0.0,
        acl_grants=({"deny": ["sid:B"]},),
    )
    assert not payload.readable_by(frozenset({"sid:A"}))
    assert payload.acl().reason
