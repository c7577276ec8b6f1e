# ruff: noqa: E501, UP031 - seed tables read best one case per line (JSON templates: % keeps braces single)
"""Fuzz target ``record_request``: ``pal memory record|handoff --input`` (``RecordRequestV0``).

Input: the bytes of a request file, parsed by :func:`palimpsest.hn.author.parse_record_request`
as ``pal memory record --input`` does and, again, as ``pal memory handoff --at … --input``
does; an accepted request then becomes the envelope the CLI would sign
(:func:`encode_envelope` for Alice's stream, the same validation ``author.append`` runs).

Expected refusals: ``InvalidInput`` with code ``invalid-json``, ``invalid-request`` or
``invalid-memory`` (the envelope rules); ``Forbidden`` with ``actor-mismatch`` when the request
names another actor. Anything else is a finding.

Oracle for an accepted request: the signed bytes decode (``decode_envelope``) back to the same
record, handoff mode fills and keeps ``--at``/``--applies``, topics come out trimmed, lower-cased,
sorted and unique, and a request written back from the record parses to the same record.
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
    from tests.adversarial.fuzz.builder import ALICE, ANCHOR, TIMESTAMP

PARSE_REFUSALS = refusals({InvalidInput: {"invalid-json", "invalid-request", "invalid-memory"}})
SIGN_REFUSALS = refusals(
    {InvalidInput: {"invalid-memory"}, Forbidden: {"actor-mismatch"}}
)
HANDOFF_AT = "e" * 40


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


def one_input(data: bytes) -> None:
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
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="record_request",
    one_input=one_input,
    refusals=PARSE_REFUSALS,
    seeds=seeds,
    classes=("A1", "A2", "F22"),
    runs=20_000,
    summary="pal memory record|handoff --input: RecordRequestV0 to a signed envelope",
    dictionary=(b'"handoff":{', b'"attemptOutcome":"', b'"subject":"issue:sha256:',
                b'"mode":"subject"', b'"stream":"sha256:', b'"actor":"', b'"paths":[{"path":"'),
)

if __name__ == "__main__":
    TARGET.fuzz()
