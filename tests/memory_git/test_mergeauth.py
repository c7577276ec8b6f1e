"""memory-git-merge/v2: exact bytes, HMAC, TTL, tolerance, rotation, single-field mutations."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from palimpsest.errors import Forbidden, InvalidInput
from palimpsest.service.memorygit import mergeauth
from palimpsest.service.memorygit.mergeauth import KeyRing, MergeRequest
from tests.memory_git import refenvelope as ref

KEY_A = b"A" * 32
KEY_B = bytes(range(40))
NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
NOW_NS = int(NOW.timestamp()) * 1_000_000_000
REQ = MergeRequest(project_id="hmem_<&>proj", ref_name="refs/shared/main",
                   expected_head="0190-a", new_head="0190-b", proposal_id="prop-1",
                   reviewer_principal="member:rev")
RING = KeyRing({"k2": KEY_B, "k1": KEY_A}, active="k2")


def fields(**over: str) -> dict[str, str]:
    issued, expires = ref.times(NOW)
    base = {
        "version": "memory-git-merge/v2", "project_id": REQ.project_id,
        "ref_name": REQ.ref_name, "expected_head": REQ.expected_head,
        "new_head": REQ.new_head, "proposal_id": REQ.proposal_id,
        "proposal_digest": "ab" * 32, "reviewer_principal": REQ.reviewer_principal,
        "merger_principal": "member:rev", "strategy": "fast_forward", "issued_at": issued,
        "expires_at": expires, "nonce": "0f" * 16, "key_id": "k1",
    }
    base.update(over)
    return ref.envelope(**base)


def signed(env: dict[str, str], key: bytes = KEY_A) -> str:
    return ref.wire(env, ref.signature(env, key))


def test_independent_envelope_is_accepted() -> None:
    env = fields()
    got = mergeauth.verify(signed(env), REQ, RING, NOW_NS)
    assert got.to_wire() == env


def test_signing_bytes_match_the_reference_exactly() -> None:
    env = fields(project_id="p<&>é\u2028x", merger_principal="member:ünï")
    mine = mergeauth.MergeEnvelope(**env)
    assert mine.signing_bytes() == ref.canonical_bytes(env)
    assert b"<&>" in mine.signing_bytes() and b"\\u2028" in mine.signing_bytes()
    assert mergeauth.sign(mine, RING) == ref.signature(env, KEY_A)


def test_production_builder_output_verifies_with_the_reference_signer() -> None:
    env, wire = mergeauth.build(REQ, proposal_digest="cd" * 32, merger_principal="member:m",
                                strategy="merge_commit", ring=RING, now_ns=NOW_NS)
    doc = json.loads(wire)
    assert list(doc["envelope"]) == list(ref.ORDER)
    assert doc["envelope"]["key_id"] == "k2"
    assert doc["signature"] == ref.signature(doc["envelope"], KEY_B)
    assert env.to_wire() == doc["envelope"]


@pytest.mark.parametrize("name", ref.ORDER)
def test_every_single_field_mutation_is_rejected(name: str) -> None:
    env = fields()
    wire_ok = signed(env)
    mutated = dict(env)
    original = mutated[name]
    mutated[name] = original[:-1] + ("0" if original[-1:] != "0" else "1") if original else "x"
    tampered = ref.wire(mutated, json.loads(wire_ok)["signature"])
    with pytest.raises((Forbidden, InvalidInput)):
        mergeauth.verify(tampered, REQ, RING, NOW_NS)


@pytest.mark.parametrize("name", ["project_id", "ref_name", "expected_head", "new_head",
                                  "proposal_id", "reviewer_principal"])
def test_envelope_must_match_the_request(name: str) -> None:
    env = fields(**{name: "something-else"})
    with pytest.raises(InvalidInput, match="does not match"):
        mergeauth.verify(signed(env), REQ, RING, NOW_NS)


def test_signature_mutation_and_wrong_key_are_forbidden() -> None:
    env = fields()
    sig = ref.signature(env, KEY_A)
    bad = sig[:-1] + ("0" if sig[-1] != "0" else "1")
    with pytest.raises(Forbidden, match="invalid merge authorization"):
        mergeauth.verify(ref.wire(env, bad), REQ, RING, NOW_NS)
    with pytest.raises(Forbidden, match="invalid merge authorization"):
        mergeauth.verify(signed(env, b"Z" * 32), REQ, RING, NOW_NS)
    with pytest.raises(Forbidden):
        mergeauth.verify(signed(fields(key_id="retired"), KEY_A), REQ, RING, NOW_NS)


def test_rotation_old_and_new_keys_verify() -> None:
    mergeauth.verify(signed(fields(key_id="k1"), KEY_A), REQ, RING, NOW_NS)
    mergeauth.verify(signed(fields(key_id="k2"), KEY_B), REQ, RING, NOW_NS)
    rotated = KeyRing({"k2": KEY_B})
    with pytest.raises(Forbidden):
        mergeauth.verify(signed(fields(key_id="k1"), KEY_A), REQ, rotated, NOW_NS)


def test_single_key_ring_uses_the_empty_key_id() -> None:
    ring = KeyRing({"": KEY_A})
    mergeauth.verify(signed(fields(key_id=""), KEY_A), REQ, ring, NOW_NS)


def test_short_keys_are_refused() -> None:
    with pytest.raises(InvalidInput, match="32 bytes"):
        KeyRing({"k": b"x" * 31})
    with pytest.raises(InvalidInput):
        KeyRing.from_spec("k1=" + "a" * 40 + ",k1=" + "b" * 40)


S = 1_000_000_000


@pytest.mark.parametrize(("now_offset", "ok"), [
    (0, True),
    (-60 * S, True),            # issued 60 s in the future: at the tolerance edge
    (-61 * S, False),           # beyond the tolerance
    (10 * 60 * S, True),        # at expiry, inside the 60 s grace
    (11 * 60 * S - 1, True),
    (11 * 60 * S, False),       # expires + 60 s reached
])
def test_time_window(now_offset: int, ok: bool) -> None:
    wire = signed(fields())
    if ok:
        mergeauth.verify(wire, REQ, RING, NOW_NS + now_offset)
    else:
        with pytest.raises(InvalidInput):
            mergeauth.verify(wire, REQ, RING, NOW_NS + now_offset)


def test_ttl_over_fifteen_minutes_is_refused_even_when_signed() -> None:
    issued, expires = ref.times(NOW, timedelta(minutes=15, seconds=1))
    with pytest.raises(InvalidInput, match="15 minutes"):
        mergeauth.verify(signed(fields(issued_at=issued, expires_at=expires)), REQ, RING,
                         NOW_NS)
    issued, expires = ref.times(NOW, timedelta(minutes=15))
    mergeauth.verify(signed(fields(issued_at=issued, expires_at=expires)), REQ, RING, NOW_NS)


@pytest.mark.parametrize("over", [
    {"version": "memory-git-merge/v1"},
    {"strategy": "rebase"},
    {"nonce": "0F" * 16},
    {"nonce": "0f" * 15},
    {"proposal_digest": "AB" * 32},
    {"merger_principal": ""},
    {"issued_at": "2026-11-29 12:00:00Z"},
    # full-width digits: Go reads ASCII only (merge_auth fuzz target, fullwidth-digits-in-issued-at)
    {"issued_at": "\uff12\uff10\uff12\uff16-11-29T12:00:00Z"},
    {"expires_at": "2026-11-29T12:0\u0665:00Z"},
    {"expires_at": "2026-11-29T11:00:00Z"},
])
def test_malformed_signed_envelopes_are_refused(over: dict[str, str]) -> None:
    with pytest.raises(InvalidInput):
        mergeauth.verify(signed(fields(**over)), REQ, RING, NOW_NS)


def test_fractional_and_offset_times_parse() -> None:
    issued = "2026-11-29T13:00:00.123456789+01:00"
    expires = "2026-11-29T12:05:00.5Z"
    mergeauth.verify(signed(fields(issued_at=issued, expires_at=expires)), REQ, RING, NOW_NS)
    assert mergeauth.parse_time(issued, "t") == NOW_NS + 123456789


@pytest.mark.parametrize("text", [
    "[]", "{}", '{"envelope":{},"signature":"x"}',
    '{"envelope":{"version":1},"signature":"x"}',
    '{"envelope":{},"signature":"x","extra":1}',
])
def test_malformed_wire_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput):
        mergeauth.verify(text, REQ, RING, NOW_NS)


def test_unknown_envelope_field_is_refused() -> None:
    env = {**fields(), "extra": "x"}
    with pytest.raises(InvalidInput, match="unknown"):
        mergeauth.verify(ref.wire(env, ref.signature(fields(), KEY_A)), REQ, RING, NOW_NS)
