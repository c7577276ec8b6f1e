"""Property: the incrementally maintained index equals a from-scratch projection (§12–§15).

Random histories over three actors, two local streams, and an accepted remote stream whose
memories become visible only when it is "published" later (so targets and evidence can arrive
after the memories that name them).  After every step the index is brought up to date the
normal way (incremental unless the query context or policy changed) and every stored row —
lifecycle, edges, applicability, evidence, dependencies, trust and the exact recall JSON — must
equal what a full verification and projection of the repository gives, and so must the narrow
row keys and the topic/term/path postings that filtered recalls read (``verify_index``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from palimpsest.hn import store
from palimpsest.hn.envelope import default_stream
from palimpsest.hn.index import ROW_COLUMNS, IndexContext, open_index, row_values, verify_index
from palimpsest.hn.index import core as index_module
from palimpsest.hn.policy import policy_context
from palimpsest.hn.projection import project
from palimpsest.identity import Identity, identity_from_seed
from tests.hn.recall_helpers import commit_files, lifecycle, new_repo, policy_bytes, remember

PEOPLE = [
    identity_from_seed(n, bytes(range(s, s + 32))) for n, s in (("A", 0), ("B", 32), ("C", 64))
]
SIDE_STREAM = "sha256:" + "5e" * 32
PENDING_STREAM = "sha256:" + "9a" * 32
KINDS = ["observation", "decision", "verification", "attempt"]

# Weighted by repetition: mostly appends, some late arrivals, few context or policy changes
# (those rebuild from scratch and would hide incremental mistakes).
ACTIONS = ["record"] * 4 + ["supersede", "retract", "challenge"] + ["pending"] * 2
ACTIONS += ["publish"] * 2 + ["commit", "policy"]
step = st.tuples(
    st.sampled_from(ACTIONS), st.integers(0, 2), st.booleans(), st.sampled_from(KINDS),
    st.integers(0, 40),
)  # fmt: skip


class World:
    """A repository plus the memory IDs created so far."""

    def __init__(self, path: Path) -> None:
        self.repo = new_repo(path, trusted=PEOPLE[:2])
        self.ids: list[str] = []
        self.t = 0
        self.pending_head: str | None = None
        self.pending_ids: list[str] = []

    def stamp(self) -> str:
        self.t += 1
        return f"2026-09-01T12:{self.t // 60:02d}:{self.t % 60:02d}Z"

    def pick(self, choice: int) -> str:
        """An existing ID, or (for some choices) one that exists nowhere."""
        if not self.ids or choice % 7 == 6:
            return "sha256:" + f"{choice:02d}" * 32
        if self.pending_ids and choice % 3 == 0:  # favour memories that arrive late
            return self.pending_ids[choice % len(self.pending_ids)]
        return self.ids[choice % len(self.ids)]

    def evidence(self, choice: int) -> tuple[str, ...]:
        if self.pending_ids and choice % 2 == 0:
            return ("memory:" + self.pending_ids[-1],)
        if choice % 4 == 0:
            return ()
        if choice % 4 == 1:
            return ("git:" + str(self.repo.head.target),)
        return ("memory:" + self.pick(choice),)

    def stream(self, who: Identity, side: bool) -> str:
        return SIDE_STREAM if side and who is PEOPLE[0] else ""

    def apply(self, action: tuple[Any, ...]) -> bool:
        """Run one step; True when it changes the query context or policy."""
        kind, who_i, side, rkind, choice = action
        if kind == "record":
            topic, ev = choice % 4, choice
            who = PEOPLE[who_i]
            memory = remember(
                self.repo, who, f"note {self.t} about topic{topic}", kind=rkind,
                topics=(f"topic{topic}",), evidence=self.evidence(ev) or (
                    ("git:" + str(self.repo.head.target),) if rkind == "verification" else ()
                ), outcome="failed" if rkind == "attempt" else "",
                stream=self.stream(who, side), timestamp=self.stamp(),
            )  # fmt: skip
            self.ids.append(memory.memory_id)
        elif kind in ("supersede", "retract", "challenge"):
            who, target = PEOPLE[who_i], self.pick(choice)
            if kind == "supersede":
                memory = remember(
                    self.repo, who, f"replacement {self.t}", kind="decision",
                    operation="supersede", target=target, stream=self.stream(who, side),
                    timestamp=self.stamp(),
                )  # fmt: skip
            else:
                memory = lifecycle(
                    self.repo, who, kind, target, stream=self.stream(who, side),
                    timestamp=self.stamp(),
                )  # fmt: skip
            self.ids.append(memory.memory_id)
        elif kind == "pending":
            self.ids.append(self.append_pending(choice))
        elif kind == "publish":
            if self.pending_head is not None:
                name = store.remote_ref_name("origin", PEOPLE[2].actor, PENDING_STREAM)
                self.repo.references.create(name, self.pending_head, force=True)
        elif kind == "commit":
            commit_files(self.repo, {f"f{self.t}.txt": b"x"}, "move HEAD")
            self.t += 1
            return True
        else:
            trusted = [p.actor for p in PEOPLE[: who_i + 1]]
            commit_files(self.repo, {".hn/policy.json": policy_bytes(trusted)}, "policy")
            return True
        return False

    def append_pending(self, choice: int) -> str:
        """Carol writes to a stream that is not yet a source (it arrives later, replicated)."""
        local = store.local_ref_name(PEOPLE[2].actor, PENDING_STREAM)
        if self.pending_head is not None:
            self.repo.references.create(local, self.pending_head)
        memory = remember(
            self.repo, PEOPLE[2], f"remote {self.t}", kind="observation",
            evidence=self.evidence(choice), stream=PENDING_STREAM, timestamp=self.stamp(),
        )  # fmt: skip
        self.pending_head = memory.commit
        self.pending_ids.append(memory.memory_id)
        self.repo.references.delete(local)
        return memory.memory_id


def _from_scratch(repo: pygit2.Repository) -> dict[str, tuple[Any, ...]]:
    at = str(repo.head.target)
    policy = policy_context(at, store.policy_blob(repo, at))
    projection = project(store.collect(repo), store.RepoProbe(repo), at_commit=at, policy=policy)
    return {row.id: row_values(row) for row in projection.rows}


def _indexed(repo: pygit2.Repository) -> dict[str, tuple[Any, ...]]:
    with open_index(repo, IndexContext(str(repo.head.target))) as index:
        columns = ", ".join(ROW_COLUMNS)
        rows = index.conn.execute(f"SELECT {columns} FROM rows").fetchall()  # noqa: S608
        assert index.state.records == len(rows)
    return {str(r[0]): tuple(bytes(v) if isinstance(v, bytes) else v for v in r) for r in rows}


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=1, max_size=12))
def test_incremental_index_equals_projection_from_scratch(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    steps: list[tuple[Any, ...]],
) -> None:
    world = World(tmp_path_factory.mktemp("history") / "repo")
    rebuilds: list[int] = []
    real = index_module._rebuild

    def counting(*args: Any, **kwargs: Any) -> Any:
        rebuilds.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(index_module, "_rebuild", counting)
    assert _indexed(world.repo) == _from_scratch(world.repo)
    expected_rebuilds = 1
    for action in steps:
        if world.apply(action):
            expected_rebuilds += 1  # another query commit or policy: a full rebuild
        assert _indexed(world.repo) == _from_scratch(world.repo), action
        assert len(rebuilds) == expected_rebuilds, action  # everything else was incremental
        # Row keys, classes and term postings too (verify re-derives them from scratch).
        verify_index(world.repo)


def test_late_target_and_evidence_resolve_incrementally(tmp_path: Path) -> None:
    world = World(tmp_path / "repo")
    remote = world.append_pending(0)
    world.ids.append(remote)
    # Alice cites the not-yet-published memory; Carol supersedes it before it arrives.
    memory = remember(world.repo, PEOPLE[0], "cites remote", evidence=("memory:" + remote,))
    replacement = remember(
        world.repo, PEOPLE[2], "replaces remote", operation="supersede", target=remote,
        kind="decision",
    )  # fmt: skip
    before = _indexed(world.repo)
    assert b'"evidence":"missing"' in before[memory.memory_id][ROW_COLUMNS.index("json")]
    assert before[replacement.memory_id][ROW_COLUMNS.index("lifecycle")] == "dependency-missing"
    world.apply(("publish", 0, False, "observation", 0))
    after = _indexed(world.repo)
    assert after == _from_scratch(world.repo)
    assert after[memory.memory_id][ROW_COLUMNS.index("evidence")] == "resolved"
    assert after[replacement.memory_id][ROW_COLUMNS.index("lifecycle")] == "active"
    assert after[remote][ROW_COLUMNS.index("lifecycle")] == "superseded"
    assert default_stream(PEOPLE[0].actor) != SIDE_STREAM
