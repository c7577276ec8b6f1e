"""Builders shared by the repo-memory tests: a valid golden envelope and signed payloads."""

from __future__ import annotations

import copy
from typing import Any

from palimpsest.canonical import encode
from palimpsest.hn.envelope import default_stream, sign_text
from palimpsest.identity import Identity, identity_from_seed

ALICE = identity_from_seed("Alice Agent", bytes(range(32)))
BOB = identity_from_seed("Bob Agent", bytes(range(32, 64)))
A40 = "a" * 40
B40 = "b" * 40
SUBJECT = "proposal:sha256:" + "c" * 64
TS = "2026-08-30T12:34:56.123456789Z"


def golden_wire(identity: Identity = ALICE) -> dict[str, Any]:
    """The upstream golden record envelope (hn-memory-v0.md §25.2) as an ordered dict."""
    return {
        "protocol": "hn-memory/0",
        "operation": "record",
        "actor": identity.actor,
        "actorName": identity.name,
        "publicKey": identity.public_key_text,
        "stream": default_stream(identity.actor),
        "sequence": 1,
        "timestamp": TS,
        "record": {
            "kind": "decision",
            "content": "Memory content remains inert data.",
            "anchor": {
                "commit": A40,
                "paths": [
                    {"path": "README.md", "blob": B40},
                    {"path": "docs/removed.md", "blob": "absent"},
                ],
                "subject": SUBJECT,
            },
            "applicability": {"mode": "subject", "subject": SUBJECT},
            "topics": ["architecture", "memory"],
            "evidence": ["git:" + "d" * 40, "event:sha256:" + "e" * 64],
        },
    }


def mutate(**changes: Any) -> dict[str, Any]:
    """A deep copy of the golden wire dict with dotted-path changes (value None deletes)."""
    wire = golden_wire()
    for dotted, value in changes.items():
        keys = dotted.split("__")
        target = wire
        for key in keys[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[keys[-1]]
        else:
            target[keys[-1]] = copy.deepcopy(value)
    return wire


_DELETE = object()
DELETE: Any = _DELETE


def payload(wire: dict[str, Any]) -> bytes:
    """Go-canonical bytes of a wire dict."""
    return encode(wire)


def signed(wire: dict[str, Any], identity: Identity = ALICE) -> tuple[bytes, str]:
    """Canonical bytes and their signature text."""
    data = encode(wire)
    return data, sign_text(identity.sign(data))
