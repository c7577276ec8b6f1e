# ruff: noqa: E501 - seed tables read best one case per line
"""Fuzz target ``recall_request``: recall machine requests (``pal memory recall --input``, MCP).

Input: the bytes of a ``RecallRequestV0`` document. They go to
:func:`palimpsest.hn.recall.request.request_from_json` (the strict ``--input`` path) and, parsed by
Python's lenient ``json.loads`` as a JSON-RPC layer may hand them over (lone surrogates,
``NaN``, duplicate keys), to :func:`request_from_value` (the MCP tools' path).

Expected refusals: ``InvalidInput`` with code ``invalid-json`` (strict path only),
``invalid-recall-request`` or ``no-lexical-terms``. Anything else is a finding.

Oracle for an accepted request: normalisation is a fixed point (``request_wire`` of the result,
with ``lifecycle: ["all"]`` restored where it wrote none, parses to the same request, strictly
and through the value path), the recall and grep query
digests of it can be computed (every field encodes as UTF-8), bounds are 1 … 2⁶³−1, and lifecycle
and trust filters come out sorted and defaulted as §16.2 says.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fuzz.harness import Refused, Target, check, files, instrumented, refusals, texts

with instrumented():
    from palimpsest.canonical import encode
    from palimpsest.errors import InvalidInput
    from palimpsest.hn.recall.request import (
        LIFECYCLES,
        TRUSTS,
        GrepSpec,
        RecallRequest,
        query_digest,
        request_from_json,
        request_from_value,
        request_wire,
    )

STRICT_REFUSALS = refusals(
    {InvalidInput: {"invalid-json", "invalid-recall-request", "no-lexical-terms"}}
)
VALUE_REFUSALS = refusals({InvalidInput: {"invalid-recall-request", "no-lexical-terms"}})
SOURCES = "sha256:" + "1" * 64
POLICY = "sha256:" + "2" * 64


def _check(request: RecallRequest) -> None:
    wire = request_wire(request)  # the digest material: "all" lifecycles are written as none
    if not request.lifecycle:
        wire = {**wire, "lifecycle": ["all"]}
    check(request_from_value(wire) == request, "normalisation is not a fixed point")
    check(request_from_json(encode(wire)) == request, "the normalised request does not re-parse")
    query_digest(request, SOURCES, POLICY)
    query_digest(request, SOURCES, POLICY, GrepSpec("a+", ignore_case=True))
    for bound in (request.max_records, request.max_content_bytes):
        check(1 <= bound <= 2**63 - 1, "a bound out of range was accepted")
    check(list(request.lifecycle) == sorted(set(request.lifecycle)), "lifecycle not normalised")
    check(set(request.lifecycle) <= set(LIFECYCLES), "an unknown lifecycle was accepted")
    check(set(request.trust) <= set(TRUSTS), "an unknown trust class was accepted")
    check(request.include_untrusted or request.trust, "trust filter missing its default")


def _lenient(data: bytes) -> tuple[bool, Any]:
    try:
        return True, json.loads(data.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError):  # not even lenient JSON: nothing for the value path
        return False, None


def one_input(data: bytes) -> None:
    strict = STRICT_REFUSALS.attempt(request_from_json, data)
    if not isinstance(strict, Refused):
        _check(strict)
    parsed, value = _lenient(data)
    if parsed:
        lenient = VALUE_REFUSALS.attempt(request_from_value, value)
        if not isinstance(lenient, Refused):
            _check(lenient)
            if not isinstance(strict, Refused):
                check(lenient == strict, "the --input and MCP paths disagree")


A40 = "a" * 40
_BASE = f'{{"version":0,"atCommit":"{A40}"'


def seeds() -> list[tuple[str, bytes]]:
    return [
        *files("fuzz/recall_request"),
        *texts("recall_request/literal", [
            _BASE + "}",
            _BASE + ',"query":"memory architecture","maxRecords":3,"maxContentBytes":100}',
            _BASE + ',"topic":[" Memory "],"kind":["decision","handoff"],"actor":["%s"]}' % ("b" * 64),
            _BASE + ',"lifecycle":["all"],"trust":["qualified","policy-missing"]}',
            _BASE + ',"lifecycle":["superseded","active"],"includeUntrusted":true}',
            _BASE + ',"subject":"issue:sha256:%s","path":"src/a.py"}' % ("c" * 64),
            _BASE + ',"cursor":"eyJ2ZXJzaW9uIjowfQ.00"}',
            _BASE + ',"topic":["\\ud800"]}', _BASE + ',"query":"\\udc80 x"}',
            _BASE + ',"path":"a/\\udcff"}', _BASE + ',"maxRecords":NaN}',
            _BASE + ',"maxRecords":9223372036854775808}', _BASE + ',"query":"!!!"}',
            _BASE + ',"version":0}', f'{{"version":true,"atCommit":"{A40}"}}',
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="recall_request",
    one_input=one_input,
    refusals=STRICT_REFUSALS,
    seeds=seeds,
    classes=("A1", "A2", "E20"),
    runs=20_000,
    summary="RecallRequestV0 (--input strict JSON; MCP arguments after lenient JSON)",
    dictionary=(b'"lifecycle":["', b'"trust":["', b'"includeUntrusted":true', b'"topic":["',
                b'"kind":["', b'"actor":["', b'"subject":"issue:sha256:', b'"path":"', b'"query":"',
                b'"cursor":"', b'\\ud800', b'\\udc80', b"9223372036854775807", b"branching",
                b"dependency-missing", b"actor-untrusted", b"kind-untrusted", b"policy-missing"),
)

if __name__ == "__main__":
    TARGET.fuzz()
