# ruff: noqa: E501, UP031 - seed tables read best one case per line (JSON templates: % keeps braces single)
"""Fuzz target ``record_request``: the strict request documents of ``pal memory … --input`` and
of the MCP write tools (``RecordRequestV0``, ``LifecycleRequestV0``).

Input: the bytes of a request file, parsed by :func:`palimpsest.hn.author.parse_record_request`
as ``pal memory record --input`` does and, again, as ``pal memory handoff --at … --input``
does; an accepted request then becomes the envelope the CLI would sign
(:func:`encode_envelope` for Alice's stream, the same validation ``author.append`` runs). The
same bytes are parsed as a retract and as a challenge request
(:func:`palimpsest.hn.submit.parse_lifecycle_request`) and an accepted one signed as that
operation against a fixed target.

Expected refusals: ``InvalidInput`` with code ``invalid-json``, ``invalid-request`` or
``invalid-memory`` (the envelope rules); ``Forbidden`` with ``actor-mismatch`` when the request
names another actor. Anything else is a finding.

Oracle for an accepted request: the signed bytes decode (``decode_envelope``) back to the same
record, handoff mode fills and keeps ``--at``/``--applies``, topics come out trimmed, lower-cased,
sorted and unique, and a request written back from the record parses to the same record. For a
lifecycle request: a retract never carries evidence, the reason comes out trimmed and
lower-cased, and the signed envelope decodes to the same operation, target, reason and evidence.
"""

from __future__ import annotations

from typing import Any

from tests.fuzz.harness import Refused, Target, check, files, instrumented, refusals, texts

with instrumented():
    from palimpsest.canonical import encode
    from palimpsest.errors import Forbidden, InvalidInput
    from palimpsest.hn.author import RecordRequest, parse_record_request, with_stream
    from palimpsest.hn.envelope import (
        PROTOCOL,
        Envelope,
        Record,
        decode_envelope,
        default_stream,
        encode_envelope,
        record_wire,
    )
    from palimpsest.hn.submit import LifecycleRequest, parse_lifecycle_request
    from palimpsest.text import to_lower, trim_space
    from tests.adversarial.fuzz.builder import ALICE, ANCHOR, TIMESTAMP

PARSE_REFUSALS = refusals({InvalidInput: {"invalid-json", "invalid-request", "invalid-memory"}})
SIGN_REFUSALS = refusals(
    {InvalidInput: {"invalid-memory"}, Forbidden: {"actor-mismatch"}}
)
HANDOFF_AT = "e" * 40
TARGET_ID = "sha256:" + "ab" * 32


def _envelope(request: RecordRequest) -> Envelope:
    return Envelope(
        protocol=PROTOCOL, operation="record", actor=ALICE.actor, actor_name=ALICE.name,
        public_key=ALICE.public_key_text,
        stream=with_stream(request, ALICE) or default_stream(ALICE.actor),
        sequence=1, timestamp=TIMESTAMP, record=request.record,
    )  # fmt: skip


def _request_doc(record: Record) -> dict[str, Any]:
    doc: dict[str, Any] = {"version": 0, **record_wire(record)}
    return doc


def _signed(request: RecordRequest) -> None:
    payload = SIGN_REFUSALS.attempt(lambda: encode_envelope(_envelope(request)))
    if isinstance(payload, Refused):
        return
    again = decode_envelope(payload)
    check(again.record == request.record, "the signed envelope does not carry the request")
    topics = request.record.topics
    check(list(topics) == sorted(set(topics)), "topics are not sorted and unique")
    reparsed = parse_record_request(encode(_request_doc(request.record)))
    check(reparsed.record == request.record, "a request written from the record parses differently")


def _lifecycle(data: bytes, operation: str) -> None:
    parsed = PARSE_REFUSALS.attempt(parse_lifecycle_request, data, operation)
    if isinstance(parsed, Refused):
        return
    assert isinstance(parsed, LifecycleRequest)
    check(operation == "challenge" or not parsed.evidence, "a retract carried evidence")
    check(parsed.reason == to_lower(trim_space(parsed.reason)), "reason is not normalised")
    envelope = Envelope(
        protocol=PROTOCOL, operation=operation, actor=ALICE.actor, actor_name=ALICE.name,
        public_key=ALICE.public_key_text, stream=parsed.stream or default_stream(ALICE.actor),
        sequence=1, timestamp=TIMESTAMP, target=TARGET_ID, reason=parsed.reason,
        evidence=parsed.evidence,
    )  # fmt: skip
    payload = SIGN_REFUSALS.attempt(lambda: encode_envelope(envelope))
    if isinstance(payload, Refused):
        return
    again = decode_envelope(payload)
    check((again.operation, again.target, again.reason, again.evidence)
          == (operation, TARGET_ID, parsed.reason, parsed.evidence),
          "the signed lifecycle envelope does not carry the request")


def one_input(data: bytes) -> None:
    _lifecycle(data, "retract")
    _lifecycle(data, "challenge")
    plain = PARSE_REFUSALS.attempt(parse_record_request, data)
    if not isinstance(plain, Refused):
        _signed(plain)
    handoff = PARSE_REFUSALS.attempt(
        parse_record_request, data, handoff_at=HANDOFF_AT, handoff_applies="descendants"
    )
    if not isinstance(handoff, Refused):
        check(handoff.record.kind == "handoff", "handoff input of another kind was accepted")
        check(handoff.record.anchor.commit == HANDOFF_AT, "handoff anchor is not --at")
        check(handoff.record.applicability.mode == "descendants", "handoff mode is not --applies")
        _signed(handoff)


_OK = (
    '{"version":0,"kind":"observation","content":"note","anchor":{"commit":"%s"},'
    '"applicability":{"mode":"descendants"},"topics":[" Memory ","arch"],"evidence":[]}' % ANCHOR
)
_HANDOFF = (
    '{"version":0,"kind":"handoff","content":"over","topics":[],"evidence":[],'
    '"handoff":{"completed":["a"],"assumptions":[],"blockers":[],"nextActions":["b"]}}'
)


def seeds() -> list[tuple[str, bytes]]:
    return [
        *files("fuzz/record_request"),
        *texts("record_request/literal", [
            _OK, _HANDOFF, _OK.replace('"version":0', '"version":1'),
            _OK.replace('"topics"', '"actor":"%s","topics"' % ALICE.actor),
            _OK.replace('"topics"', '"actor":"%s","topics"' % ("f" * 64)),
            _OK.replace('"evidence":[]', '"evidence":[],"stream":"sha256:%s"' % ("0" * 64)),
            _OK.replace("observation", "attempt").replace('"evidence"', '"attemptOutcome":"ok","evidence"'),
            _HANDOFF.replace('}}', '},"anchor":{"commit":"%s"}}' % ("e" * 40)),
            _OK + "\n", _OK + " x",
            '{"version":0,"reason":" Incorrect "}', '{"version":0,"reason":"incorrect","evidence":[]}',
            '{"version":0,"reason":"evidence-mismatch","evidence":["git:%s"]}' % ANCHOR,
            '{"version":0,"reason":"bad reason!"}', '{"version":0}',
            '{"version":0,"reason":"incorrect","actor":"%s","stream":"sha256:%s"}' % (ALICE.actor, "0" * 64),
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="record_request",
    one_input=one_input,
    refusals=PARSE_REFUSALS,
    seeds=seeds,
    classes=("A1", "A2", "F22"),
    runs=20_000,
    summary="pal memory record|handoff|supersede|retract|challenge --input (and the MCP write "
            "tools): request documents to a signed envelope",
    dictionary=(b'"handoff":{', b'"attemptOutcome":"', b'"subject":"issue:sha256:',
                b'"mode":"subject"', b'"stream":"sha256:', b'"actor":"', b'"paths":[{"path":"',
                b'"reason":"'),
)

if __name__ == "__main__":
    TARGET.fuzz()
