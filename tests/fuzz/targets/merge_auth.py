# ruff: noqa: E501 - seed tables read best one case per line
"""Fuzz target ``merge_auth``: the ``memory-git-merge/v2`` merge authorization (memory-git.md §11).

Input: the UTF-8 text of the ``merge_authorization`` field of a protected-ref merge request (a
JSON string holding ``{"envelope": {…}, "signature": "<hex>"}``; the HTTP body around it is
strict JSON, so the text never holds a lone surrogate). It is verified twice by
:func:`palimpsest.service.memorygit.mergeauth.verify`: as sent, against a fixed request, and —
when its shape decodes — re-signed with the ring's key and checked against a request built from
its own fields, so the fuzzer reaches the checks after the signature (strategy, nonce, digest,
RFC 3339 times, lifetime, expiry) that a forged signature never gets to.

Expected refusals: ``InvalidInput`` with code ``invalid-json`` or ``merge-authorization`` (400);
``Forbidden`` with ``merge-authorization`` (unknown key id or bad signature, 403). Anything else
is a finding.

Oracle for an accepted envelope: version is ``memory-git-merge/v2``; it matches the request
field for field; the strategy is one of three; nonce and proposal digest are lower-case hex of
the right length; issued and expiry times are ASCII RFC 3339, ``issued < expires ≤ issued + 15
min``, issued no later than now + skew and now before expiry + skew; as sent, an accepted
envelope must carry the signature the ring computes (no forgery without the key).
"""

from __future__ import annotations

import hmac
import re

from tests.fuzz.harness import Refused, Target, check, files, instrumented, refusals, texts

with instrumented():
    from palimpsest.errors import Forbidden, InvalidInput
    from palimpsest.service.memorygit.mergeauth import (
        MAX_TTL_NS,
        SKEW_NS,
        STRATEGIES,
        VERSION,
        KeyRing,
        MergeEnvelope,
        MergeRequest,
        build,
        decode_wire,
        parse_time,
        sign,
        verify,
        wire,
    )

REFUSALS = refusals({InvalidInput: {"invalid-json", "merge-authorization"},
                     Forbidden: {"merge-authorization"}})
RING = KeyRing({"k1": b"k" * 32, "k2": b"second key, long enough for hmac!"}, active="k1")
NOW = 1_788_000_000 * 1_000_000_000  # 2026-08-29, fixed: the fuzzer must be deterministic
REQUEST = MergeRequest(project_id="hmem_p", ref_name="refs/shared/main", expected_head="hcs_a",
                       new_head="hcs_b", proposal_id="hprp_1", reviewer_principal="member:bob")
_ASCII_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})")


def _check(env: MergeEnvelope, request: MergeRequest) -> None:
    check(env.version == VERSION, "another version was accepted")
    for name in ("project_id", "ref_name", "expected_head", "new_head", "proposal_id",
                 "reviewer_principal"):
        check(getattr(env, name) == getattr(request, name), f"{name} does not match the request")
    check(env.strategy in STRATEGIES, "an unknown strategy was accepted")
    check(re.fullmatch(r"[0-9a-f]{32}", env.nonce) is not None, "a malformed nonce was accepted")
    check(re.fullmatch(r"[0-9a-f]{64}", env.proposal_digest) is not None, "a malformed digest")
    check(bool(env.merger_principal), "an empty merger was accepted")
    for stamp in (env.issued_at, env.expires_at):
        check(_ASCII_TIME.fullmatch(stamp) is not None, f"a time that is not ASCII RFC 3339 "
                                                        f"was accepted: {stamp!r}")
    issued, expires = parse_time(env.issued_at, "issued_at"), parse_time(env.expires_at, "e")
    check(issued < expires <= issued + MAX_TTL_NS, "a lifetime outside (0, 15 min] was accepted")
    check(issued <= NOW + SKEW_NS and expires + SKEW_NS > NOW, "a stale or future envelope")


def one_input(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return  # a strict JSON body cannot carry it: nothing reaches the verifier
    env = REFUSALS.attempt(verify, text, REQUEST, RING, NOW)
    if not isinstance(env, Refused):
        _check(env, REQUEST)
        _, signature = decode_wire(text)
        check(hmac.compare_digest(sign(env, RING), signature), "accepted without the key")
    shaped = REFUSALS.attempt(decode_wire, text)
    if isinstance(shaped, Refused):
        return
    envelope, _ = shaped
    if RING.get(envelope.key_id) is None:
        return
    own = MergeRequest(envelope.project_id, envelope.ref_name, envelope.expected_head,
                       envelope.new_head, envelope.proposal_id, envelope.reviewer_principal)
    resigned = REFUSALS.attempt(verify, wire(envelope, sign(envelope, RING)), own, RING, NOW)
    if not isinstance(resigned, Refused):
        _check(resigned, own)


def _built() -> list[str]:
    out = []
    for strategy, ttl in (("fast_forward", 600), ("merge_commit", 900), ("cherry_pick", 1)):
        _, text = build(REQUEST, proposal_digest="d" * 64, merger_principal="member:carol",
                        strategy=strategy, ring=RING, now_ns=NOW, ttl_ns=ttl * 1_000_000_000,
                        nonce="0" * 32)
        out.append(text)
    return out


def seeds() -> list[tuple[str, bytes]]:
    good = _built()
    first = good[0]
    return [
        *files("fuzz/merge_auth"),
        *texts("merge_auth/built", good),
        *texts("merge_auth/literal", [
            first.replace('"k1"', '"k2"'), first.replace('"k1"', '"nope"'),
            first.replace("memory-git-merge/v2", "memory-git-merge/v1"),
            first.replace("2026-08-29T", "２０２６-08-29T"), first.replace("Z\",\"nonce", "+01:00\",\"nonce"),
            first.replace("Z\",\"nonce", "+24:00\",\"nonce"), first.replace(".", ".1234567891", 1),
            first.replace('"fast_forward"', '"rebase"'), first.replace('"signature":"', '"signature":"0'),
            first.replace('"nonce":"', '"nonce":"A'), first.replace('"merger_principal":"member:carol"', '"merger_principal":""'),
            first.replace('{"envelope":', '{"extra":1,"envelope":'), first.replace('"key_id":"k1"', '"key_id":"k1","x":"y"'),
            first.replace('"key_id":"k1"', '"key_id":1'), first[:-1], "\"" + first + "\"", "null", "[]", "{}",
            first.replace("2026-08-29T", "2026-02-30T"), first.replace("2026-08-29T", "9999-12-31T"),
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="merge_auth",
    one_input=one_input,
    refusals=REFUSALS,
    seeds=seeds,
    classes=("A1", "A3", "B4"),
    runs=10_000,
    summary="memory-git-merge/v2: decode_wire, HMAC, request match, times and lifetime",
    dictionary=(b'"envelope":{', b'"signature":"', b'"version":"memory-git-merge/v2"', b'"key_id":"k1"',
                b'"key_id":"k2"', b'"strategy":"merge_commit"', b'"issued_at":"', b'"expires_at":"',
                b"2026-08-29T", b"T23:59:60", b".123456789", b"+01:00", b"-23:59", b'"nonce":"'),
)

if __name__ == "__main__":
    TARGET.fuzz()
