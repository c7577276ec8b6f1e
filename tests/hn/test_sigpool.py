"""Deferred signature checks in worker processes (hn/sigpool.py, hn/sigworker.py): the reader
returns the same memories and raises the same first error with and without workers, and a
worker that fails or lies cannot make a memory pass or fail."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pygit2
import pytest

from palimpsest.canonical import encode
from palimpsest.errors import InvalidInput
from palimpsest.hn import store
from palimpsest.hn.envelope import default_stream, memory_id, sign_text
from palimpsest.hn.store import sigpool, sigworker
from tests.hn.helpers import ALICE, BOB
from tests.hn.streams import (
    append_raw,
    build_stream,
    head_commit,
    memory_tree,
    new_repo,
    raw_commit,
    record_wire,
)
from tests.hn.test_store import CORRUPTION_NAMES, _corrupt_head, _corruptions

A, S = ALICE.actor, default_stream(ALICE.actor)


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tiny batches make a handful of memories exercise dispatch, busy workers and draining.
    monkeypatch.setattr(sigpool, "BATCH", 2)


def _outcome(repo: pygit2.Repository, workers: int) -> object:
    try:
        return [(m.memory_id, m.commit, m.ref) for m in store.collect(repo, workers=workers)]
    except InvalidInput as exc:
        return ("error", exc.code, exc.message)


def _items(count: int, bad: set[int]) -> list[tuple[bytes, bytes, bytes]]:
    out = []
    for index in range(count):
        payload = f"payload {index}".encode()
        signer = BOB if index in bad else ALICE
        out.append((ALICE.public_key, signer.sign(payload), payload))
    return out


def test_workers_return_the_same_memories(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    build_stream(repo, ALICE, 9)
    build_stream(repo, BOB, 4)
    sequential = _outcome(repo, 0)
    assert isinstance(sequential, list) and len(sequential) == 13
    assert _outcome(repo, 1) == sequential
    assert _outcome(repo, 2) == sequential


@pytest.mark.parametrize("case", CORRUPTION_NAMES)
def test_corruption_matrix_same_error_with_workers(tmp_path: Path, case: str) -> None:
    repo = new_repo(tmp_path / "r")
    build_stream(repo, BOB, 5)  # verified first (sorted refs) or after, depending on the IDs
    _corrupt_head(repo, _corruptions(repo)[case])
    sequential = _outcome(repo, 0)
    assert sequential[0] == "error"  # type: ignore[index]
    assert _outcome(repo, 1) == sequential


def _stream_with(repo: pygit2.Repository, bad_signature: int, bad_sequence: int) -> str:
    """Alice's stream of 8 entries: entry ``bad_signature`` signed by Bob, entry
    ``bad_sequence`` numbered wrongly (0 = none of either)."""
    anchor = head_commit(repo)
    parent: list[str] = []
    previous = ""
    for position in range(1, 9):
        sequence = position + 1 if position == bad_sequence else position
        wire = record_wire(ALICE, sequence, previous, anchor, content=f"n{position}")
        payload = encode(wire)
        signer = BOB if position == bad_signature else ALICE
        tree = memory_tree(repo, payload, sign_text(signer.sign(payload)).encode())
        commit = raw_commit(repo, tree, parent)
        parent = [commit]
        previous = memory_id(payload)
    repo.references.create(store.local_ref_name(A, S), pygit2.Oid(hex=parent[0]), force=True)
    return parent[0]


@pytest.mark.parametrize(
    ("bad_signature", "bad_sequence"),
    [(3, 6), (6, 3), (5, 5), (8, 0), (1, 0), (0, 7)],
)
def test_first_error_in_reader_order_wins(
    tmp_path: Path, bad_signature: int, bad_sequence: int
) -> None:
    repo = new_repo(tmp_path / "r")
    build_stream(repo, BOB, 3)
    _stream_with(repo, bad_signature, bad_sequence)
    sequential = _outcome(repo, 0)
    assert sequential[0] == "error"  # type: ignore[index]
    signature_first = bad_signature and (not bad_sequence or bad_signature <= bad_sequence)
    expected = "signature" if signature_first else "sequence"
    assert expected in sequential[2]  # type: ignore[index]
    assert _outcome(repo, 1) == sequential
    assert _outcome(repo, 3) == sequential


def test_walk_error_after_a_bad_signature_in_an_earlier_stream(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "r")
    _stream_with(repo, 2, 0)
    wire = record_wire(BOB, 2, "sha256:" + "0" * 64, head_commit(repo))
    commit, _ = append_raw(repo, wire, ["e" * 40], BOB)  # predecessor object missing
    repo.references.create(
        store.local_ref_name(BOB.actor, default_stream(BOB.actor)), pygit2.Oid(hex=commit)
    )
    sequential = _outcome(repo, 0)
    assert sequential[0] == "error"  # type: ignore[index]
    assert _outcome(repo, 1) == sequential


def _run(checks: sigpool.DeferredSignatures, items: list[tuple[bytes, bytes, bytes]]) -> object:
    with checks:
        for index, (key, sig, payload) in enumerate(items):
            checks.add(key, sig, payload, index)
        return checks.finish()


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-c", "pass"],  # exits at once: every batch comes back unanswered
        [str(Path(sys.executable).with_name("no-such-python"))],  # cannot start at all
    ],
    ids=["worker-exits", "worker-missing"],
)
def test_failed_workers_lose_nothing(command: list[str]) -> None:
    items = _items(11, {4, 9})
    assert _run(sigpool.DeferredSignatures(2, command=command), items) == 4
    assert _run(sigpool.DeferredSignatures(2, command=command), _items(11, set())) is None


LYING_WORKER = """
import struct, sys
h = struct.Struct("<II")
while (head := sys.stdin.buffer.read(8)):
    count, size = h.unpack(head)
    sys.stdin.buffer.read(size)
    sys.stdout.buffer.write(bytes(count)); sys.stdout.buffer.flush()
"""


def test_a_worker_cannot_fail_a_good_signature() -> None:
    # The worker answers "bad" for everything; the reader re-checks and finds no failure.
    checks = sigpool.DeferredSignatures(1, command=[sys.executable, "-c", LYING_WORKER])
    assert _run(checks, _items(9, set())) is None


def test_real_worker_verdicts_and_earliest_failure() -> None:
    assert _run(sigpool.DeferredSignatures(2), _items(15, {13, 6, 7})) == 6
    assert _run(sigpool.DeferredSignatures(0), _items(15, {13, 6, 7})) == 6


def test_workers_are_gone_after_close() -> None:
    checks = sigpool.DeferredSignatures(2)
    with checks:
        for index, (key, sig, payload) in enumerate(_items(8, set())):
            checks.add(key, sig, payload, index)
        procs = [w.proc for w in checks._workers]
        assert procs and all(p is not None for p in procs)
        assert checks.finish() is None
    assert all(p is not None and p.poll() is not None for p in procs)


def test_worker_frame_round_trip() -> None:
    items = _items(3, {1})
    batch = [(k, s, p, i, i) for i, (k, s, p) in enumerate(items)]
    frame = sigpool._frame(batch)
    out = io.BytesIO()
    sigworker.serve(io.BytesIO(frame + frame), out)
    assert out.getvalue() == b"\x01\x00\x01" * 2


def test_worker_refuses_a_truncated_frame() -> None:
    frame = sigpool._frame([(ALICE.public_key, b"s" * 64, b"payload", 0, 0)])
    with pytest.raises(EOFError):
        sigworker.serve(io.BytesIO(frame[:-3]), io.BytesIO())


@pytest.mark.parametrize(
    ("value", "expected"), [("0", 0), ("1", 1), ("3", 3), ("99", 8), ("-2", 0), ("many", 0)]
)
def test_worker_count_from_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: int
) -> None:
    monkeypatch.setenv("PAL_VERIFY_WORKERS", value)
    assert sigpool.worker_count(10) == expected


def test_small_reads_stay_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PAL_VERIFY_WORKERS", raising=False)
    assert sigpool.worker_count(sigpool.MIN_POOL_MEMORIES - 1) == 0
