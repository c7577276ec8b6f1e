# ruff: noqa: E501 - seed tables read best one case per line
"""Fuzz target ``changeset``: Memory Git changeset requests and their ops (memory-git.md §4, §13).

Input: the bytes of a ``POST /v1/changesets`` body, decoded as ``api/memory_git.py`` decodes
every Memory Git body (strict JSON, 1 MiB, floats allowed, trailing white space), then validated
by :func:`palimpsest.service.memorygit.ops.parse_request` for the credential's principal, its ref
name checked (``check_ref_name``) and its creating ops given ids (``assign_ids``) — the steps
``MemoryGit.create_changeset`` runs before it touches the store.

Expected refusals: ``InvalidInput`` with code ``invalid-json``, ``invalid-changeset``,
``empty-ops``, ``too-large``, ``unknown-field``, ``unknown-payload-key``, ``author-mismatch``,
``invalid-ref`` or ``invalid-op``. Anything else is a finding.

Oracle for an accepted request: the author is the credential's principal whatever the body
claims; the ops are within the cap; every op the boundary produced passes the second validation
(``check_stored_op``, run over the exact op about to become immutable) — the two validations
agree; the request digest (what an idempotent replay is compared by) can be computed and the
digest fields encode as canonical JSON; every creating op has a result id after ``assign_ids``.
"""

from __future__ import annotations

from tests.fuzz.harness import Refused, Target, check, files, instrumented, refusals, texts

with instrumented():
    from palimpsest import canonical
    from palimpsest.errors import InvalidInput
    from palimpsest.service import history
    from palimpsest.service.memorygit.ops import (
        MAX_BODY,
        MAX_OPS,
        ChangesetRequest,
        assign_ids,
        check_stored_op,
        parse_request,
    )
    from palimpsest.service.memorygit.repository import check_ref_name

PRINCIPAL = "member:hmbr_alice"
REFUSALS = refusals({InvalidInput: {
    "invalid-json", "invalid-changeset", "empty-ops", "too-large", "unknown-field",
    "unknown-payload-key", "author-mismatch", "invalid-ref", "invalid-op"}})  # fmt: skip
CREATING = ("add_memory", "supersede_memory", "correct_memory")


def _check(req: ChangesetRequest) -> None:
    check(req.author_principal == PRINCIPAL, "the author was taken from the body")
    check(0 < len(req.ops) <= MAX_OPS, "an op count outside 1 … MAX_OPS was accepted")
    for op in req.ops:
        again = REFUSALS.attempt(check_stored_op, op.op_type, op.target, op.result, op.payload)
        check(not isinstance(again, Refused), f"the stored-op check refuses what the boundary "
                                              f"accepted ({op.op_type})")
    digest = history.request_digest("changeset", req.project_id, req.digest_fields())
    check(len(digest) > 0, "no request digest")
    canonical.encode(req.digest_fields())
    if isinstance(REFUSALS.attempt(check_ref_name, req.ref_name), Refused):
        return
    ops = REFUSALS.attempt(assign_ids, req.project_id, PRINCIPAL, req.idempotency_key, req.ops)
    if isinstance(ops, Refused):
        return
    check(len(ops) == len(req.ops), "assign_ids changed the number of ops")
    for op in ops:
        check(op.op_type not in CREATING or bool(op.result), "a creating op has no result id")


def one_input(data: bytes) -> None:
    doc = REFUSALS.attempt(canonical.decode, data, max_bytes=MAX_BODY, allow_floats=True,
                           trailing_whitespace=True)
    if isinstance(doc, Refused):
        return
    req = REFUSALS.attempt(parse_request, doc, author_principal=PRINCIPAL)
    if not isinstance(req, Refused):
        _check(req)


_BASE = '{"project_id":"hmem_p","ref_name":"refs/agents/alice/main","idempotency_key":"k1","message":"m"'


def seeds() -> list[tuple[str, bytes]]:
    return [
        *files("fuzz/changeset"),
        *files("memory_git", pattern="*_fail.json"),
        *texts("changeset/literal", [
            _BASE + ',"ops":[{"op_type":"add_memory","payload":{"content":"x","kind":"fact","tags":["a"],"confidence":0.5}}]}',
            _BASE + ',"ops":[{"op_type":"add_memory","resulting_event_id":"hrec_x","payload":{"memory_id":"hrec_x","content":"x"}}]}',
            _BASE + ',"ops":[{"op_type":"add_memory","resulting_event_id":"hrec_x","payload":{"memory_id":"hrec_y","content":"x"}}]}',
            _BASE + ',"ops":[{"op_type":"supersede_memory","target_event_id":"hrec_a","payload":{"content":"y","reason":"r"}}],"expected_head":"hcs_1","parent_ids":["hcs_1"]}',
            _BASE + ',"ops":[{"op_type":"add_memory","payload":{"content":"x","confidence":1.0}}],"author_principal":"member:hmbr_alice"}',
            _BASE + ',"ops":[{"op_type":"add_memory","payload":{"content":"x","confidence":0.00001}}]}',
            _BASE + ',"ops":[{"op_type":"add_memory","payload":{"content":"x","confidence":1e-5}}]}',
            _BASE + ',"ops":[{"op_type":"add_memory","payload":{"content":"x"}}],"author_principal":"member:mallory"}',
            _BASE + ',"ops":[{"op_type":"add_memory","payload":{"content":"x","protected":true}}],"evidence":[{"kind":"url","value":"https://x"}],"verification":[{"check":"ci"}]}',
            _BASE + ',"ops":[{"op_type":"add_memory","payload":{"content":"x"}}],"persona_id":"p","session_id":"s","surface":"cli"}',
            _BASE.replace("refs/agents/alice/main", "refs/shared/../../x") + ',"ops":[{"op_type":"add_memory","payload":{"content":"x"}}]}',
            _BASE + ',"ops":[{"op_type":"add_memory","payload":{"content":"x","tags":["   "]}}]}',
            _BASE + ',"ops":[{"op_type":"add_memory","payload":{"content":"x"}}],"schema_version":2}',
            _BASE + ',"ops":[]}', _BASE + ',"ops":[{"op_type":"add_memory","ordinal":-1}]}',
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="changeset",
    one_input=one_input,
    refusals=REFUSALS,
    seeds=seeds,
    classes=("A1", "A2", "A3", "C14"),
    runs=10_000,
    summary="Memory Git changeset requests and ops: parse_request, ref names, the second op check",
    dictionary=(b'"op_type":"add_memory"', b'"op_type":"supersede_memory"', b'"op_type":"correct_memory"',
                b'"target_event_id":"', b'"resulting_event_id":"', b'"payload":{', b'"confidence":',
                b'"tags":["', b'"memory_id":"', b'"event_id":"', b'"protected":true', b'"evidence":[{',
                b'"ref_name":"refs/shared/', b'"ref_name":"refs/topics/', b'"expected_head":"', b'"ordinal":'),
)

if __name__ == "__main__":
    TARGET.fuzz()
