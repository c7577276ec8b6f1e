# ruff: noqa: E501 - seed tables read best one case per line
"""Fuzz target ``service_bodies``: the memory service's wire bodies (records, parts, filters,
grants, recall requests), as the HTTP face and the MCP tools hand them over.

Input: the bytes of a request body. Two paths, both of the real service:

* **HTTP**: the guard's strict decode (:func:`palimpsest.canonical.decode` with trailing white
  space and floats, as ``api/guard.py`` runs it), then the edge's pydantic model
  (``Remember``, ``Revise``, ``Recall``, ``GrantPut``; strict, unknown fields refused) and
  ``wire.dump``, then the service's validator (:mod:`palimpsest.service.wire`:
  ``record_draft``, ``recall_request``, ``principal``/``privileges``);
* **MCP**: the same document parsed as the MCP SDK parses JSON-RPC (``pydantic_core.from_json``:
  ``NaN``/``Infinity`` pass, a duplicate key keeps its last value) straight to the service
  validators the tools call, and to the filter, content and reference grammars on their own.

Expected refusals: ``InvalidInput`` with code ``invalid-json`` (strict decode) or
``memory_invalid`` (every service validator, and the edge's pydantic refusal as the 422 words
it: ``api/app.py``'s message from the first error). Anything else is a finding.

Oracle for an accepted body: what the service accepted is storable — the record body it becomes
(``merge_draft``) and every accepted recall request and filter encode as canonical JSON (no lone
surrogate, no NaN reaches the store); content, reference, filter and recall bounds hold; a body
accepted by the HTTP path is accepted by the service with the same draft as the direct path; a
grant names one of the two principal kinds and only known privileges.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tests.fuzz.harness import Finding, Refused, Target, check, files, instrumented, refusals, texts

with instrumented():
    import pydantic_core
    from fastapi.exceptions import RequestValidationError
    from pydantic import BaseModel, ValidationError

    from palimpsest import canonical
    from palimpsest.api import wire as edge
    from palimpsest.api.app import _validation_error
    from palimpsest.errors import InvalidInput
    from palimpsest.service import wire
    from palimpsest.service.model import PRIVILEGES, ContentPart
    from palimpsest.service.wire import AllOf, AnyOf, Cond, Filter

DECODE = refusals({InvalidInput: {"invalid-json"}})
SERVICE = refusals({InvalidInput: {"memory_invalid"}})
EDGE = refusals({InvalidInput: {"memory_invalid"}})
REFUSALS = refusals({InvalidInput: {"invalid-json", "memory_invalid"}})


def _storable(value: Any, what: str) -> None:
    # canonical.encode refuses lone surrogates and non-finite floats with InvalidInput
    try:
        canonical.encode(value)
    except InvalidInput as error:
        raise Finding(f"{what} was accepted but cannot be stored: {error}") from error


def _part_wire(part: ContentPart) -> dict[str, Any]:
    return part.to_wire()


def _draft(body: Any, revise: bool) -> wire.RecordDraft | None:
    draft = SERVICE.attempt(wire.record_draft, body, revise=revise)
    if isinstance(draft, Refused):
        return None
    parts = tuple(p.part for p in draft.content) if draft.content is not None else None
    if parts is not None:
        check(len(parts) <= wire.MAX_PARTS, "more parts than the cap were accepted")
        check(all(len(p.text or "") <= wire.MAX_TEXT for p in parts), "an over-long part text")
        check(sum(len(p.text or "") for p in parts) <= 4 * wire.MAX_TEXT, "over-long content")
        _storable([_part_wire(p) for p in parts], "content")
    refs = draft.references or []
    check(len(refs) <= wire.MAX_REFERENCES, "more references than the cap were accepted")
    for rel in ("subject", "object"):
        check(sum(r.rel == rel for r in refs) <= 1, f"a second {rel} reference was accepted")
    _storable([[r.rel, r.memory_id, r.record_id] for r in refs], "references")
    if draft.attributes is not None:
        check(len(canonical.encode(draft.attributes)) <= wire.MAX_ATTRIBUTES_BYTES, "attributes")
    if draft.valid_from and draft.valid_to:
        check(draft.valid_from <= draft.valid_to, "valid_to before valid_from was accepted")
    _storable([draft.type, draft.title, draft.valid_from, draft.valid_to], "record fields")
    if not revise:
        body_ = SERVICE.attempt(wire.merge_draft, None, draft, parts)
        check(not isinstance(body_, Refused), "a remember body accepted by record_draft "
                                              "is refused by merge_draft")
    return draft


def _nodes(node: Filter, depth: int = 0) -> tuple[int, int]:
    if isinstance(node, Cond):
        return 1, depth
    counts = [_nodes(item, depth + 1) for item in node.items]
    return 1 + sum(c for c, _ in counts), max(d for _, d in counts)


def _filter(value: Filter) -> None:
    count, depth = _nodes(value)
    check(count <= wire.MAX_FILTER_NODES, "a filter over the node cap was accepted")
    check(depth <= wire.MAX_FILTER_DEPTH, "a filter over the depth cap was accepted")
    stack: list[Filter] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, AllOf | AnyOf):
            check(bool(node.items), "an empty and/or was accepted")
            stack.extend(node.items)
        else:
            check(node.op in wire.FILTER_OPS, "an unknown filter op was accepted")
            check(not isinstance(node.value, float) or math.isfinite(node.value),
                  "a non-finite filter value was accepted")
            _storable([node.field, node.op, node.value], "a filter condition")


def _recall(body: Any) -> wire.RecallRequest | None:
    req = SERVICE.attempt(wire.recall_request, body)
    if isinstance(req, Refused):
        return None
    check(1 <= req.limit <= wire.MAX_RECALL_LIMIT, "a recall limit out of range was accepted")
    check(bool((req.query or "").strip() or (req.text or "").strip() or req.filters),
          "a recall without any signal was accepted")
    if req.filters is not None:
        _filter(req.filters)
    _storable([req.query, req.text, req.as_of, list(req.types or ())], "a recall request")
    return req


def _grant(body: Any) -> None:
    def parse(b: Any) -> tuple[tuple[str, str], frozenset[str]]:
        b = wire.obj(b, "body", ("principal", "privileges"))
        return wire.principal(b.get("principal")), wire.privileges(b.get("privileges"))

    grant = SERVICE.attempt(parse, body)
    if not isinstance(grant, Refused):
        (kind, pid), privs = grant
        check(kind in ("member", "group"), "a grant to a provider or unknown kind was accepted")
        check(bool(privs) and privs <= set(PRIVILEGES), "an unknown privilege was accepted")
        _storable([kind, pid], "a grant principal")


def _validate(model: type[BaseModel], doc: Any) -> BaseModel:
    """The body model as FastAPI runs it, refusing with the message the 422 carries."""
    try:
        return model.model_validate(doc)
    except ValidationError as error:
        refusal = _validation_error(RequestValidationError(error.errors()))
        raise InvalidInput(refusal.message, code=refusal.code) from error


def _edge(model: type[BaseModel], doc: Any) -> Any:
    parsed = EDGE.attempt(_validate, model, doc)
    return parsed if isinstance(parsed, Refused) else edge.dump(parsed)


def _http(doc: Any) -> None:
    for model, revise in ((edge.Remember, False), (edge.Revise, True)):
        dumped = _edge(model, doc)
        if not isinstance(dumped, Refused):
            via_edge = _draft(dumped, revise)
            direct = SERVICE.attempt(wire.record_draft, doc, revise=revise)
            if via_edge is not None and not isinstance(direct, Refused):
                check(via_edge == direct, "the HTTP edge and the service disagree on a record")
    dumped = _edge(edge.Recall, doc)
    if not isinstance(dumped, Refused):
        _recall(dumped)
    dumped = _edge(edge.GrantPut, doc)
    if not isinstance(dumped, Refused):
        _grant(dumped)


def _lenient(data: bytes) -> tuple[bool, Any]:
    # The MCP SDK parses JSON-RPC with pydantic (jiter): NaN and Infinity pass, duplicate keys
    # keep the last value; lone surrogates and invalid UTF-8 are refused there.
    try:
        return True, pydantic_core.from_json(data)
    except ValueError:  # not even lenient JSON: nothing for the MCP path
        return False, None


def one_input(data: bytes) -> None:
    doc = DECODE.attempt(canonical.decode, data, trailing_whitespace=True, allow_floats=True)
    if not isinstance(doc, Refused):
        _http(doc)
    parsed, value = _lenient(data)
    if not parsed:
        return
    _draft(value, False)
    _draft(value, True)
    _recall(value)
    _grant(value)
    flt = SERVICE.attempt(wire.filter_expr, value)
    if not isinstance(flt, Refused):
        _filter(flt)
    parts = SERVICE.attempt(wire.content, value)
    if not isinstance(parts, Refused):
        check(len(parts) <= wire.MAX_PARTS, "more parts than the cap were accepted")
        _storable([_part_wire(p.part) for p in parts], "content")
    SERVICE.attempt(wire.references, value)


def _corpus(name: str) -> list[tuple[str, bytes]]:
    """The service corpus (``tests/adversarial/service/*.json``): one seed per named body."""
    out = []
    for path, data in files("service", pattern=name):
        for key, body in json.loads(data).items():
            out.append((f"{path}#{key}", canonical.encode(body)))
    return out


def _api_cases() -> list[tuple[str, bytes]]:
    """The HTTP corpus's bodies (``tests/adversarial/api/cases.json``), ``$repeat`` expanded."""

    def expand(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"$repeat"}:
                text, count = value["$repeat"]
                return text * count
            return {k: expand(v) for k, v in value.items()}
        if isinstance(value, list):
            return [expand(v) for v in value]
        return value

    (_, data), = files("api", pattern="cases.json")
    return [(f"api/cases.json#{case['id']}", canonical.encode(expand(case["body"])))
            for case in json.loads(data) if "body" in case]


_OK = '{"type":"fact","title":"t","content":[{"type":"text","text":"note","role":"user"},{"type":"x.vendor","n":1}],"attributes":{"k":"v"},"references":[{"rel":"subject","record_id":"hrec_a"}],"time":{"valid_from":"2026-01-01T00:00:00Z","valid_to":"2026-02-01T00:00:00+01:00"}}'


def seeds() -> list[tuple[str, bytes]]:
    return [
        *files("fuzz/service_bodies"),
        *_corpus("records_fail.json"),
        *_corpus("recall_fail.json"),
        *_api_cases(),
        *texts("service_bodies/literal", [
            _OK, '{"content":"plain"}', '{"title":"only a title"}', '{"content":"x","reason":"r"}',
            '{"title":"t2","reason":"typo"}', '{"content":[{"type":"file","file":{"id":"hfil_1"},"text":"t","text_source":"derived"}]}',
            '{"query":"architecture","limit":3}', '{"text":"x","filters":{"and":[{"field":"type","op":"eq","value":"fact"},{"or":[{"field":"attributes.a.b","op":"gte","value":1.5},{"field":"time.valid_from","op":"exists"}]}]},"types":["fact","x.v"],"as_of":"2026-01-01T00:00:00Z","include":"all","depth":2}',
            '{"principal":"member:hmbr_a","privileges":["read","write"]}', '{"principal":"group:hgrp_b","privileges":["delete"]}',
            '{"principal":"provider:x","privileges":["read"]}', '{"field":"type","op":"in","value":["fact","note"]}',
            '{"content":"\\ud800"}', '{"title":"\\udc80x"}', '{"query":"\\ud800"}', '{"attributes":{"k":"\\ud800"}}',
            '{"content":[{"type":"text","text":"\\udfff"}]}', '{"filters":{"field":"type","op":"eq","value":"\\ud800"}}',
            '{"filters":{"field":"type","op":"gt","value":NaN}}', '{"filters":{"field":"type","op":"eq","value":Infinity}}',
            '{"principal":"member:\\ud800","privileges":["read"]}', '{"references":[{"rel":"\\ud800","record_id":"r"}]}',
            '{"time":{"valid_from":"2026-01-01T00:00:00Z"},"content":"x"}', '{"time":{"valid_from":"\\ud800"},"content":"x"}',
            '{"content":"x","content":"y"}', '{"types":["fact"],"query":"q","limit":1e2}',
            '{"time":{"valid_from":"２０２６-01-01T00:00:00Z"},"content":"x"}',
            '[{"rel":"subject","record_id":"a"},{"rel":"object","record_id":"b"}]',
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="service_bodies",
    one_input=one_input,
    refusals=REFUSALS,
    seeds=seeds,
    classes=("A1", "A2", "A3", "F25"),
    runs=6_000,
    summary="service wire bodies: records, parts, filters, grants, recall (HTTP edge and MCP)",
    dictionary=(b'"content":[{"type":"text","text":"', b'"type":"file","file":{"id":"', b'"type":"x.',
                b'"references":[{"rel":"subject","record_id":"', b'"time":{"valid_from":"', b'"valid_to":"',
                b'"filters":{"and":[', b'"or":[', b'"field":"attributes.', b'"op":"in","value":[',
                b'"principal":"member:', b'"privileges":["read"', b'"limit":', b'"as_of":"', b'\\ud800',
                b"2026-01-01T00:00:00Z", b'"role":"tool"', b'"text_source":"derived"', b'"types":["'),
)

if __name__ == "__main__":
    TARGET.fuzz()
