"""The store: ref grammar, reader checks, corruption and continuity matrices, collection,
append with compare-and-swap, and exact commit bytes (hn-memory-v0.md §8-§11, §24 items 11-15)."""

# ruff: noqa: E501 - corruption and continuity tables read best one case per line
from __future__ import annotations

from pathlib import Path
from typing import Any

import pygit2
import pytest

from palimpsest.canonical import encode
from palimpsest.errors import Conflict, InvalidInput, NotFound
from palimpsest.hn import store
from palimpsest.hn.author import append, build_record
from palimpsest.hn.envelope import Anchor, default_stream, memory_id, sign_text
from tests.hn.helpers import ALICE, BOB
from tests.hn.streams import (
    append_raw,
    build_stream,
    head_commit,
    memory_tree,
    new_repo,
    raw_commit,
    raw_tree,
    record_wire,
    ref_snapshot,
)

A, S = ALICE.actor, default_stream(ALICE.actor)[7:]

# --- §24 item 11: ref grammar ----------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        f"refs/hn/memory/{A}",
        f"refs/hn/memory/{A}/{S}/extra",
        f"refs/hn/memory/{A.upper()}/{S}",
        f"refs/hn/memory/{A}/{S.upper()}",
        f"refs/hn/memory/{A}/{S[:-1]}",
        f"refs/hn/memory/{A}/{S} ",
        f"refs/hn/memory/{A}/{S}\n",
        f"refs/hn/memory/{A}/{S}.lock",
        f"refs/hn/memory/{A}/..",
        f"refs/hn/memory/{A}/@{{1}}",
        f"refs/hn/remotes/origin/memory/{A}",
        f"refs/hn/remotes/origin/memory/{A}/{S}/x",
        f"refs/hn/remotes/bad..name/memory/{A}/{S}",
        f"refs/hn/remotes/origin.lock/memory/{A}/{S}",
        f"refs/hn/remotes/origin./memory/{A}/{S}",
        f"refs/hn/remotes/-origin/memory/{A}/{S}",
        f"refs/hn/remotes/{'r' * 129}/memory/{A}/{S}",
        f"refs/hn/remotes/ori gin/memory/{A}/{S}",
    ],
)
def test_malformed_memory_refs_rejected(name: str) -> None:
    with pytest.raises(InvalidInput) as info:
        store.parse_memory_ref(name)
    assert info.value.code == "malformed-memory-ref"


def test_well_formed_and_unrelated_refs() -> None:
    local = store.parse_memory_ref(f"refs/hn/memory/{A}/{S}", "h")
    assert local is not None and local.stream == "sha256:" + S and local.remote is None
    remote = store.parse_memory_ref(f"refs/hn/remotes/o_1.x-y/memory/{A}/{S}")
    assert remote is not None and remote.remote == "o_1.x-y"
    assert store.parse_memory_ref(f"refs/hn/remotes/o/actors/{A}") is None
    assert store.parse_memory_ref(f"refs/hn/remotes/o/proposals/{A}") is None
    assert store.parse_memory_ref(f"refs/hn/quarantine/memory/{A}/{S}") is None
    assert store.parse_memory_ref("refs/nh/memory/x/y") is None
    assert store.parse_memory_ref("refs/heads/main") is None


def test_malformed_ref_on_disk_fails_collection(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    build_stream(repo, ALICE, 1)
    bad = Path(repo.path) / "refs/hn/memory" / A.upper() / S
    bad.parent.mkdir(parents=True)
    bad.write_text(head_commit(repo) + "\n")
    before = ref_snapshot(repo)
    with pytest.raises(InvalidInput, match="malformed memory ref"):
        store.collect(repo)
    assert ref_snapshot(repo) == before


# --- reading fixtures we build ourselves -------------------------------------------------------


def test_valid_stream_loads_in_order(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    name, ids = build_stream(repo, ALICE, 5)
    [ref] = store.list_memory_refs(repo)
    memories = store.load_stream(repo, ref)
    assert [m.memory_id for m in memories] == ids
    assert [m.envelope.sequence for m in memories] == [1, 2, 3, 4, 5]
    assert all(m.ref == name for m in memories)


def test_bare_repository_is_read_without_work_tree(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "bare.git", bare=True)
    build_stream(repo, ALICE, 2)
    assert len(store.collect(store.open_repository(tmp_path / "bare.git"))) == 2


def test_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        store.open_repository(tmp_path)


# --- §24 item 13: store corruption matrix ------------------------------------------------------


def _corrupt_head(repo: pygit2.Repository, tree: pygit2.Oid) -> None:
    """Point Alice's default stream at a single commit with the given tree."""
    commit = raw_commit(repo, tree, [])
    repo.references.create(store.local_ref_name(A, "sha256:" + S), pygit2.Oid(hex=commit))


def _valid_parts(repo: pygit2.Repository, **extra: Any) -> tuple[bytes, bytes]:
    wire = record_wire(ALICE, 1, "", head_commit(repo), content="SECRET-CONTENT", **extra)
    payload = encode(wire)
    return payload, sign_text(ALICE.sign(payload)).encode()


def _corruptions(repo: pygit2.Repository) -> dict[str, pygit2.Oid]:
    payload, sig = _valid_parts(repo)
    p, s = repo.create_blob(payload), repo.create_blob(sig)
    sub = raw_tree(repo, [("100644", "memory.json", p), ("100644", "signature", s)])
    unknown = encode({**record_wire(ALICE, 1, "", head_commit(repo)), "extra": 1})
    bob_wire = record_wire(ALICE, 1, "", head_commit(repo))
    bob_wire["publicKey"] = BOB.public_key_text
    bob_payload = encode(bob_wire)
    seq0 = encode(record_wire(ALICE, 0, "", head_commit(repo)))
    sig_for = lambda data: sign_text(ALICE.sign(data)).encode()  # noqa: E731
    big = repo.create_blob(b" " * (512 * 1024 + 1))
    return {
        "missing memory.json": raw_tree(repo, [("100644", "signature", s)]),
        "missing signature": raw_tree(repo, [("100644", "memory.json", p)]),
        "extra attachment": raw_tree(
            repo,
            [("100644", "attachment.bin", s), ("100644", "memory.json", p), ("100644", "signature", s)],
        ),
        "nested tree": raw_tree(repo, [("40000", "memory.json", sub), ("100644", "signature", s)]),
        "mode 100755": raw_tree(repo, [("100755", "memory.json", p), ("100644", "signature", s)]),
        "tree entry as signature": raw_tree(repo, [("100644", "memory.json", p), ("40000", "signature", sub)]),
        "duplicate names": raw_tree(repo, [("100644", "memory.json", p), ("100644", "memory.json", p)]),
        "signature ***": memory_tree(repo, payload, b"***"),
        "padded signature": memory_tree(repo, payload, sig + b"=="),
        "signature with LF": memory_tree(repo, payload, sig + b"\n"),
        "oversized signature": memory_tree(repo, payload, sig * 2),
        "non-JSON payload": memory_tree(repo, b"SECRET-CONTENT not json", sig),
        "unknown-field payload": memory_tree(repo, unknown, sig_for(unknown)),
        "actor/key mismatch": memory_tree(repo, bob_payload, sign_text(BOB.sign(bob_payload)).encode()),
        "sequence 0": memory_tree(repo, seq0, sig_for(seq0)),
        "signature by another key": memory_tree(repo, payload, sign_text(BOB.sign(payload)).encode()),
        "oversized payload": raw_tree(repo, [("100644", "memory.json", big), ("100644", "signature", s)]),
        "symlink entry": raw_tree(repo, [("120000", "memory.json", p), ("100644", "signature", s)]),
        "zero-padded mode": raw_tree(repo, [("0100644", "memory.json", p), ("100644", "signature", s)]),
        "swapped order": raw_tree(repo, [("100644", "signature", s), ("100644", "memory.json", p)]),
        "signature as payload": raw_tree(repo, [("100644", "memory.json", s), ("100644", "signature", p)]),
        "missing tree object": pygit2.Oid(hex="f" * 40),
        "blob as tree": p,
        # found by the gitstream fuzz target: libgit2 could not parse it and GitError escaped
        "unparsable tree object": repo.odb.write(pygit2.enums.ObjectType.TREE, b"100644 memory.json"),
    }  # fmt: skip


CORRUPTION_NAMES = [
    "missing memory.json", "missing signature", "extra attachment", "nested tree", "mode 100755",
    "tree entry as signature", "duplicate names", "signature ***", "padded signature",
    "signature with LF", "oversized signature", "non-JSON payload", "unknown-field payload",
    "actor/key mismatch", "sequence 0", "signature by another key", "oversized payload",
    "symlink entry", "zero-padded mode", "swapped order", "signature as payload",
    "missing tree object", "blob as tree", "unparsable tree object",
]  # fmt: skip


@pytest.mark.parametrize("case", CORRUPTION_NAMES)
def test_store_corruption_rejected_without_touching_refs(tmp_path: Path, case: str) -> None:
    repo = new_repo(tmp_path / "r")
    build_stream(repo, BOB, 2)  # an independent valid stream
    _corrupt_head(repo, _corruptions(repo)[case])
    before = ref_snapshot(repo)
    with pytest.raises(InvalidInput) as info:
        store.collect(repo)
    assert info.value.code == "invalid-memory-stream"
    assert "SECRET-CONTENT" not in str(info.value)
    assert ref_snapshot(repo) == before


def test_ref_pointing_at_a_blob_rejected(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    blob = repo.create_blob(b"x")
    repo.references.create(store.local_ref_name(A, "sha256:" + S), blob)
    with pytest.raises(InvalidInput, match="not a commit"):
        store.collect(repo)


# --- §24 item 14: continuity matrix ------------------------------------------------------------


def _chain(repo: pygit2.Repository, specs: list[tuple[int, str]], **kw: Any) -> str:
    """Commit entries with (sequence, previous-mode) and link them as Git parents.

    previous-mode: "ok" (the real predecessor), "none", or a literal memory ID.
    """
    anchor = head_commit(repo)
    parent: list[str] = []
    last = ""
    for seq, mode in specs:
        previous = last if mode == "ok" else ("" if mode == "none" else mode)
        commit, last = append_raw(
            repo, record_wire(ALICE, seq, previous, anchor, content=f"c{seq}-{mode}", **kw), parent
        )
        parent = [commit]
    return parent[0]


def _set_head(repo: pygit2.Repository, commit: str, actor: str = A, stream: str = S) -> None:
    repo.references.create(
        store.local_ref_name(actor, "sha256:" + stream), pygit2.Oid(hex=commit), force=True
    )


ZERO_ID = "sha256:" + "0" * 64


@pytest.mark.parametrize(
    ("case", "specs"),
    [
        ("root with previous", [(1, ZERO_ID)]),
        ("root not sequence 1", [(2, ZERO_ID)]),
        ("gap", [(1, "none"), (3, "ok")]),
        ("duplicate", [(1, "none"), (1, "ok")]),
        ("decreasing", [(1, "none"), (2, "ok"), (1, "ok")]),
        ("skipped predecessor", [(1, "none"), (2, "ok"), (3, ZERO_ID)]),
        ("second without previous", [(1, "none"), (2, "none")]),
    ],
)  # fmt: skip
def test_continuity_violations_rejected(
    tmp_path: Path, case: str, specs: list[tuple[int, str]]
) -> None:
    repo = new_repo(tmp_path / "r")
    _set_head(repo, _chain(repo, specs))
    with pytest.raises(InvalidInput, match="invalid at commit"):
        store.collect(repo)


def test_cross_stream_graft_rejected(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    other = "1" * 64
    _name, _ids = build_stream(repo, ALICE, 2)
    # A valid stream "other" whose head is grafted onto the default stream's ref.
    commit = _chain(repo, [(1, "none"), (2, "ok")], stream="sha256:" + other)
    _set_head(repo, commit)  # default-stream ref now names entries of stream "other"
    with pytest.raises(InvalidInput, match="does not match the ref owner"):
        store.collect(repo)


def test_wrong_ref_owner_rejected(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    commit = _chain(repo, [(1, "none")])
    _set_head(repo, commit, actor=BOB.actor)
    with pytest.raises(InvalidInput, match="does not match the ref owner"):
        store.collect(repo)


def test_missing_predecessor_object_rejected(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    wire = record_wire(ALICE, 2, ZERO_ID, head_commit(repo))
    commit, _ = append_raw(repo, wire, ["e" * 40])
    _set_head(repo, commit)
    with pytest.raises(InvalidInput, match="missing"):
        store.collect(repo)


def test_merge_commit_rejected(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    first = _chain(repo, [(1, "none")])
    wire = record_wire(
        ALICE,
        2,
        store.load_stream(repo, store.MemoryRef("x", A, "sha256:" + S, first))[0].memory_id,
        head_commit(repo),
    )
    commit, _ = append_raw(repo, wire, [first, head_commit(repo)])
    _set_head(repo, commit)
    with pytest.raises(InvalidInput, match="exactly one parent"):
        store.collect(repo)


def test_one_bad_stream_fails_the_whole_collection(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    build_stream(repo, BOB, 3)
    _set_head(repo, _chain(repo, [(1, "none"), (3, "ok")]))
    with pytest.raises(InvalidInput):
        store.collect(repo)
    bob_ref = next(r for r in store.list_memory_refs(repo) if r.actor == BOB.actor)
    assert len(store.load_stream(repo, bob_ref)) == 3  # per-stream verification still works


# --- §24 item 15: collection --------------------------------------------------------------------


def test_collection_ignores_quarantine_and_unreferenced(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    build_stream(repo, ALICE, 2)
    bad = raw_commit(repo, raw_tree(repo, []), [])
    repo.references.create(f"refs/hn/quarantine/memory/{A}/{S}", pygit2.Oid(hex=bad))
    repo.references.create(f"refs/hn/remotes/o/actors/{A}", pygit2.Oid(hex=bad))
    repo.references.create(f"refs/nh/memory/{A}/{S}", pygit2.Oid(hex=bad))
    append_raw(repo, record_wire(ALICE, 7, ZERO_ID, head_commit(repo)), [])  # unreferenced
    assert len(store.collect(repo)) == 2


def test_collection_is_stable_across_local_accepted_and_mixed(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    name, _ids = build_stream(repo, ALICE, 3)
    build_stream(repo, BOB, 2)
    local_only = store.collect(repo)
    head = repo.references[name].target
    accepted = f"refs/hn/remotes/origin/memory/{A}/{S}"
    repo.references.create(accepted, head)
    mixed = store.collect(repo)
    repo.references.delete(name)
    remote_only = store.collect(repo)
    key = lambda ms: [(m.memory_id, m.commit) for m in ms]  # noqa: E731
    assert key(local_only) == key(mixed) == key(remote_only)
    assert len(mixed) == 5


def test_dedupe_keeps_smallest_commit(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    anchor = head_commit(repo)
    wire = record_wire(ALICE, 1, "", anchor)
    payload = encode(wire)
    sig = sign_text(ALICE.sign(payload)).encode()
    tree = memory_tree(repo, payload, sig)
    commits = sorted(raw_commit(repo, tree, []) for _ in range(1))
    other = str(
        repo.create_commit(
            None,
            pygit2.Signature("X", "x@y", 5, 0),
            pygit2.Signature("X", "x@y", 5, 0),
            "other\n",
            tree,
            [],
        )
    )
    _set_head(repo, commits[0])
    repo.references.create(f"refs/hn/remotes/o/memory/{A}/{S}", pygit2.Oid(hex=other))
    [memory] = store.collect(repo)
    assert memory.commit == min(commits[0], other)
    assert memory.memory_id == memory_id(payload)


def test_sha256_repository_is_refused_clearly(tmp_path: Path) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", "--object-format=sha256", str(tmp_path / "s")], check=True)
    with pytest.raises(Exception) as info:
        store.open_repository(tmp_path / "s")
    assert "sha256" in str(info.value).lower()


# --- append: exact commit bytes and compare-and-swap (§9, §24 item 12) --------------------------


def test_pal_written_memory_has_exact_commit_bytes_and_verifies(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    base = head_commit(repo)
    record = build_record(kind="decision", content="c", anchor=Anchor(base), applies="exact")
    first = append(repo, ALICE, operation="record", record=record, timestamp="2026-08-30T12:00:00Z")
    second = append(
        repo, ALICE, operation="record", record=record, timestamp="2026-08-30T14:00:00.5+02:00"
    )
    tree = repo[pygit2.Oid(hex=second.commit)].tree
    expected = (
        f"tree {tree.id}\n"
        f"parent {first.commit}\n"
        f"author Alice Agent <{A[:12]}@hn.invalid> 1788091200 +0200\n"
        f"committer Alice Agent <{A[:12]}@hn.invalid> 1788091200 +0200\n"
        f"\nhn memory {second.memory_id}\n"
    ).encode()
    assert repo.odb.read(pygit2.Oid(hex=second.commit))[1] == expected
    assert sorted((e.name, e.filemode) for e in tree) == [
        ("memory.json", 0o100644),
        ("signature", 0o100644),
    ]
    assert repo[tree["signature"].id].data == second.signature.encode()
    assert len(second.signature) == 86
    loaded = store.collect(repo)
    assert [(m.memory_id, m.commit) for m in loaded] == [
        (first.memory_id, first.commit), (second.memory_id, second.commit)
    ]  # fmt: skip
    assert loaded[1].envelope.previous == first.memory_id


def test_stale_expected_head_fails_and_leaves_the_winner(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    base = head_commit(repo)
    record = build_record(kind="decision", content="c", anchor=Anchor(base), applies="exact")
    append(repo, ALICE, operation="record", record=record)
    stale = store.stream_head(repo, A, "sha256:" + S)
    winner = append(repo, ALICE, operation="record", record=record)
    ref = store.local_ref_name(A, "sha256:" + S)
    payload, envelope = _signed_next(stale, base)
    with pytest.raises(Conflict) as info:
        store.append_memory(repo, payload, sign_text(ALICE.sign(payload)), envelope, stale)
    assert "reload and retry" in str(info.value)
    assert str(repo.references[ref].target) == winner.commit


def test_cas_refuses_when_ref_is_locked(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    ref = store.local_ref_name(A, "sha256:" + S)
    lock = Path(repo.path) / (ref + ".lock")
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    with pytest.raises(Conflict, match="compare-and-swap failed"):
        store.compare_and_swap(repo, ref, head_commit(repo), None)
    assert ref not in repo.references


def test_cas_create_refuses_existing_ref(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    name, _ = build_stream(repo, ALICE, 1)
    before = str(repo.references[name].target)
    with pytest.raises(Conflict):
        store.compare_and_swap(repo, name, head_commit(repo), None)
    assert str(repo.references[name].target) == before


def _signed_next(head: store.StreamHead, base: str) -> tuple[bytes, Any]:
    from palimpsest.hn.envelope import decode_envelope

    wire = record_wire(ALICE, head.sequence, head.previous, base, content="loser")
    payload = encode(wire)
    return payload, decode_envelope(payload)


def test_append_refuses_invalid_envelope_before_writing(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    objects_before = sorted(p.name for p in (Path(repo.path) / "objects").rglob("*"))
    record = build_record(
        kind="verification",
        content="no evidence",
        anchor=Anchor(head_commit(repo)),
        applies="exact",
    )
    with pytest.raises(InvalidInput):
        append(repo, ALICE, operation="record", record=record)
    assert sorted(p.name for p in (Path(repo.path) / "objects").rglob("*")) == objects_before
    assert store.list_memory_refs(repo) == []


def test_commit_time_offsets() -> None:
    assert store.commit_time("2026-08-30T12:01:00.25Z") == (1788091260, 0)
    assert store.commit_time("2026-08-30T14:01:00+02:00") == (1788091260, 120)
    assert store.commit_time("2026-08-30T10:31:00-01:30") == (1788091260, -90)


@pytest.mark.parametrize(
    ("name", "expected"), [("Alice", "Alice"), (" .Alice, ", "Alice"), ("A. B", "A. B")]
)
def test_ident_name_trims_crud_like_git(name: str, expected: str) -> None:
    assert store.ident_name(name) == expected


@pytest.mark.parametrize("name", ["<>", " ... ", ";'\""])
def test_ident_name_refuses_what_git_refuses(name: str) -> None:
    with pytest.raises(InvalidInput):
        store.ident_name(name)


def test_angle_brackets_in_name_match_git_commit_tree(tmp_path: Path) -> None:
    import subprocess

    from palimpsest.identity import identity_from_seed

    dave = identity_from_seed("Dave <ops> & Co", bytes(range(96, 128)))
    repo = new_repo(tmp_path / "r")
    record = build_record(kind="decision", content="c", anchor=Anchor(head_commit(repo)), applies="exact")
    memory = append(repo, dave, operation="record", record=record, timestamp="2026-09-01T12:00:00Z")
    tree = str(repo[pygit2.Oid(hex=memory.commit)].tree.id)
    env = {"GIT_AUTHOR_NAME": dave.name, "GIT_AUTHOR_EMAIL": f"{dave.actor[:12]}@hn.invalid",
           "GIT_COMMITTER_NAME": dave.name, "GIT_COMMITTER_EMAIL": f"{dave.actor[:12]}@hn.invalid",
           "GIT_AUTHOR_DATE": "2026-09-01T12:00:00Z", "GIT_COMMITTER_DATE": "2026-09-01T12:00:00Z",
           "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}  # fmt: skip
    by_git = subprocess.run(
        ["git", "-C", str(tmp_path / "r"), "commit-tree", tree, "-m", f"hn memory {memory.memory_id}"],
        env=env, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    assert by_git == memory.commit


def test_append_after_git_gc_packs_the_ref(tmp_path: Path) -> None:
    import subprocess

    repo = new_repo(tmp_path / "r")
    record = build_record(kind="decision", content="c", anchor=Anchor(head_commit(repo)), applies="exact")
    first = append(repo, ALICE, operation="record", record=record)
    subprocess.run(["git", "-C", str(tmp_path / "r"), "gc", "-q"], check=True)
    assert not (Path(repo.path) / store.local_ref_name(A, "sha256:" + S)).exists()  # packed now
    repo = store.open_repository(tmp_path / "r")
    second = append(repo, ALICE, operation="record", record=record)
    loaded = store.collect(repo)
    assert [m.memory_id for m in loaded] == [first.memory_id, second.memory_id]
    stale = store.StreamHead(store.local_ref_name(A, "sha256:" + S), first.commit, 2, first.memory_id)
    payload, envelope = _signed_next(stale, head_commit(repo))
    with pytest.raises(Conflict):
        store.append_memory(repo, payload, sign_text(ALICE.sign(payload)), envelope, stale)


def test_author_and_committer_are_not_checked(tmp_path: Path) -> None:
    # §11: "Not checked: the commit message, author and committer." A commit libgit2's parser
    # refuses (no e-mail) is still a memory, for the reader and for the next append alike.
    repo = new_repo(tmp_path / "r")
    payload, sig = _valid_parts(repo)
    tree = raw_tree(repo, [("100644", "memory.json", repo.create_blob(payload)),
                           ("100644", "signature", repo.create_blob(sig))])  # fmt: skip
    body = f"tree {tree}\nauthor A 0 +0000\ncommitter A 0 +0000\n\nm\n".encode()
    commit = str(repo.odb.write(pygit2.enums.ObjectType.COMMIT, body))
    with pytest.raises(pygit2.GitError):
        repo[pygit2.Oid(hex=commit)]  # what the reader must not depend on
    _set_head(repo, commit)
    [memory] = store.collect(repo, workers=0)
    assert memory.commit == commit and memory.payload == payload
    head = store.stream_head(repo, A, "sha256:" + S)
    assert (head.head, head.sequence, head.previous) == (commit, 2, memory_id(payload))
