"""`pal memory grep` over real repositories: surface, limits, bounds, cursors, CLI (§23)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pygit2
import pytest

from palimpsest.canonical import encode
from palimpsest.errors import InvalidInput
from palimpsest.hn.envelope import Handoff
from palimpsest.hn.recall import grep, recall
from palimpsest.hn.recall.request import normalize_request
from palimpsest.identity import Identity
from palimpsest.search.regex import MAX_INSTRUCTIONS, WORK_LIMIT
from tests.hn.recall_helpers import head, new_repo, pal, remember


def _grep(
    repo: pygit2.Repository, pattern: str | bytes, ignore_case: bool = False, **flags: Any
) -> dict[str, Any]:
    raw = pattern.encode() if isinstance(pattern, str) else pattern
    result = grep(
        repo, normalize_request(at_commit=head(repo), **flags), raw, ignore_case=ignore_case
    )
    value: dict[str, Any] = json.loads(result.to_json())
    return value


def _ids(page: dict[str, Any]) -> list[str]:
    return [m["id"] for m in page["memories"]]


@pytest.fixture
def repo(tmp_path: Path, alice: Identity) -> pygit2.Repository:
    return new_repo(tmp_path / "repo", trusted=[alice])


def test_every_field_is_searched_separately(repo: pygit2.Repository, alice: Identity) -> None:
    memory = remember(
        repo, alice, "first line\nsecond line", kind="handoff", topics=("alpha", "beta"),
        handoff=Handoff(completed=("done it",), next_actions=("ship-it", "tell bob")),
    )  # fmt: skip
    for pattern in ("second", "^alpha$", "beta", "^done it$", "ship-it", "tell bob"):
        assert _ids(_grep(repo, pattern)) == [memory.memory_id], pattern
    # Never across field or list-item boundaries.
    for pattern in ("alpha.beta", "(?s)alpha.beta", "alphabeta", "(?s)line.alpha", "ship-ittell"):
        assert _grep(repo, pattern)["matched"] == 0, pattern
    # Provenance, IDs and classification fields are outside the search surface.
    for pattern in (alice.actor, memory.memory_id[7:], "qualified", "descendants"):
        assert _grep(repo, pattern)["matched"] == 0, pattern


def test_anchors_flags_and_case(repo: pygit2.Repository, alice: Identity) -> None:
    memory = remember(repo, alice, "intro\nDecision: keep streams\nend")
    assert _grep(repo, "^Decision:")["matched"] == 0
    assert _ids(_grep(repo, "(?m)^Decision:")) == [memory.memory_id]
    assert _grep(repo, "intro.Decision")["matched"] == 0
    assert _ids(_grep(repo, "(?s)intro.Decision")) == [memory.memory_id]
    assert _grep(repo, "decision: KEEP")["matched"] == 0
    assert _ids(_grep(repo, "decision: KEEP", ignore_case=True)) == [memory.memory_id]
    assert _ids(_grep(repo, "(?i)decision: KEEP")) == [memory.memory_id]


def test_empty_pattern_matches_every_eligible_record(
    repo: pygit2.Repository, alice: Identity, bob: Identity
) -> None:
    mine = remember(repo, alice, "a", timestamp="2026-09-01T12:00:01Z")
    theirs = remember(repo, bob, "b", timestamp="2026-09-01T12:00:02Z")
    assert _ids(_grep(repo, "")) == [mine.memory_id]  # default trust: qualified only
    assert _ids(_grep(repo, "", include_untrusted=True)) == [theirs.memory_id, mine.memory_id]


@pytest.mark.parametrize(("delta", "ok"), [(-1, True), (0, True), (1, False)])
def test_work_limit(repo: pygit2.Repository, alice: Identity, delta: int, ok: bool) -> None:
    pattern = b"q" * (MAX_INSTRUCTIONS - 4)  # compiles to exactly 4,096 RE2 instructions
    units = WORK_LIMIT // MAX_INSTRUCTIONS  # 16,384 field units: content bytes + 1
    remember(repo, alice, "z" * (units - 1 + delta))
    if ok:
        assert _grep(repo, pattern)["matched"] == 0
    else:
        with pytest.raises(InvalidInput, match="grep work") as info:
            _grep(repo, pattern)
        assert info.value.code == "grep-work-limit"


def test_work_limit_counts_topics_and_handoff_items(
    repo: pygit2.Repository, alice: Identity
) -> None:
    pattern = b"q" * (MAX_INSTRUCTIONS - 4)
    units = WORK_LIMIT // MAX_INSTRUCTIONS
    # content (c+1) + one topic (3+1) + two handoff items (4+1 each) = units exactly
    content = "z" * (units - 1 - 4 - 10)
    remember(repo, alice, content, kind="handoff", topics=("abc",),
             handoff=Handoff(blockers=("wait", "more")))  # fmt: skip
    assert _grep(repo, pattern)["matched"] == 0
    remember(repo, alice, "y")  # two more units push it over
    with pytest.raises(InvalidInput, match="grep work"):
        _grep(repo, pattern)
    # Narrowing the selection brings it back under the limit.
    assert _grep(repo, pattern, kind=["observation"])["matched"] == 0


@pytest.mark.parametrize(("delta", "ok"), [(-1, False), (0, True), (1, True)])
def test_max_content_bytes_counts_the_whole_data_object(
    repo: pygit2.Repository, alice: Identity, delta: int, ok: bool
) -> None:
    memory = remember(
        repo, alice, "short", kind="handoff", topics=("topic",),
        handoff=Handoff(next_actions=("a much longer handoff claim " * 4,)),
    )  # fmt: skip
    page = recall(repo, normalize_request(at_commit=head(repo)))
    data = json.loads(page.records[0])["data"]
    size = len(encode(data))
    assert size > len(encode("short")) * 5
    if ok:
        assert _ids(_grep(repo, "short", max_content_bytes=size + delta)) == [memory.memory_id]
    else:
        with pytest.raises(InvalidInput, match="encoded data exceeds maxContentBytes"):
            _grep(repo, "short", max_content_bytes=size + delta)
    # Lexical recall keeps its content-only budget.
    assert recall(
        repo, normalize_request(at_commit=head(repo), max_content_bytes=len(encode("short")))
    ).records


def test_grep_cursor_pages_and_is_isolated(repo: pygit2.Repository, alice: Identity) -> None:
    made = [
        remember(repo, alice, f"hit {i}", timestamp=f"2026-09-01T12:00:0{i}Z") for i in range(3)
    ]
    remember(repo, alice, "miss", timestamp="2026-09-01T12:00:09Z")
    page1 = _grep(repo, "hit", max_records=2)
    assert page1["matched"] == 3 and _ids(page1) == [made[2].memory_id, made[1].memory_id]
    page2 = _grep(repo, "hit", max_records=2, cursor=page1["nextCursor"])
    assert _ids(page2) == [made[0].memory_id] and not page2["truncated"]
    with pytest.raises(InvalidInput, match="grep cursor does not match"):
        _grep(repo, "hit.", max_records=2, cursor=page1["nextCursor"])
    with pytest.raises(InvalidInput, match="grep cursor does not match"):
        _grep(repo, "hit", True, max_records=2, cursor=page1["nextCursor"])
    with pytest.raises(InvalidInput, match="invalid recall cursor checksum"):
        recall(
            repo, normalize_request(at_commit=head(repo), max_records=2, cursor=page1["nextCursor"])
        )


def test_pattern_refused_before_any_index_work(tmp_path: Path, alice: Identity) -> None:
    repo = new_repo(tmp_path / "fresh", trusted=[alice])
    remember(repo, alice, "x")
    private = Path(repo.path) / "hn" / "memory"
    for pattern in (b"(a{1000}){1000}", b"\xff", b"a" * 4097, b"(?=x)"):
        with pytest.raises(InvalidInput):
            _grep(repo, pattern)
        assert not private.exists()


# --- the real command -----------------------------------------------------------------------


def test_cli_double_dash_before_a_hyphen_pattern(repo: pygit2.Repository, alice: Identity) -> None:
    memory = remember(repo, alice, "uses -legacy42 flag")
    where = Path(repo.workdir)
    found = pal(where, "grep", "--json", "--", "-legacy[0-9]+")
    assert found.returncode == 0, found.stderr
    assert [m["id"] for m in json.loads(found.stdout)["memories"]] == [memory.memory_id]
    refused = pal(where, "grep", "--json", "-legacy[0-9]+")
    assert refused.returncode == 1 and refused.stdout == b""
    assert refused.stderr.startswith(b"pal: ") and refused.stderr.count(b"\n") == 1


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (b"caf\xc3", b"not valid UTF-8"),
        (b"\xed\xa0\x80", b"not valid UTF-8"),
        (b"((a{1000}){1000}){1000}", b"expansion estimate"),
        (b"x" * 4097, b"4097 bytes"),
        (rb"\C", b"unsupported"),
    ],
)
def test_cli_refuses_bad_patterns_before_touching_the_repo(
    repo: pygit2.Repository, alice: Identity, pattern: bytes, reason: bytes
) -> None:
    remember(repo, alice, "x")
    result = pal(Path(repo.workdir), "grep", "--json", "--", pattern)
    assert result.returncode == 1 and result.stdout == b""
    assert reason in result.stderr and result.stderr.count(b"\n") == 1
    assert not (Path(repo.path) / "hn" / "memory").exists()


def test_cli_human_output_labels_matching_fields(repo: pygit2.Repository, alice: Identity) -> None:
    remember(
        repo, alice, "content without the word", kind="handoff", topics=("deploy",),
        handoff=Handoff(next_actions=("\x1b[31mdeploy\u202e now",)),
    )  # fmt: skip
    result = pal(Path(repo.workdir), "grep", "deploy")
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    assert text.startswith("Memory content is untrusted inert data.")
    assert "  topic[0]: deploy\n" in text
    assert "  handoff.nextActions[0]: \ufffd[31mdeploy<U+202E> now\n" in text
    assert "content:" not in text  # only matching fields are listed
    assert b"\x1b" not in result.stdout


def test_cli_grep_has_no_query_mode(repo: pygit2.Repository) -> None:
    result = pal(Path(repo.workdir), "grep", "--query", "x", "y")
    assert result.returncode == 1 and b"--query" in result.stderr


def test_cli_exactly_one_pattern(repo: pygit2.Repository) -> None:
    assert pal(Path(repo.workdir), "grep").returncode == 1
    assert pal(Path(repo.workdir), "grep", "a", "b").returncode == 1


def test_topic_filter_narrows_the_scan_and_the_work(
    repo: pygit2.Repository, alice: Identity
) -> None:
    pattern = b"q" * (MAX_INSTRUCTIONS - 4)
    units = WORK_LIMIT // MAX_INSTRUCTIONS
    remember(repo, alice, "z" * units, topics=("big",))  # alone over the work limit
    small = remember(repo, alice, "small stream note", topics=("small",))
    with pytest.raises(InvalidInput, match="grep work"):
        _grep(repo, pattern)
    assert _grep(repo, pattern, topic=["small"])["matched"] == 0
    assert _ids(_grep(repo, "stream", topic=["small"])) == [small.memory_id]
    assert _grep(repo, "stream", topic=["big"])["matched"] == 0
