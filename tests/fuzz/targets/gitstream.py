"""Fuzz target ``gitstream``: the verified stream reader over hostile Git objects (§11, C9-C15).

Input: a set of raw Git objects (``kind:u8 length:u16be body`` each, see
``tests/adversarial/fuzz/builder.py``) written verbatim into a bare repository — no libgit2
validation, as a fetch into quarantine or a hostile push delivers them — with placeholders so a
mutated stream can still name its own objects: ``{h:N}``/``{r:N}`` the hex/raw ID of object N,
``{m:N}`` its memory ID, ``{s:N}`` Alice's signature over it, ``{k}``/``{a}``/``{t}`` her key,
actor and default stream. Alice's memory ref then points at the last object, and the repository
is read the way replication reads a quarantine (``store.load_stream`` with a walk bound) and the
way recall reads every stream (``store.collect``).

Expected refusals: ``InvalidInput`` with code ``invalid-memory-stream`` (naming ref, commit and
rule). Anything else — a pygit2 ``GitError``, ``KeyError``, ``ValueError``, ``UnicodeError``
from libgit2's parsers — is a finding.

Oracle for a stream the reader accepts: each memory is at its position (sequence 1 … n), names
its predecessor's memory ID, belongs to the ref's actor and stream, has the memory ID of its
exact payload, a signature that verifies under the envelope's key over those bytes, and a commit
with at most one parent whose tree is exactly ``memory.json`` + ``signature``; ``collect`` gives
the same memories; the incremental reader (``load_stream_since``) from the first entry gives the
same tail.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import struct

from tests.fuzz.harness import Refused, Target, check, files, instrumented, refusals, scratch_dir

with instrumented():
    import pygit2
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from palimpsest.errors import InvalidInput
    from palimpsest.hn import store
    from palimpsest.hn.envelope import default_stream, memory_id, verify_signature
    from palimpsest.identity import b64_nopad_decode
    from tests.adversarial.fuzz.builder import ALICE, signature, stream_object_sets

REFUSALS = refusals({InvalidInput: {"invalid-memory-stream"}})
KINDS = {
    0: pygit2.enums.ObjectType.BLOB,
    1: pygit2.enums.ObjectType.TREE,
    2: pygit2.enums.ObjectType.COMMIT,
    3: pygit2.enums.ObjectType.TAG,
}
STREAM = default_stream(ALICE.actor)
REF = store.local_ref_name(ALICE.actor, STREAM)
MAX_OBJECTS = 32
MAX_ENTRIES = 16
_PLACEHOLDER = re.compile(rb"\{([hrms]):([0-9]{1,2})\}|\{([kat])\}")
_FIXED = {b"k": ALICE.public_key_text.encode(), b"a": ALICE.actor.encode(), b"t": STREAM.encode()}
_RESET_EVERY = 2000  # a fresh repository now and then keeps long runs' object stores small


class _Repository:
    def __init__(self) -> None:
        self.root = scratch_dir()
        self.count = 0
        self.repo = self._fresh()

    def _fresh(self) -> pygit2.Repository:
        path = self.root / f"r{self.count}"
        return pygit2.init_repository(str(path), bare=True)

    def next(self) -> pygit2.Repository:
        self.count += 1
        if self.count % _RESET_EVERY == 0:
            shutil.rmtree(self.repo.path, ignore_errors=True)
            self.repo = self._fresh()
        return self.repo


_STATE: _Repository | None = None


def _repository() -> pygit2.Repository:
    global _STATE  # noqa: PLW0603 - one scratch repository per fuzzing process
    if _STATE is None:
        _STATE = _Repository()
    return _STATE.next()


def unpack(data: bytes) -> list[tuple[int, bytes]]:
    """Split the input into (kind, body) objects; a truncated tail is dropped."""
    objects, offset = [], 0
    while offset + 3 <= len(data) and len(objects) < MAX_OBJECTS:
        kind, length = struct.unpack_from(">BH", data, offset)
        offset += 3
        objects.append((kind & 3, data[offset : offset + length]))
        offset += length
    return objects


def _resolve(body: bytes, written: list[tuple[bytes, str]]) -> bytes:
    def one(match: re.Match[bytes]) -> bytes:
        if match.group(3):
            return _FIXED[match.group(3)]
        index = int(match.group(2))
        if index >= len(written):
            return match.group(0)  # a forward reference stays literal text
        resolved, oid = written[index]
        return {
            b"h": oid.encode(),
            b"r": bytes.fromhex(oid),
            b"m": memory_id(resolved).encode(),
            b"s": signature(resolved),
        }[match.group(1)]

    return _PLACEHOLDER.sub(one, body)


def _links(repo: pygit2.Repository, commit: str) -> tuple[pygit2.Oid, list[str]]:
    """The tree and parents a raw commit object names. Read raw, not through libgit2's commit
    parser: §11 leaves author and committer unchecked, and libgit2 refuses a malformed one."""
    kind, raw = repo.odb.read(pygit2.Oid(hex=commit))[:2]
    check(kind == pygit2.enums.ObjectType.COMMIT, "a memory that is no commit was accepted")
    header = raw.split(b"\n\n", 1)[0].split(b"\n")
    check(header[0].startswith(b"tree "), "a commit without a tree line was accepted")
    parents = [line[7:].decode() for line in header[1:] if line.startswith(b"parent ")]
    return pygit2.Oid(hex=header[0][5:].decode()), parents


def _check_stream(
    repo: pygit2.Repository, memories: tuple[object, ...], ref: store.MemoryRef
) -> None:
    check(memories, "an empty stream was accepted")
    previous = ""
    for position, memory in enumerate(memories, start=1):
        env = memory.envelope  # type: ignore[attr-defined]
        payload = memory.payload  # type: ignore[attr-defined]
        check(env.sequence == position, "an entry is not at its position")
        check(env.previous == previous, "an entry does not name its predecessor")
        check((env.actor, env.stream) == (ALICE.actor, STREAM), "an entry of another owner")
        check(memory.memory_id == "sha256:" + hashlib.sha256(payload).hexdigest(), "memory ID")  # type: ignore[attr-defined]
        raw_key = b64_nopad_decode(env.public_key, 32, "key")
        raw_sig = b64_nopad_decode(memory.signature, 64, "signature")  # type: ignore[attr-defined]
        Ed25519PublicKey.from_public_bytes(raw_key).verify(raw_sig, payload)
        verify_signature(env, payload, memory.signature)  # type: ignore[attr-defined]
        tree_id, parents = _links(repo, memory.commit)  # type: ignore[attr-defined]
        check(len(parents) <= 1, "a merge commit was accepted")
        tree = repo[tree_id]
        check(sorted(e.name for e in tree) == ["memory.json", "signature"], "extra tree entries")
        check(all(e.filemode == pygit2.enums.FileMode.BLOB for e in tree), "odd tree modes")
        check(repo[tree["memory.json"].id].data == payload, "payload is not the tree's blob")
        previous = memory.memory_id  # type: ignore[attr-defined]
    collected = store.collect(repo, workers=0)
    check(collected == memories, "collect disagrees with load_stream")
    if len(memories) > 1:
        first = memories[0]
        tail = store.load_stream_since(repo, ref, first.commit, 1, first.memory_id)  # type: ignore[attr-defined]
        check(tail == memories[1:], "the incremental reader disagrees with the full one")


def one_input(data: bytes) -> None:
    objects = unpack(data)
    if not objects:
        return
    repo = _repository()
    written: list[tuple[bytes, str]] = []
    for kind, body in objects:
        resolved = _resolve(body, written)
        written.append((resolved, str(repo.odb.write(KINDS[kind], resolved))))
    head = written[-1][1]
    for name in list(repo.references):
        repo.references.delete(name)
    repo.references.create(REF, pygit2.Oid(hex=head), force=True)
    ref = store.MemoryRef(REF, ALICE.actor, STREAM, head)
    memories = REFUSALS.attempt(store.load_stream, repo, ref, max_entries=MAX_ENTRIES)
    collected = REFUSALS.attempt(store.collect, repo, workers=0)
    if isinstance(memories, Refused):
        check(isinstance(collected, Refused), "collect accepted a stream load_stream refuses")
        return
    if isinstance(collected, Refused):  # only the walk bound differs: a stream over 16 entries
        check(len(memories) > MAX_ENTRIES, "collect refused a stream load_stream accepts")
        return
    _check_stream(repo, memories, ref)


def seeds() -> list[tuple[str, bytes]]:
    return [
        *files("fuzz/gitstream"),
        *((f"gitstream/built/{name}", data) for name, data in stream_object_sets().items()),
    ]


TARGET = Target(
    name="gitstream",
    one_input=one_input,
    refusals=REFUSALS,
    seeds=seeds,
    classes=("B4", "B6", "B7", "C9", "C10", "C12", "C14", "C15"),
    runs=1_000,
    max_len=8192,
    summary="verified stream reader (store.load_stream/collect) over raw hostile Git objects",
    dictionary=(b"100644 memory.json\x00", b"100644 signature\x00", b"040000 ", b"120000 ",
                b"160000 ", b"100755 ", b"tree {h:2}\n", b"parent {h:3}\n", b"{r:0}", b"{s:0}",
                b"{m:0}", b"author ", b"committer ", b"encoding ", b"gpgsig ", b" +0000\n",
                b"\x00\x00", b".git", b"..", b"object {h:3}\ntype commit\n"),
)

if __name__ == "__main__":
    TARGET.fuzz()
