"""Property: the incrementally maintained, context-free index answers as a from-scratch
projection does (§12–§16), whatever commit, subject, path and policy a recall asks about.

Random histories over three actors, two local streams, and an accepted remote stream whose
memories become visible only when it is "published" later (so targets and evidence can arrive
after the memories that name them), with random commits on top of the code history (HEAD
moves, side branches, policy changes), memories anchored at HEAD, at older commits and on side
branches in every applicability mode, with path anchors and subjects.  After every step:

- every stored row equals the row of a full verification and projection without a query
  commit, and ``verify_index`` (which re-derives keys, postings, totals and kept reach sets)
  passes;
- nothing was rebuilt: no commit, context or policy change rebuilds the index;
- recalls at random query contexts (older commits, side branches, a subject, a path, random
  filters, a second page through the cursor) give exactly the bytes the specification's
  recall over a from-scratch projection gives (:mod:`tests.hn.recall_oracle`).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from palimpsest.errors import InvalidInput
from palimpsest.hn import store
from palimpsest.hn.author import append, build_record
from palimpsest.hn.envelope import Anchor, PathAnchor, default_stream
from palimpsest.hn.index import ROW_COLUMNS, open_index, row_values, verify_index
from palimpsest.hn.index import update as index_core
from palimpsest.hn.index.write import NEUTRAL
from palimpsest.hn.projection import project
from palimpsest.hn.recall import recall, recall_kept
from palimpsest.hn.recall.request import RecallRequest, normalize_request
from palimpsest.hn.store import headfiles
from palimpsest.identity import Identity, identity_from_seed
from tests.hn.recall_helpers import commit_files, lifecycle, new_repo, policy_bytes, remember
from tests.hn.recall_oracle import expected_recall

PEOPLE = [
    identity_from_seed(n, bytes(range(s, s + 32))) for n, s in (("A", 0), ("B", 32), ("C", 64))
]
SIDE_STREAM = "sha256:" + "5e" * 32
PENDING_STREAM = "sha256:" + "9a" * 32
KINDS = ["observation", "decision", "verification", "attempt"]
SUBJECTS = ["issue:sha256:" + "1" * 64, "run:sha256:" + "2" * 64]
PATHS = ["README.md", "docs/a.md"]

# Weighted by repetition: mostly appends, some late arrivals, commits and policy changes.
ACTIONS = ["record"] * 5 + ["supersede", "retract", "challenge"] + ["pending"] * 2
ACTIONS += ["publish"] * 2 + ["commit", "commit", "branch", "policy"]
step = st.tuples(
    st.sampled_from(ACTIONS), st.integers(0, 2), st.booleans(), st.sampled_from(KINDS),
    st.integers(0, 40),
    # the query context asked after the step: at, subject, path, filters, page size
    st.integers(0, 9), st.integers(0, 3), st.integers(0, 3), st.integers(0, 5), st.integers(1, 4),
)  # fmt: skip


class World:
    """A repository, the memory IDs created so far and the commits of its history."""

    def __init__(self, path: Path) -> None:
        self.repo = new_repo(path, trusted=PEOPLE[:2])
        commit_files(self.repo, {"docs/a.md": b"a\n"}, "docs")
        self.ids: list[str] = []
        self.t = 0
        self.pending_head: str | None = None
        self.pending_ids: list[str] = []
        self.commits = [str(self.repo.head.target)]
        self.side: list[str] = []  # commits of a branch HEAD never reaches
        self.last_anchor = self.commits[0]

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
        if choice % 4 == 3 and self.pending_ids:  # arrives only when published
            return ("memory:" + self.pending_ids[-1],)
        if choice % 4 == 1:
            return ("git:" + self.commits[choice % len(self.commits)],)
        if choice % 4 == 2:
            return ("memory:" + self.pick(choice),)
        return ()

    def stream(self, who: Identity, side: bool) -> str:
        return SIDE_STREAM if side and who is PEOPLE[0] else ""

    def anchor(self, choice: int) -> tuple[Anchor, str]:
        """An anchor (HEAD, an older commit or a side-branch commit; sometimes with paths or a
        subject) and an applicability mode."""
        pool = self.commits + self.side
        commit = pool[-1] if choice % 4 else pool[choice % len(pool)]
        subject = SUBJECTS[choice % 2] if choice % 5 < 2 else ""
        mode = ("descendants", "descendants", "exact")[choice % 3]
        if subject and choice % 7 < 3:
            mode = "subject"
        paths: tuple[PathAnchor, ...] = ()
        if choice % 4 == 3:
            tree = self.repo[pygit2.Oid(hex=commit)].tree  # type: ignore[attr-defined]
            paths = tuple(
                PathAnchor(p, str(tree[p].id) if p in tree else "absent") for p in PATHS
            )
        return Anchor(commit, paths, subject), mode

    def apply(self, action: tuple[Any, ...]) -> None:
        kind, who_i, side, rkind, choice = action[:5]
        if kind == "record":
            topic, ev = choice % 4, choice
            who = PEOPLE[who_i]
            anchor, mode = self.anchor(choice)
            evidence = self.evidence(ev) or (
                ("git:" + self.commits[-1],) if rkind == "verification" else ()
            )
            record = build_record(
                kind=rkind, content=f"note {self.t} about topic{topic}", anchor=anchor,
                applies=mode, topics=(f"topic{topic}",), evidence=evidence,
                outcome="failed" if rkind == "attempt" else "",
            )  # fmt: skip
            memory = append(self.repo, who, operation="record", record=record,
                            stream=self.stream(who, side), timestamp=self.stamp())  # fmt: skip
            self.ids.append(memory.memory_id)
            self.last_anchor = anchor.commit
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
            files = {f"f{self.t}.txt": b"x"}
            if choice % 2:
                files["docs/a.md"] = f"a {self.t}\n".encode()
            self.commits.append(commit_files(self.repo, files, "move HEAD"))
            self.t += 1
        elif kind == "branch":
            self.side.append(self.side_commit(choice))
        else:
            trusted = [p.actor for p in PEOPLE[: who_i + 1]]
            self.commits.append(
                commit_files(self.repo, {".hn/policy.json": policy_bytes(trusted)}, "policy")
            )

    def side_commit(self, choice: int) -> str:
        """A commit off an older commit on no branch HEAD follows."""
        base = self.side[-1] if self.side and choice % 2 else self.commits[choice % len(
            self.commits)]  # fmt: skip
        who = pygit2.Signature("Test", "test@example.invalid", 1_700_000_000 + self.t, 0)
        tree = self.repo[pygit2.Oid(hex=base)].tree  # type: ignore[attr-defined]
        builder = self.repo.TreeBuilder(tree)
        builder.insert(f"side{self.t}.txt", self.repo.create_blob(b"side"),
                       pygit2.enums.FileMode.BLOB)  # fmt: skip
        self.t += 1
        oid = self.repo.create_commit(None, who, who, "side", builder.write(),
                                      [pygit2.Oid(hex=base)])  # fmt: skip
        return str(oid)

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

    def context(self, action: tuple[Any, ...]) -> RecallRequest:
        """The recall asked after a step (its last five numbers choose it)."""
        at_i, subject_i, path_i, filter_i, size = action[5:]
        if at_i < 2:  # where the newest record is anchored (exact rows apply only there)
            at = self.last_anchor
        elif at_i < 6:
            at = self.commits[-1]  # HEAD
        elif at_i < 8 or not self.side:
            at = self.commits[at_i % len(self.commits)]  # an older commit
        else:
            at = self.side[at_i % len(self.side)]  # a side branch
        filters: list[dict[str, Any]] = [
            {}, {"lifecycle": ["all"]}, {"include_untrusted": True},
            {"topic": ["topic1"], "include_untrusted": True, "lifecycle": ["all"]},
            {"query": "note", "kind": ["decision", "observation"]},
            {"trust": ["actor-untrusted", "qualified"], "actor": [PEOPLE[1].actor,
                                                                  PEOPLE[2].actor]},
        ]  # fmt: skip
        return normalize_request(
            at_commit=at,
            subject=SUBJECTS[action[4] % 2] if subject_i == 0 else "",
            path=PATHS[action[4] % 2] if path_i == 0 else "",
            max_records=size,
            **filters[filter_i],
        )


def _from_scratch(repo: pygit2.Repository) -> dict[str, tuple[Any, ...]]:
    projection = project(store.collect(repo), store.RepoProbe(repo), at_commit=None,
                         policy=NEUTRAL)  # fmt: skip
    return {row.id: row_values(row) for row in projection.rows}


def _indexed(repo: pygit2.Repository) -> dict[str, tuple[Any, ...]]:
    with open_index(repo) as index:
        columns = ", ".join(ROW_COLUMNS)
        rows = index.conn.execute(f"SELECT {columns} FROM rows").fetchall()  # noqa: S608
        assert index.state.records == len(rows)
    return {str(r[0]): tuple(bytes(v) if isinstance(v, bytes) else v for v in r) for r in rows}


def _answers(repo: pygit2.Repository, request: RecallRequest) -> list[bytes | str]:
    """Both pages of a recall (the second through the first's cursor), or the error."""
    out: list[bytes | str] = []
    for _ in range(2):
        try:
            result = recall(repo, request)
        except InvalidInput as exc:
            return [*out, exc.message]
        out.append(result.to_json())
        if not result.next_cursor:
            break
        request = normalize_request(**{**_flags(request), "cursor": result.next_cursor})
    return out


def _expected(repo: pygit2.Repository, request: RecallRequest) -> list[bytes | str]:
    out: list[bytes | str] = []
    for _ in range(2):
        try:
            result = expected_recall(repo, request)
        except InvalidInput as exc:
            return [*out, exc.message]
        out.append(result.to_json())
        if not result.next_cursor:
            break
        request = normalize_request(**{**_flags(request), "cursor": result.next_cursor})
    return out


def _flags(request: RecallRequest) -> dict[str, Any]:
    return {
        "at_commit": request.at_commit, "subject": request.subject, "path": request.path,
        "topic": request.topic, "kind": request.kind, "actor": request.actor,
        "lifecycle": request.lifecycle or ["all"], "trust": request.trust,
        "query": request.query, "max_records": request.max_records,
        "max_content_bytes": request.max_content_bytes,
        "include_untrusted": request.include_untrusted,
    }  # fmt: skip


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=1, max_size=12))
def test_incremental_index_answers_every_context_as_a_projection_from_scratch(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    steps: list[tuple[Any, ...]],
) -> None:
    world = World(tmp_path_factory.mktemp("history") / "repo")
    rebuilds: list[int] = []
    real = index_core._rebuild

    def counting(*args: Any, **kwargs: Any) -> Any:
        rebuilds.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(index_core, "_rebuild", counting)
    assert _indexed(world.repo) == _from_scratch(world.repo)
    for action in steps:
        world.apply(action)
        assert _indexed(world.repo) == _from_scratch(world.repo), action
        request = world.context(action)
        assert _answers(world.repo, request) == _expected(world.repo, request), (action, request)
        assert len(rebuilds) == 1, action  # commits, contexts and policies never rebuild
        # Row keys, postings, totals and kept reach sets too (verify re-derives them).
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
    assert before[memory.memory_id][ROW_COLUMNS.index("evidence")] == "missing"
    assert before[replacement.memory_id][ROW_COLUMNS.index("lifecycle")] == "dependency-missing"
    world.apply(("publish", 0, False, "observation", 0))
    after = _indexed(world.repo)
    assert after == _from_scratch(world.repo)
    assert after[memory.memory_id][ROW_COLUMNS.index("evidence")] == "resolved"
    assert after[replacement.memory_id][ROW_COLUMNS.index("lifecycle")] == "active"
    assert after[remote][ROW_COLUMNS.index("lifecycle")] == "superseded"
    assert default_stream(PEOPLE[0].actor) != SIDE_STREAM


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_long_random_walks_answer_like_a_projection_from_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    # Uniformly drawn steps (hypothesis favours small values), longer histories, two recalls
    # after each step.
    rng = random.Random(seed)
    world = World(tmp_path / "repo")
    rebuilds: list[int] = []
    real = index_core._rebuild
    monkeypatch.setattr(index_core, "_rebuild",
                        lambda *a, **k: rebuilds.append(1) or real(*a, **k))  # fmt: skip
    matched = warmed = 0
    for number in range(36):
        action = (rng.choice(ACTIONS), rng.randrange(3), rng.random() < 0.5,
                  rng.choice(KINDS), rng.randrange(41))  # fmt: skip
        world.apply(action)
        for _ in range(2):
            ask = (*action, rng.randrange(10), rng.randrange(4), rng.randrange(4),
                   rng.randrange(6), rng.randrange(1, 5))  # fmt: skip
            request = world.context(ask)
            expected = _expected(world.repo, request)
            # The warm path first (it may judge a new commit from its loose objects), then Git.
            try:
                warm = recall_kept(headfiles.locate(world.repo.workdir), request)  # type: ignore[arg-type]
            except InvalidInput as exc:
                assert expected[-1] == exc.message
            else:
                if warm is not None:
                    warmed += 1
                    assert warm.to_json() == expected[0], (number, ask, request)
            assert _answers(world.repo, request) == expected, (number, ask, request)
            matched += sum(isinstance(e, bytes) and b'"matched":0,' not in e for e in expected)
        if number % 6 == 5:
            assert _indexed(world.repo) == _from_scratch(world.repo)
            verify_index(world.repo)
    assert rebuilds == [1]
    assert matched >= 12  # the walk asked questions that have answers
    assert warmed >= 12  # and the warm path answered many of them
