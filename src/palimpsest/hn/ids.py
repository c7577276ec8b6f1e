"""The ``hn-memory/0`` vocabulary: protocol names, kinds, modes, typed IDs, tokens and paths
(hn-memory-v0.md §3–§5), and memory IDs (§7).

Pure and light: the envelope model (:mod:`palimpsest.hn.envelope`) validates with these, and so
do readers that never decode an envelope (recall requests, the index's queries), which must not
load the model, its signature code or its keys.
"""

from __future__ import annotations

import hashlib
import posixpath
import re

from palimpsest.text import has_control

PROTOCOL = "hn-memory/0"
LEGACY_PROTOCOL = "nh-memory/0"
OPERATIONS = ("record", "supersede", "retract", "challenge")
KINDS = ("observation", "decision", "assumption", "attempt", "verification", "handoff")
MODES = ("exact", "descendants", "subject")
ABSENT = "absent"
MAX_PATH_BYTES = 4096

HEX64 = re.compile(r"[0-9a-f]{64}")
OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
FULL_ID = re.compile(r"sha256:[0-9a-f]{64}")
SUBJECT = re.compile(r"(?:issue|proposal|event|policy|pipeline|run):sha256:[0-9a-f]{64}")
EVIDENCE = re.compile(
    r"git:(?:[0-9a-f]{40}|[0-9a-f]{64})|event:sha256:[0-9a-f]{64}|memory:sha256:[0-9a-f]{64}"
)
TOKEN = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")


def blen(text: str) -> int:
    """UTF-8 byte length (every bound in the protocol counts bytes).

    ``surrogatepass`` keeps a lone surrogate from raising here; the canonical re-encoding of
    an envelope refuses it.
    """
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def valid_path(path: str) -> bool:
    """A repository-relative path in clean form with no ``..`` segment (§4.3)."""
    size = blen(path)
    if size == 0 or size > MAX_PATH_BYTES or path[0] == "/" or "\\" in path or path == ".":
        return False
    if posixpath.normpath(path) != path or has_control(path):
        return False
    return ".." not in path.split("/")


def memory_id(payload: bytes) -> str:
    """``sha256:`` + hex SHA-256 of the exact bytes (memory IDs, digests, domain IDs)."""
    return "sha256:" + hashlib.sha256(payload).hexdigest()


__all__ = [
    "ABSENT",
    "EVIDENCE",
    "FULL_ID",
    "HEX64",
    "KINDS",
    "LEGACY_PROTOCOL",
    "MAX_PATH_BYTES",
    "MODES",
    "OBJECT_ID",
    "OPERATIONS",
    "PROTOCOL",
    "SUBJECT",
    "TOKEN",
    "blen",
    "memory_id",
    "valid_path",
]
