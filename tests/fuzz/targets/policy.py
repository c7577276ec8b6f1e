# ruff: noqa: E501, UP031 - seed tables read best one case per line (JSON templates: % keeps braces single)
"""Fuzz target ``policy``: ``.hn/policy.json`` at a query commit (hn-memory-v0.md §15).

Input: the bytes of the policy blob — a repository file anyone with push access (or a remote)
writes — parsed by :func:`palimpsest.hn.policy.parse_policy` through ``policy_context``.

Expected refusals: ``InvalidInput`` with code ``invalid-policy``. Anything else is a finding.

Oracle for an accepted policy: its digest is the memory ID of the exact bytes; trusted actors
are full actor IDs and trusted kinds known kinds; ``trust`` gives one of the four classes and
``qualified`` only for a trusted actor writing a trusted kind; and the same document re-encoded
canonically (other bytes, same JSON) gives the same memory policy.
"""

from __future__ import annotations

import hashlib
import re

from tests.fuzz.harness import Refused, Target, check, files, instrumented, refusals, texts

with instrumented():
    from palimpsest.canonical import decode, encode
    from palimpsest.errors import InvalidInput
    from palimpsest.hn.envelope import KINDS
    from palimpsest.hn.policy import TRUST_CLASSES, parse_policy, policy_context

REFUSALS = refusals({InvalidInput: {"invalid-policy"}})
_ACTOR = re.compile(r"[0-9a-f]{64}", re.ASCII)
A, B = "a" * 64, "b" * 64


def one_input(data: bytes) -> None:
    context = REFUSALS.attempt(policy_context, "c" * 40, data)
    if isinstance(context, Refused):
        return
    check(context.digest == "sha256:" + hashlib.sha256(data).hexdigest(), "digest of other bytes")
    memory = context.memory
    if memory is not None:
        check(all(_ACTOR.fullmatch(a) for a in memory.trusted_actors), "malformed trusted actor")
        check(memory.trusted_kinds <= set(KINDS), "unknown trusted kind")
    for actor in (A, B, *(memory.trusted_actors if memory else ())):
        for kind in KINDS:
            trust = context.trust(actor, kind)
            check(trust in TRUST_CLASSES, "trust outside the four classes")
            qualified = memory is not None and (
                actor in memory.trusted_actors and kind in memory.trusted_kinds
            )
            check((trust == "qualified") == qualified, "qualified without trusted actor and kind")
    again = parse_policy(encode(decode(data, trailing_whitespace=True)))
    check(again == memory, "the same document in other bytes gives another policy")


_POLICY = (
    '{"version":"hn.policy/0","maintainers":["%s"],"proposals":{"requiredApprovals":1,'
    '"requiredAccepts":1,"trustedReviewers":["%s"],"allowAuthorApproval":false},"pipelines":{},'
    '"memory":{"trustedActors":["%s","%s"],"trustedKinds":["decision","observation"]}}' % (A, B, A, B)
)


def seeds() -> list[tuple[str, bytes]]:
    return [
        *files("fuzz/policy"),
        *texts("policy/literal", [
            _POLICY, _POLICY.replace(',"memory":{', ',"x":{'), _POLICY.replace('"memory":{', '"memory":null,"y":{'),
            _POLICY.replace('"decision","observation"', '"observation","decision"'),
            _POLICY.replace('"requiredAccepts":1', '"requiredAccepts":2'),
            _POLICY.replace('"requiredApprovals":1', '"requiredApprovals":true'),
            _POLICY.replace("hn.policy/0", "nh.policy/0"), _POLICY + "\n", "\ufeff" + _POLICY,
            _POLICY.replace('"pipelines":{}', '"pipelines":{},"pipelines":{}'),
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="policy",
    one_input=one_input,
    refusals=REFUSALS,
    seeds=seeds,
    classes=("A1", "A2", "B7", "F24"),
    runs=20_000,
    summary=".hn/policy.json: strict JSON, maintainers, proposals, memory trust",
    dictionary=(b'"trustedActors":["', b'"trustedKinds":["', b'"maintainers":["', b'"memory":null',
                b'"allowAuthorApproval":true', b'"requiredAccepts":', b"hn.policy/0", A.encode()),
)

if __name__ == "__main__":
    TARGET.fuzz()
