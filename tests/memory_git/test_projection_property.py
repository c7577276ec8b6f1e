"""Property: the projection of any head equals replaying its changesets from scratch.

Random histories are built through the real service and SQLite store: several owned refs,
random valid ops of all eight kinds, and merge commits joining refs. For every head the test
keeps the state it computed *incrementally* (parent state + this changeset, as the writer saw
it) and checks it against a from-scratch replay of what storage returns (digest-verified reads,
DAG walk), and against a minimal independent model of which memories are active.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from palimpsest.errors import InvalidInput
from palimpsest.service.memorygit import projection as gitproject
from palimpsest.service.memorygit.projection import Projection
from palimpsest.service.memorygit.repository import GitService
from tests.memory_git.helpers import make_flow

P = "hmem_prop"
ME = "member:alice"
REFS = ("refs/agents/alice/a", "refs/agents/alice/b", "refs/agents/alice/c")

step = st.one_of(
    st.tuples(st.just("commit"), st.integers(0, 2),
              st.lists(st.tuples(st.integers(0, 7), st.integers(0, 50), st.integers(0, 50)),
                       min_size=1, max_size=4)),
    st.tuples(st.just("merge"), st.integers(0, 2), st.integers(0, 2)),
)


def make_op(state: Projection, kind: int, a: int, b: int, n: int) -> dict[str, Any]:
    ids = sorted(state.memories)
    if kind == 0 or not ids:
        return {"op_type": "add_memory", "payload": {"content": f"memory {n} {a}",
                                                     "kind": "fact", "tags": [f"t{b}"]}}
    x, y = ids[a % len(ids)], ids[b % len(ids)]
    if kind == 1:
        return {"op_type": "correct_memory", "target_event_id": x,
                "payload": {"content": f"corrected {n}"}}
    if kind == 2:
        return {"op_type": "supersede_memory", "target_event_id": x,
                "payload": {"content": f"superseding {n}"}}
    if kind == 3 and x != y:
        return {"op_type": "mark_duplicate", "payload": {"duplicate_id": x, "duplicate_of": y}}
    if kind == 4 and x != y:
        return {"op_type": "add_relationship",
                "payload": {"kind": "about", "from_memory_id": x, "to_memory_id": y}}
    if kind == 5:
        return {"op_type": "propose_deprecation", "target_event_id": x,
                "payload": {"reason": f"stale {n}"}}
    op_type = "attach_evidence" if kind == 6 else "attach_verification"
    return {"op_type": op_type, "target_event_id": x, "payload": {"source": f"s{n}"}}


def model_active(changesets: list[Any]) -> set[str]:
    """Independent minimal model: which memory ids are active after these changesets."""
    active: set[str] = set()
    for cs in changesets:
        for op in cs.ops:
            payload = op.payload or {}
            if op.op_type == "add_memory":
                active.add(op.result)
            elif op.op_type in ("correct_memory", "supersede_memory"):
                active.discard(op.target)
                active.add(op.result)
            elif op.op_type == "mark_duplicate":
                active.discard(payload["duplicate_id"])
    return active


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=12))
def test_projection_equals_replay(steps: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        flow, access, _ = make_flow(Path(tmp))
        access.allow(ME, P, "read", "write")
        git = flow.git
        root = git.init(ME, P)["ref"]["head_changeset_id"]
        for name in REFS:
            git.create_branch(ME, P, {"ref_name": name, "head_changeset_id": root})
        incremental: dict[str, Projection] = {root: gitproject.replay(P, [git.load(root)])}
        for n, item in enumerate(steps):
            if item[0] == "commit":
                ref = REFS[item[1]]
                head = git.get_ref(ME, P, ref)["head_changeset_id"]
                state = incremental[head].copy()
                ops = [make_op(state, kind, a, b, n) for kind, a, b in item[2]]
                try:
                    cs, _ = git.create_changeset(ME, {
                        "project_id": P, "ref_name": ref, "expected_head": head,
                        "idempotency_key": f"k{n}", "message": "m", "ops": ops})
                except InvalidInput:
                    continue  # a generated op broke a rule: refused, nothing written
                gitproject.apply_changeset(state, git.load(cs["changeset_id"]))
                incremental[cs["changeset_id"]] = state
            else:
                left = git.get_ref(ME, P, REFS[item[1]])["head_changeset_id"]
                right = git.get_ref(ME, P, REFS[item[2]])["head_changeset_id"]
                if left == right or left in git.ancestors(right) or right in git.ancestors(left):
                    continue
                try:
                    merge = git.commit_server(ME, P, REFS[item[1]], parents=(left, right),
                                              message="merge", key=f"merge{n}")
                except InvalidInput:
                    continue
                git.store.advance(P, REFS[item[1]], left, merge.id, git.now())
                # Merge state: both parents' incremental states must agree with the union.
                incremental[merge.id] = git.project_parents(P, (left, right))
                for parent in (left, right):
                    mine = incremental[parent].snapshot()["memories"]
                    union = incremental[merge.id].snapshot()["memories"]
                    assert set(mine) <= set(union)
        # From scratch: a second service over the same store has no cache at all.
        cold = GitService(git.store, access)
        for head, state in incremental.items():
            fresh = gitproject.project_head(P, head, cold.load)
            assert fresh.snapshot() == state.snapshot()
            assert git.project(P, head).snapshot() == state.snapshot()  # cached/incremental
            active = {k for k, m in fresh.memories.items() if m.status == "active"}
            assert active == model_active(gitproject.walk(head, git.load))
