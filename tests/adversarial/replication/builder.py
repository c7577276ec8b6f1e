"""Deterministic builders of hostile replication remotes (see README.md in this directory).

Every remote is a bare repository with one ordinary ``main`` commit (the anchor every memory
names) plus memory refs.  Each hostile case also carries Carol's independent, valid stream, which
must be promoted whatever happens to the bad one.  Keys come from fixed seeds and timestamps are
fixed, so every object ID is reproducible; running this file as a script rebuilds the remotes
under a directory for manual inspection::

    python -m tests.adversarial.replication.builder /tmp/hostile
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from palimpsest.hn.envelope import (
    PROTOCOL,
    Anchor,
    Applicability,
    Envelope,
    Record,
    default_stream,
    encode_envelope,
    memory_id,
    sign_text,
)
from palimpsest.hn.store import local_ref_name, write_memory_objects
from palimpsest.identity import Identity, identity_from_seed

ALICE = identity_from_seed("Alice Agent", bytes(range(32)))
CAROL = identity_from_seed("Carol Agent", bytes(range(64, 96)))
DAVE = identity_from_seed("Dave Agent", bytes(range(96, 128)))
MALLORY = identity_from_seed("Mallory Agent", bytes(range(128, 160)))
MISSING_TARGET = "sha256:" + "ab" * 32


@dataclass(frozen=True, slots=True)
class Entry:
    """One signed memory: exact payload bytes and signature text."""

    payload: bytes
    signature: str

    @property
    def memory_id(self) -> str:
        """The full memory ID."""
        return memory_id(self.payload)


@dataclass
class Remote:
    """A built remote: where it is, its anchor commit, and the expected outcome per stream."""

    path: Path
    base: str
    expected: dict[str, str] = field(default_factory=dict)
    bad_heads: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # stream -> diagnostic substring
    budgets: dict[str, int] = field(default_factory=dict)


def _timestamp(sequence: int, salt: int = 0) -> str:
    return f"2026-09-01T10:{salt:02d}:{sequence:02d}Z"


def entry(
    who: Identity,
    sequence: int,
    previous: str,
    base: str,
    *,
    content: str = "",
    operation: str = "record",
    target: str = "",
    stream: str = "",
    salt: int = 0,
    signer: Identity | None = None,
) -> Entry:
    """Build and sign one envelope (``signer`` ≠ ``who`` forges the signature)."""
    record = None
    reason = ""
    if operation in ("record", "supersede"):
        record = Record(
            kind="observation",
            content=content or f"{who.name} entry {sequence}",
            anchor=Anchor(commit=base),
            applicability=Applicability(mode="descendants"),
            topics=("replication",),
        )
    elif operation == "retract":
        reason = "incorrect"
    elif operation == "challenge":
        reason = "evidence-mismatch"
    envelope = Envelope(
        protocol=PROTOCOL,
        operation=operation,
        actor=who.actor,
        actor_name=who.name,
        public_key=who.public_key_text,
        stream=stream or default_stream(who.actor),
        sequence=sequence,
        timestamp=_timestamp(sequence, salt),
        previous=previous,
        record=record,
        target=target,
        reason=reason,
    )
    payload = encode_envelope(envelope)
    return Entry(payload, sign_text((signer or who).sign(payload)))


def chain(who: Identity, base: str, count: int, *, salt: int = 0) -> list[Entry]:
    """``count`` valid consecutive records of ``who``'s default stream."""
    out: list[Entry] = []
    for sequence in range(1, count + 1):
        previous = out[-1].memory_id if out else ""
        out.append(entry(who, sequence, previous, base, salt=salt))
    return out


def write_chain(
    repo: pygit2.Repository, who: Identity, entries: list[Entry], *, parent: str | None = None
) -> str:
    """Write commits for ``entries`` (each the child of the previous); return the head."""
    head = parent
    for item in entries:
        head = write_memory_objects(
            repo, item.payload, item.signature, author=who.name, actor=who.actor,
            timestamp="2026-09-01T10:00:00Z", parent=head,
        )  # fmt: skip
    assert head is not None
    return head


def set_ref(repo: pygit2.Repository, name: str, head: str) -> None:
    """Create or move a ref (hostile remotes are rewritten freely)."""
    repo.references.create(name, pygit2.Oid(hex=head), force=True)


def new_remote(path: Path) -> Remote:
    """A bare repository with a deterministic ``main`` commit and Carol's valid stream."""
    repo = pygit2.init_repository(str(path), bare=True)
    blob = repo.create_blob(b"hostile remote\n")
    builder = repo.TreeBuilder()
    builder.insert("README.md", blob, pygit2.enums.FileMode.BLOB)
    person = pygit2.Signature("Fixture", "fixture@hn.invalid", 1788260400, 0)
    base = str(repo.create_commit("refs/heads/main", person, person, "base\n",
                                  builder.write(), []))  # fmt: skip
    repo.set_head("refs/heads/main")
    carol = default_stream(CAROL.actor)
    carol_head = write_chain(repo, CAROL, chain(CAROL, base, 2))
    set_ref(repo, local_ref_name(CAROL.actor, carol), carol_head)
    remote = Remote(path=path, base=base)
    remote.expected[carol] = "promoted"
    return remote


def _bad(  # noqa: PLR0917 - a table of cases reads better positionally
    remote: Remote,
    repo: pygit2.Repository,
    who: Identity,
    head: str,
    status: str,
    reason: str,
    *,
    owner: Identity | None = None,
) -> None:
    stream = default_stream(who.actor)
    set_ref(repo, local_ref_name((owner or who).actor, stream), head)
    remote.expected[stream] = status
    remote.reasons[stream] = reason
    remote.bad_heads.append(head)


def forged_signature(path: Path) -> Remote:
    """Alice's entry 2 is signed by Mallory's key; Dave challenges it (dependency fails too)."""
    remote = new_remote(path)
    repo = pygit2.Repository(str(path))
    first = entry(ALICE, 1, "", remote.base)
    forged = entry(ALICE, 2, first.memory_id, remote.base, signer=MALLORY)
    _bad(remote, repo, ALICE, write_chain(repo, ALICE, [first, forged]), "structurally-invalid",
         "signature does not verify")
    challenge = entry(DAVE, 1, "", remote.base, operation="challenge", target=forged.memory_id)
    dave = default_stream(DAVE.actor)
    head = write_chain(repo, DAVE, [challenge])
    set_ref(repo, local_ref_name(DAVE.actor, dave), head)
    remote.expected[dave] = "dependency-missing"
    remote.reasons[dave] = f"lifecycle-target {forged.memory_id}"
    remote.bad_heads.append(head)
    return remote


def owner_mismatch(path: Path) -> Remote:
    """Alice's valid stream advertised under Mallory's ref (ref owner ≠ payload actor)."""
    remote = new_remote(path)
    repo = pygit2.Repository(str(path))
    head = write_chain(repo, ALICE, chain(ALICE, remote.base, 2))
    _bad(remote, repo, ALICE, head, "structurally-invalid", "does not match the ref owner",
         owner=MALLORY)
    return remote


def ambiguous_owners(path: Path) -> Remote:
    """One stream advertised under two owners (Alice's and Mallory's refs)."""
    remote = new_remote(path)
    repo = pygit2.Repository(str(path))
    head = write_chain(repo, ALICE, chain(ALICE, remote.base, 2))
    _bad(remote, repo, ALICE, head, "structurally-invalid", "ambiguous owners")
    set_ref(repo, local_ref_name(MALLORY.actor, default_stream(ALICE.actor)), head)
    return remote


def fork(path: Path) -> Remote:
    """Two validly signed entries at sequence 2, one after the other."""
    remote = new_remote(path)
    repo = pygit2.Repository(str(path))
    first = entry(ALICE, 1, "", remote.base)
    second = entry(ALICE, 2, first.memory_id, remote.base)
    twin = entry(ALICE, 2, second.memory_id, remote.base, content="equivocating twin")
    _bad(remote, repo, ALICE, write_chain(repo, ALICE, [first, second, twin]),
         "structurally-invalid", "sequence 2 at position 3")  # fmt: skip
    return remote


def sequence_gap(path: Path) -> Remote:
    """Sequence 1 followed by sequence 3."""
    remote = new_remote(path)
    repo = pygit2.Repository(str(path))
    first = entry(ALICE, 1, "", remote.base)
    third = entry(ALICE, 3, first.memory_id, remote.base)
    _bad(remote, repo, ALICE, write_chain(repo, ALICE, [first, third]), "structurally-invalid",
         "sequence 3 at position 2")
    return remote


def extra_file(path: Path) -> Remote:
    """A memory tree holding memory.json, signature and attachment.bin."""
    remote = new_remote(path)
    repo = pygit2.Repository(str(path))
    item = entry(ALICE, 1, "", remote.base)
    builder = repo.TreeBuilder()
    builder.insert("memory.json", repo.create_blob(item.payload), pygit2.enums.FileMode.BLOB)
    builder.insert("signature", repo.create_blob(item.signature.encode()),
                   pygit2.enums.FileMode.BLOB)  # fmt: skip
    builder.insert("attachment.bin", repo.create_blob(b"\x00" * 64), pygit2.enums.FileMode.BLOB)
    person = pygit2.Signature("Alice Agent", f"{ALICE.actor[:12]}@hn.invalid", 1788256800, 0)
    head = str(repo.create_commit(None, person, person, f"hn memory {item.memory_id}\n",
                                  builder.write(), []))  # fmt: skip
    _bad(remote, repo, ALICE, head, "structurally-invalid", "exactly memory.json and signature")
    return remote


def over_budget(path: Path) -> Remote:
    """Alice's valid history of 6 entries against a selection allowing 3 events."""
    remote = new_remote(path)
    repo = pygit2.Repository(str(path))
    _bad(remote, repo, ALICE, write_chain(repo, ALICE, chain(ALICE, remote.base, 6)),
         "over-budget", "budget for events")  # fmt: skip
    remote.budgets["max_events"] = 3
    return remote


def missing_supersede_target(path: Path) -> Remote:
    """Alice supersedes a memory that exists nowhere."""
    remote = new_remote(path)
    repo = pygit2.Repository(str(path))
    item = entry(ALICE, 1, "", remote.base, operation="supersede", target=MISSING_TARGET)
    _bad(remote, repo, ALICE, write_chain(repo, ALICE, [item]), "dependency-missing",
         f"lifecycle-target {MISSING_TARGET}")
    return remote


def foreign_supersede(path: Path) -> Remote:
    """Mallory supersedes Carol's record: a lifecycle edge to another actor's memory."""
    remote = new_remote(path)
    repo = pygit2.Repository(str(path))
    carol_first = chain(CAROL, remote.base, 1)[0]
    item = entry(MALLORY, 1, "", remote.base, operation="supersede",
                 target=carol_first.memory_id)  # fmt: skip
    _bad(remote, repo, MALLORY, write_chain(repo, MALLORY, [item]), "relationship-invalid",
         "actor-mismatch")
    return remote


def malformed_object(path: Path) -> Remote:
    """A memory commit whose author line has no email (fsck ``missingEmail``, C14)."""
    remote = new_remote(path)
    repo = pygit2.Repository(str(path))
    item = entry(ALICE, 1, "", remote.base)
    builder = repo.TreeBuilder()
    builder.insert("memory.json", repo.create_blob(item.payload), pygit2.enums.FileMode.BLOB)
    builder.insert("signature", repo.create_blob(item.signature.encode()),
                   pygit2.enums.FileMode.BLOB)  # fmt: skip
    raw = (
        f"tree {builder.write()}\n"
        "author Alice Agent 1788256800 +0000\n"
        f"committer Alice Agent <{ALICE.actor[:12]}@hn.invalid> 1788256800 +0000\n\n"
        f"hn memory {item.memory_id}\n"
    ).encode()
    head = str(repo.odb.write(pygit2.enums.ObjectType.COMMIT, raw))
    _bad(remote, repo, ALICE, head, "structurally-invalid", "fetch failed")
    return remote


CASES = {
    "forged-signature": forged_signature,
    "owner-mismatch": owner_mismatch,
    "ambiguous-owners": ambiguous_owners,
    "fork-duplicate-sequence": fork,
    "sequence-gap": sequence_gap,
    "extra-file": extra_file,
    "over-budget": over_budget,
    "missing-supersede-target": missing_supersede_target,
    "foreign-supersede": foreign_supersede,
    "malformed-object": malformed_object,
}


if __name__ == "__main__":
    root = Path(sys.argv[1])
    root.mkdir(parents=True, exist_ok=True)
    for name, build in CASES.items():
        built = build(root / f"{name}.git")
        print(name, built.path, built.expected)
