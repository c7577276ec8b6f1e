"""Projection is pure: lifecycle, applicability, evidence and trust over a fake probe
(hn-memory-v0.md §12-§15, edge cases §24 item 16)."""

from __future__ import annotations

import random

import pytest

from palimpsest.hn.envelope import (
    Anchor,
    Applicability,
    Envelope,
    PathAnchor,
    Record,
    VerifiedMemory,
    default_stream,
)
from palimpsest.hn.policy import MISSING_POLICY_DIGEST, MemoryPolicy, PolicyContext
from palimpsest.hn.projection import (
    Projection,
    dependency_wire,
    project,
    projection_wire,
    row_wire,
)
from tests.hn.helpers import ALICE, BOB

C1, C2, C3, GONE, BLOB = "1" * 40, "2" * 40, "3" * 40, "9" * 40, "b" * 40
TREE_ID = "7" * 40


class Probe:
    """History C1 <- C2 <- C3; README.md is BLOB everywhere and docs/ is a tree."""

    def __init__(self, history: dict[str, tuple[str, ...]] | None = None) -> None:
        self.history = history if history is not None else {C1: (), C2: (C1,), C3: (C2,)}
        self.events: set[str] = set()

    def commit_state(self, hexid: str) -> str:
        if hexid in self.history:
            return "commit"
        return "not-commit" if hexid == BLOB else "missing"

    def path_entry(self, commit: str, path: str) -> tuple[str, str] | None:
        return {"README.md": ("blob", BLOB), "docs": ("tree", TREE_ID)}.get(path)

    def parents(self, commit: str) -> tuple[str, ...] | None:
        return self.history.get(commit)

    def object_state(self, hexid: str) -> str:
        if len(hexid) != 40:
            return "error"
        return "present" if hexid == BLOB or hexid in self.history else "missing"

    def has_event(self, event_id: str) -> bool:
        return event_id in self.events


def mid(n: int) -> str:
    return f"sha256:{n:064x}"


def memory(
    n: int,
    operation: str = "record",
    *,
    who: object = ALICE,
    kind: str = "decision",
    target: int | None = None,
    anchor: Anchor | None = None,
    mode: str = "descendants",
    evidence: tuple[str, ...] = (),
    reason: str = "",
) -> VerifiedMemory:
    actor = who.actor  # type: ignore[attr-defined]
    record = None
    if operation in ("record", "supersede"):
        anch = anchor or Anchor(C2)
        record = Record(
            kind=kind,
            content=f"content {n}",
            anchor=anch,
            applicability=Applicability(mode, anch.subject if mode == "subject" else ""),
            evidence=evidence,
        )
    env = Envelope(
        protocol="hn-memory/0",
        operation=operation,
        actor=actor,
        actor_name="x",
        public_key="k",
        stream=default_stream(actor),
        sequence=n,
        timestamp=f"2026-08-30T12:00:{n:02d}Z",
        record=record,
        target=mid(target) if target is not None else "",
        reason=reason or ("x" if operation in ("retract", "challenge") else ""),
    )
    return VerifiedMemory(mid(n), f"{n:040x}", b"", env, "sig", "ref")


QUALIFIED = PolicyContext(
    C3, "sha256:" + "p" * 64, MemoryPolicy(frozenset({ALICE.actor}), frozenset({"decision"}))
)
NO_POLICY = PolicyContext(C3, MISSING_POLICY_DIGEST, None)


def run(ms: list[VerifiedMemory], at: str | None = C3, policy: PolicyContext = QUALIFIED,
        probe: Probe | None = None, **kw: str) -> Projection:  # fmt: skip
    return project(ms, probe or Probe(), at_commit=at, policy=policy, **kw)


def row(p: Projection, n: int) -> dict[str, object]:
    r = p.row(mid(n))
    assert r is not None
    return row_wire(r)


def test_lifecycle_superseded_branching_retracted_and_challenges() -> None:
    ms = [
        memory(1),
        memory(2, "supersede", target=1),
        memory(3, "supersede", target=1),  # two successors: branching
        memory(4),
        memory(5, "supersede", target=4),  # one successor: superseded
        memory(6),
        memory(7, "retract", target=6),
        memory(8, "challenge", who=BOB, target=6),
        memory(9, "challenge", who=BOB, target=4),
        memory(10, "challenge", who=BOB, target=4),
    ]
    p = run(ms)
    assert row(p, 1)["lifecycle"] == "branching"
    assert row(p, 1)["successors"] == [mid(2), mid(3)]
    assert row(p, 4)["lifecycle"] == "superseded"
    assert row(p, 4)["challengers"] == [mid(9), mid(10)]  # challenges never change lifecycle
    assert row(p, 6)["lifecycle"] == "retracted"
    assert row(p, 6)["challengers"] == [mid(8)]
    assert row(p, 2)["lifecycle"] == "active"  # a successor itself stays active
    assert p.diagnostics == () and p.missing_dependencies == ()
    assert [r.id for r in p.rows] == sorted(r.id for r in p.rows)


def test_retraction_wins_over_branching() -> None:
    p = run([memory(1), memory(2, "supersede", target=1), memory(3, "supersede", target=1),
             memory(4, "retract", target=1)])  # fmt: skip
    assert row(p, 1)["lifecycle"] == "retracted"


def test_permutation_independence() -> None:
    ms = [
        memory(1), memory(2, "supersede", target=1), memory(3, "supersede", target=1),
        memory(4, "retract", target=1), memory(5, "challenge", who=BOB, target=1),
        memory(6, "challenge", who=BOB, target=2), memory(7, "retract", who=BOB, target=2),
        memory(8, "supersede", target=99), memory(9, "challenge", who=BOB, target=7),
    ]  # fmt: skip
    expected = projection_wire(run(ms))
    rng = random.Random(7)
    for _ in range(25):
        shuffled = ms[:]
        rng.shuffle(shuffled)
        assert projection_wire(run(shuffled + shuffled[:3])) == expected  # duplicates too


def test_relationship_diagnostics() -> None:
    ms = [
        memory(1),
        memory(2, "retract", who=BOB, target=1),  # actor-mismatch
        memory(3, "supersede", who=BOB, target=1),  # actor-mismatch
        memory(4, "challenge", target=2),  # wrong-target-kind (a retraction)
        memory(5, "challenge", target=1),  # own challenge: accepted by projection
    ]
    selfish = memory(6, "retract", target=6)
    p = run([*ms, selfish])
    codes = [(d.memory_id, d.code) for d in p.diagnostics]
    assert codes == [
        (mid(2), "actor-mismatch"),
        (mid(3), "actor-mismatch"),
        (mid(4), "wrong-target-kind"),
        (mid(6), "self-target"),
    ]
    assert row(p, 1)["lifecycle"] == "active"
    assert row(p, 1)["challengers"] == [mid(5)]
    assert [r.memory_id for r in p.relationships] == [mid(5)]


def test_missing_targets_become_dependencies() -> None:
    p = run([memory(1, "supersede", target=50), memory(2, "retract", target=51),
             memory(3, "challenge", who=BOB, target=52)])  # fmt: skip
    assert row(p, 1)["lifecycle"] == "dependency-missing"
    deps = [
        (d.kind, d.owner_id, d.missing_id, d.reason, d.operation) for d in p.missing_dependencies
    ]
    assert deps == [
        ("lifecycle-target", mid(1), mid(50), "target-unavailable", "supersede"),
        ("lifecycle-target", mid(2), mid(51), "target-unavailable", "retract"),
        ("lifecycle-target", mid(3), mid(52), "target-unavailable", "challenge"),
    ]
    assert [d.missing_id for d in p.row(mid(1)).dependencies] == [mid(50)]  # type: ignore[union-attr]


def test_anchor_missing_versus_wrong_type() -> None:
    p = run([memory(1, anchor=Anchor(GONE)), memory(2, anchor=Anchor(BLOB))])
    assert row(p, 1)["applicability"] == "anchor-missing"
    assert row(p, 2)["applicability"] == "anchor-invalid"
    [dep] = p.missing_dependencies
    assert (dep.kind, dep.missing_id, dep.reason) == (
        "anchor-commit",
        GONE,
        "anchor-commit-unavailable",
    )


def test_path_anchors() -> None:
    ok = Anchor(C2, (PathAnchor("README.md", BLOB), PathAnchor("docs/absent.md", "absent")))
    wrong_blob = Anchor(C2, (PathAnchor("README.md", "c" * 40),))
    present_but_absent = Anchor(C2, (PathAnchor("README.md", "absent"),))
    tree_as_blob = Anchor(C2, (PathAnchor("docs", TREE_ID),))
    p = run([memory(1, anchor=ok), memory(2, anchor=wrong_blob),
             memory(3, anchor=present_but_absent), memory(4, anchor=tree_as_blob)])  # fmt: skip
    assert [row(p, n)["applicability"] for n in (1, 2, 3, 4)] == [
        "applicable", "anchor-invalid", "anchor-invalid", "anchor-invalid",
    ]  # fmt: skip


def test_modes_and_query_context() -> None:
    subject = "issue:sha256:" + "5" * 64
    ms = [
        memory(1, mode="exact"),
        memory(2, mode="descendants"),
        memory(3, mode="descendants", anchor=Anchor(C3)),
        memory(4, mode="subject", anchor=Anchor(C2, subject=subject)),
        memory(5, mode="descendants", anchor=Anchor(C2, (PathAnchor("README.md", BLOB),))),
    ]
    at_c3 = run(ms, C3)
    assert [row(at_c3, n)["applicability"] for n in range(1, 6)] == [
        "inapplicable", "applicable", "applicable", "inapplicable", "applicable",
    ]  # fmt: skip
    at_c1 = run(ms, C1)
    assert row(at_c1, 2)["applicability"] == "inapplicable"  # anchor is not an ancestor
    at_anchor = run(ms, None)  # defaults to each anchor commit
    assert row(at_anchor, 1)["applicability"] == "applicable"
    with_subject = run(ms, C3, subject=subject)
    assert row(with_subject, 4)["applicability"] == "applicable"
    assert row(with_subject, 2)["applicability"] == "inapplicable"  # subject differs
    with_path = run(ms, C3, path="README.md")
    assert row(with_path, 5)["applicability"] == "applicable"
    assert row(with_path, 2)["applicability"] == "inapplicable"


def test_query_commit_missing_or_not_a_commit() -> None:
    p = run([memory(1)], GONE)
    assert row(p, 1)["applicability"] == "anchor-missing"
    assert [d.kind for d in p.missing_dependencies] == ["query-commit"]
    assert row(run([memory(1)], BLOB), 1)["applicability"] == "anchor-invalid"


def test_shallow_ancestry_walk_reports_missing_commit() -> None:
    shallow = Probe({C2: (C1,), C3: (C2,)})  # C1 is missing (shallow boundary)
    anchored_elsewhere = memory(1, anchor=Anchor(C3))
    p = run([memory(2, anchor=Anchor(C2)), anchored_elsewhere], C3, probe=shallow)
    assert row(p, 2)["applicability"] == "applicable"  # found before the gap
    other = Probe({"4" * 40: ("8" * 40,), C3: ("4" * 40,), C2: ()})
    q = run([memory(5, anchor=Anchor(C2))], C3, probe=other)
    assert row(q, 5)["applicability"] == "anchor-missing"
    assert [(d.kind, d.missing_id) for d in q.missing_dependencies] == [
        ("anchor-ancestry", "8" * 40)
    ]


def test_evidence_resolution() -> None:
    ev = ("git:" + BLOB, "git:" + GONE, "memory:" + mid(1), "memory:" + mid(77),
          "event:sha256:" + "e" * 64, "git:" + "a" * 64)  # fmt: skip
    p = run([memory(1), memory(2, evidence=ev)])
    details = row(p, 2)["evidenceDetails"]
    assert [(d["type"], d["status"], d["reason"]) for d in details] == [  # type: ignore[union-attr]
        ("event", "missing", "event-unavailable"),
        ("git", "missing", "object-unavailable"),  # sorted by requested ID: 99…, aa…, bb…
        ("git", "invalid", "object-inspection-failed"),
        ("git", "resolved", "exact-object"),
        ("memory", "resolved", "accepted-memory"),
        ("memory", "missing", "memory-unavailable"),
    ]
    assert row(p, 2)["evidence"] == "invalid"
    assert row(run([memory(3, evidence=("git:" + GONE,))]), 3)["evidence"] == "missing"
    assert row(run([memory(4)]), 4)["evidence"] == "resolved"  # empty evidence resolves
    kinds = sorted(d.kind for d in p.missing_dependencies)
    assert kinds == ["evidence-event", "evidence-git", "evidence-memory"]


def test_trust_is_orthogonal_and_policy_missing() -> None:
    ms = [memory(1), memory(2, who=BOB), memory(3, kind="observation"),
          memory(4, "retract", target=1), memory(5, anchor=Anchor(GONE))]  # fmt: skip
    p = run(ms)
    assert [row(p, n)["trust"] for n in (1, 2, 3, 5)] == [
        "qualified", "actor-untrusted", "kind-untrusted", "qualified",
    ]  # fmt: skip
    assert row(p, 1)["lifecycle"] == "retracted"  # trust did not change lifecycle
    assert row(p, 5)["applicability"] == "anchor-missing"
    none = run(ms, policy=NO_POLICY)
    assert {r.trust for r in none.rows} == {"policy-missing"}
    assert projection_wire(none)["policyDigest"] == MISSING_POLICY_DIGEST


@pytest.mark.parametrize("nil", [frozenset(), frozenset({"challengers", "data.evidence"})])
def test_row_wire_null_versus_empty(nil: frozenset[str]) -> None:
    p = run([memory(1)])
    r = p.row(mid(1))
    assert r is not None
    wire = row_wire(r, nil_empty=nil)
    assert wire["challengers"] == (None if "challengers" in nil else [])
    assert wire["data"]["evidence"] == (None if "data.evidence" in nil else [])  # type: ignore[index]
    assert wire["successors"] == []
    assert list(wire)[:3] == ["id", "stream", "actor"]


def test_dependency_wire_names_the_operation_only_on_lifecycle_targets() -> None:
    # Upstream writes `operation` on lifecycle-target dependencies (the owner's operation) and
    # leaves it out (omitempty) on the anchor, query-commit, ancestry and evidence
    # dependencies of a record or supersede row.
    ms = [memory(1, anchor=Anchor(GONE)), memory(2, evidence=("git:" + GONE,)),
          memory(3, "supersede", target=50, evidence=("memory:" + mid(60),)),
          memory(4, "challenge", who=BOB, target=51)]  # fmt: skip
    p = run(ms)
    wires = {(d["kind"], d["ownerId"]): d for d in map(dependency_wire, p.missing_dependencies)}
    assert list(wires[("anchor-commit", mid(1))]) == [
        "kind", "ownerId", "stream", "missingId", "reason",
    ]  # fmt: skip
    assert "operation" not in wires[("evidence-git", mid(2))]
    assert "operation" not in wires[("evidence-memory", mid(3))]
    assert list(wires[("lifecycle-target", mid(3))]) == [
        "kind", "ownerId", "stream", "operation", "missingId", "reason",
    ]  # fmt: skip
    assert wires[("lifecycle-target", mid(3))]["operation"] == "supersede"
    assert wires[("lifecycle-target", mid(4))]["operation"] == "challenge"
    for n, at in ((5, GONE), (6, C3)):
        far = Probe({C3: ("8" * 40,), C2: ()}) if n == 6 else None
        q = run([memory(n, anchor=Anchor(C2))], at, probe=far)
        [dep] = q.missing_dependencies
        assert dep.kind == ("query-commit" if n == 5 else "anchor-ancestry")
        assert "operation" not in dependency_wire(dep)
