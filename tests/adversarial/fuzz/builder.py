# ruff: noqa: E501 - seed tables read best one case per line
"""Deterministic builders of fuzz seeds that need keys, hashes or checksums (see README.md).

Hand-written hostile seeds are plain files in the per-target folders next to this file; seeds
that must carry a valid signature, memory ID, actor fingerprint or cursor checksum are built
here from fixed Ed25519 seeds, so every byte is reproducible. The fuzz targets call these
functions for their seed corpora; to look at the bytes::

    python -m tests.adversarial.fuzz.builder /tmp/seeds
"""

from __future__ import annotations

import base64
import struct
import sys
from pathlib import Path
from typing import Any

from palimpsest.canonical import encode
from palimpsest.hn.envelope import (
    Anchor,
    Applicability,
    Envelope,
    Handoff,
    PathAnchor,
    Record,
    default_stream,
    encode_envelope,
    memory_id,
    sign_text,
)
from palimpsest.identity import Identity, export_document, identity_from_seed

ALICE = identity_from_seed("Alice Agent", bytes(range(32)))
BOB = identity_from_seed("Bob Agent", bytes(range(32, 64)))
ANCHOR = "a" * 40
BLOB = "b" * 40
SUBJECT = "proposal:sha256:" + "c" * 64
TARGET_ID = "sha256:" + "d" * 64
TIMESTAMP = "2026-08-30T12:34:56.123456789Z"


def _envelope(
    who: Identity,
    operation: str,
    sequence: int = 1,
    previous: str = "",
    record: Record | None = None,
    **extra: Any,
) -> Envelope:
    return Envelope(
        protocol="hn-memory/0",
        operation=operation,
        actor=who.actor,
        actor_name=who.name,
        public_key=who.public_key_text,
        stream=default_stream(who.actor),
        sequence=sequence,
        timestamp=extra.pop("timestamp", TIMESTAMP),
        previous=previous,
        record=record,
        **extra,
    )


def _record(kind: str, content: str, **extra: Any) -> Record:
    anchor = extra.pop("anchor", Anchor(ANCHOR))
    mode = extra.pop("mode", "descendants")
    return Record(
        kind=kind,
        content=content,
        anchor=anchor,
        applicability=Applicability(mode, anchor.subject if mode == "subject" else ""),
        **extra,
    )


def envelopes() -> dict[str, bytes]:
    """Valid canonical ``memory.json`` payloads: every operation and kind, every optional field."""
    rich = Anchor(
        ANCHOR,
        (PathAnchor("README.md", BLOB), PathAnchor("docs/gone.md", "absent")),
        SUBJECT,
    )
    records = {
        "observation": _record("observation", "plain note"),
        "decision": _record("decision", "Keep <raw> & \u2028 escapes\u00e9", anchor=rich,
                            topics=("architecture", "memory"), evidence=("git:" + BLOB,)),
        "assumption-subject": _record("assumption", "scoped", anchor=rich, mode="subject"),
        "attempt": _record("attempt", "tried it", attempt_outcome="failed-fast", mode="exact"),
        "verification": _record(
            "verification", "checked", evidence=("event:" + TARGET_ID, "memory:" + TARGET_ID)
        ),
        "handoff": _record(
            "handoff",
            "over to you",
            handoff=Handoff(("done one",), ("it holds",), (), ("next \x1b[2J step",)),
        ),
        "controls": _record("observation", "bell\x07 nul\x00 bidi\u202e tab\t nl\n"),
    }
    out = {f"record-{name}": encode_envelope(_envelope(ALICE, "record", record=rec))
           for name, rec in records.items()}  # fmt: skip
    first = out["record-observation"]
    out["record-sequence-2"] = encode_envelope(
        _envelope(ALICE, "record", 2, memory_id(first), records["observation"],
                  timestamp="2026-08-30T12:34:57+02:00")
    )
    out["supersede"] = encode_envelope(
        _envelope(ALICE, "supersede", 2, memory_id(first), records["decision"],
                  target=memory_id(first))
    )
    out["retract"] = encode_envelope(
        _envelope(ALICE, "retract", 3, TARGET_ID, target=memory_id(first), reason="obsolete")
    )
    out["challenge"] = encode_envelope(
        _envelope(BOB, "challenge", 1, target=memory_id(first), reason="contradicted",
                  evidence=("git:" + BLOB,))
    )
    return out


def signature(payload: bytes, who: Identity = ALICE) -> bytes:
    """The ``signature`` file text over ``payload``."""
    return sign_text(who.sign(payload)).encode("ascii")


def identity_documents() -> dict[str, bytes]:
    """Exported private-key documents of the fixed identities (what ``pal id export`` writes)."""
    return {"alice": export_document(ALICE), "bob": export_document(BOB)}


def public_keys_from_hex(lines: bytes) -> dict[str, bytes]:
    """``weak-keys.txt`` (hex, one key a line, ``#`` comments) as unpadded base64 key texts."""
    out = {}
    for number, raw in enumerate(lines.decode("utf-8").splitlines()):
        text = raw.split("#", 1)[0].strip()
        if text:
            out[f"weak-key-{number}"] = base64.b64encode(bytes.fromhex(text)).rstrip(b"=")
    return out


# ------------------------------------------------------------------------- Git object sets

BLOB_KIND, TREE_KIND, COMMIT_KIND, TAG_KIND = 0, 1, 2, 3


def pack_objects(objects: list[tuple[int, bytes]]) -> bytes:
    """The ``gitstream`` target's input format: ``kind:u8 length:u16be body`` per object.

    Bodies may hold placeholders resolved against the objects written before them:
    ``{h:N}`` hex object ID of object N, ``{r:N}`` its raw 20 bytes, ``{m:N}`` the memory ID
    (``sha256:`` + SHA-256) of object N's bytes, ``{s:N}`` Alice's signature over them, ``{k}``
    Alice's public key, ``{a}`` her actor ID and ``{t}`` her default stream.
    """
    out = bytearray()
    for kind, body in objects:
        out += struct.pack(">BH", kind, len(body)) + body
    return bytes(out)


def _memory_payload(sequence: int, previous_ref: str, content: str) -> bytes:
    wire: dict[str, Any] = {
        "protocol": "hn-memory/0",
        "operation": "record",
        "actor": "{a}",
        "actorName": "Alice Agent",
        "publicKey": "{k}",
        "stream": "{t}",
        "sequence": sequence,
        "timestamp": f"2026-08-30T12:00:{sequence:02d}Z",
    }
    if previous_ref:
        wire["previous"] = previous_ref
    wire["record"] = {
        "kind": "observation",
        "content": content,
        "anchor": {"commit": ANCHOR},
        "applicability": {"mode": "descendants"},
        "topics": [],
        "evidence": [],
    }
    return encode(wire)


def _tree(payload: int, sig: int, *, mode: bytes = b"100644", extra: bytes = b"") -> bytes:
    return (
        mode + b" memory.json\x00{r:%d}" % payload
        + mode + b" signature\x00{r:%d}" % sig
        + extra
    )  # fmt: skip


def _commit(tree: int, *parents: int, author: bytes = b"A <a@hn.invalid>") -> bytes:
    lines = [b"tree {h:%d}" % tree, *(b"parent {h:%d}" % p for p in parents)]
    lines += [b"author " + author + b" 0 +0000", b"committer A <a@hn.invalid> 0 +0000", b"", b"m"]
    return b"\n".join(lines) + b"\n"


def stream_object_sets() -> dict[str, bytes]:
    """A valid two-entry stream of Alice's and hostile variations (malformed objects)."""
    entry1 = [
        (BLOB_KIND, _memory_payload(1, "", "first")),  # 0
        (BLOB_KIND, b"{s:0}"),  # 1
        (TREE_KIND, _tree(0, 1)),  # 2
        (COMMIT_KIND, _commit(2)),  # 3
    ]
    entry2 = [
        (BLOB_KIND, _memory_payload(2, "{m:0}", "second")),  # 4
        (BLOB_KIND, b"{s:4}"),  # 5
        (TREE_KIND, _tree(4, 5)),  # 6
        (COMMIT_KIND, _commit(6, 3)),  # 7
    ]
    sets = {
        "valid-one": entry1,
        "valid-two": entry1 + entry2,
        "extra-file": [*entry1[:2], (BLOB_KIND, b"x"), (TREE_KIND, _tree(0, 1, extra=b"100644 z\x00{r:2}")),
                       (COMMIT_KIND, _commit(3))],
        "zero-padded-mode": [*entry1[:2], (TREE_KIND, _tree(0, 1, mode=b"0100644")),
                             (COMMIT_KIND, _commit(2))],
        "garbage-tree": [*entry1[:2], (TREE_KIND, b"100644 memory.json"), (COMMIT_KIND, _commit(2))],
        "tree-is-blob": [*entry1[:2], (COMMIT_KIND, _commit(0))],
        "merge-commit": [*entry1, (COMMIT_KIND, _commit(2, 3, 3))],
        "missing-email": [*entry1[:3], (COMMIT_KIND, _commit(2, author=b"A"))],
        "head-is-tree": entry1[:3],
        "missing-parent": [*entry1[:3], (COMMIT_KIND, b"tree {h:2}\nparent " + b"0" * 40 +
                           b"\nauthor A <a@hn.invalid> 0 +0000\ncommitter A <a@hn.invalid> 0 +0000\n\nm\n")],
        "bad-signature": [*entry1[:1], (BLOB_KIND, b"{s:4}"), *entry1[2:]],
        "sequence-gap": [*entry1, (BLOB_KIND, _memory_payload(3, "{m:0}", "gap")), (BLOB_KIND, b"{s:4}"),
                         (TREE_KIND, _tree(4, 5)), (COMMIT_KIND, _commit(6, 3))],
        "symlink-entry": [*entry1[:2], (TREE_KIND, _tree(0, 1, mode=b"120000")), (COMMIT_KIND, _commit(2))],
        "tag-head": [*entry1, (TAG_KIND, b"object {h:3}\ntype commit\ntag t\ntagger A <a@hn.invalid> 0 +0000\n\nt\n")],
    }
    return {name: pack_objects(objects) for name, objects in sets.items()}


def main(out: Path) -> None:
    """Write every built seed below ``out`` for inspection."""
    groups = {
        "envelope": envelopes(),
        "identity": identity_documents(),
        "gitstream": stream_object_sets(),
    }
    for group, seeds in groups.items():
        (out / group).mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            (out / group / name).write_bytes(data)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
