"""``.hn/policy.json``: the strict policy document and memory trust classes (§15).

Pure: callers pass the exact blob bytes read at the query commit (or None when absent), and
:func:`trusting` returns the bytes of a document that trusts more actors and kinds (``pal
memory policy trust`` writes them to the work tree; committing is up to the user).
The policy is a repository file, so it need not be canonical JSON, but it is decoded strictly
(duplicate keys, BOM, NaN, invalid UTF-8 refused) and unknown fields are rejected.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from palimpsest.canonical import decode, encode_indent
from palimpsest.errors import InvalidInput
from palimpsest.hn.ids import KINDS, memory_id

TYPE_CHECKING = False  # typing stays unimported at run time (the warm recall's start-up)
if TYPE_CHECKING:
    from typing import Any

POLICY_VERSION = "hn.policy/0"
MISSING_POLICY_DIGEST = memory_id(b"hn-memory-policy-missing-v0")
MAX_POLICY_BYTES = 1024 * 1024
TRUST_CLASSES = ("qualified", "actor-untrusted", "kind-untrusted", "policy-missing")

_ACTOR = re.compile(r"[0-9a-f]{64}")
_TOP_KEYS = frozenset(("version", "maintainers", "proposals", "pipelines", "memory"))
_PROPOSAL_KEYS = frozenset(
    ("requiredApprovals", "requiredAccepts", "trustedReviewers", "allowAuthorApproval")
)
_MEMORY_KEYS = frozenset(("trustedActors", "trustedKinds"))


@dataclass(frozen=True, slots=True)
class MemoryPolicy:
    """The optional ``memory`` section: exact actors and kinds that qualify."""

    trusted_actors: frozenset[str]
    trusted_kinds: frozenset[str]


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """The policy as seen from one query commit."""

    commit: str
    digest: str
    memory: MemoryPolicy | None

    def trust(self, actor: str, kind: str) -> str:
        """Trust class of a record (§15.1); orthogonal to lifecycle and evidence."""
        if self.memory is None:
            return "policy-missing"
        if actor not in self.memory.trusted_actors:
            return "actor-untrusted"
        if kind not in self.memory.trusted_kinds:
            return "kind-untrusted"
        return "qualified"


def _bad(message: str) -> InvalidInput:
    return InvalidInput(
        f"invalid policy: {message}",
        code="invalid-policy",
        hint="fix .hn/policy.json at the query commit",
    )


def _obj(value: Any, keys: frozenset[str], where: str, required: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _bad(f"{where} must be an object")
    extra = value.keys() - keys
    if extra:
        raise _bad(f"unknown field {sorted(extra)[0][:64]!r} in {where}")
    missing = required - value.keys()
    if missing:
        raise _bad(f"{where} lacks {sorted(missing)[0]}")
    return value


def _sorted_unique(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(f"{where} must be a list of strings")
    if any(a >= b for a, b in itertools.pairwise(value)):
        raise _bad(f"{where} must be sorted and unique")
    return value


def _int(value: Any, where: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise _bad(f"{where} must be an integer from {low} to {high}")
    return value


def parse_policy(data: bytes) -> MemoryPolicy | None:
    """Parse a policy document strictly; return its memory section (None when absent).

    Raises:
        InvalidInput: ``invalid-policy`` (a present but invalid policy makes recall fail).
    """
    try:
        doc = decode(data, max_bytes=MAX_POLICY_BYTES, trailing_whitespace=True)
    except InvalidInput as exc:
        raise _bad(exc.message) from exc
    top = _obj(doc, _TOP_KEYS, "policy", _TOP_KEYS - {"memory"})
    if top["version"] != POLICY_VERSION:
        raise _bad(f"version must be {POLICY_VERSION}")
    maintainers = top["maintainers"]
    if not isinstance(maintainers, list) or not maintainers:
        raise _bad("maintainers must list at least one actor")
    if not all(isinstance(m, str) and _ACTOR.fullmatch(m) for m in maintainers):
        raise _bad("maintainers must be full actor IDs")
    if len(set(maintainers)) != len(maintainers):
        raise _bad("maintainers must be unique")
    proposals = _obj(top["proposals"], _PROPOSAL_KEYS, "proposals", _PROPOSAL_KEYS)
    _int(proposals["requiredApprovals"], "requiredApprovals", 0, 64)
    _int(proposals["requiredAccepts"], "requiredAccepts", 1, len(maintainers))
    reviewers = proposals["trustedReviewers"]
    if not isinstance(reviewers, list) or not all(
        isinstance(r, str) and _ACTOR.fullmatch(r) for r in reviewers
    ):
        raise _bad("trustedReviewers must be a list of actor IDs")
    if not isinstance(proposals["allowAuthorApproval"], bool):
        raise _bad("allowAuthorApproval must be a boolean")
    if not isinstance(top["pipelines"], dict):
        raise _bad("pipelines must be an object")
    if "memory" not in top or top["memory"] is None:
        return None
    memory = _obj(top["memory"], _MEMORY_KEYS, "memory", _MEMORY_KEYS)
    actors = _sorted_unique(memory["trustedActors"], "memory.trustedActors")
    kinds = _sorted_unique(memory["trustedKinds"], "memory.trustedKinds")
    if not all(_ACTOR.fullmatch(a) for a in actors):
        raise _bad("memory.trustedActors must be full actor IDs")
    if not all(k in KINDS for k in kinds):
        raise _bad("memory.trustedKinds holds an unknown kind")
    return MemoryPolicy(frozenset(actors), frozenset(kinds))


def trusting(
    document: bytes | None, actors: Iterable[str], kinds: Iterable[str], *, maintainer: str
) -> bytes:
    """A policy document that also trusts ``actors`` for ``kinds`` (§15.2): the ``memory``
    section's two lists become the sorted, unique union of what was there and what is given;
    every other field keeps its value and place.  Without a document a new one is made with
    ``maintainer`` and the upstream defaults (no approvals, one accept, no pipelines).

    Written as indented JSON with a trailing LF (a repository file, not a canonical one).

    Raises:
        InvalidInput: ``invalid-policy`` for an invalid existing document, a malformed actor ID
            or an unknown kind.
    """
    actors, kinds = list(actors), list(kinds)
    if not all(_ACTOR.fullmatch(a) for a in [*actors, maintainer]):
        raise _bad("actors must be full 64-hex actor IDs")
    if any(k not in KINDS for k in kinds):
        raise _bad(f"unknown kind; use {', '.join(KINDS)}")
    if document is None:
        doc: dict[str, Any] = {
            "version": POLICY_VERSION,
            "maintainers": [maintainer],
            "proposals": {"requiredApprovals": 0, "requiredAccepts": 1, "trustedReviewers": [],
                          "allowAuthorApproval": False},
            "pipelines": {},
        }  # fmt: skip
    else:
        parse_policy(document)  # refuse to extend an invalid policy
        doc = decode(document, max_bytes=MAX_POLICY_BYTES, trailing_whitespace=True)
    memory = doc.get("memory") or {"trustedActors": [], "trustedKinds": []}
    doc["memory"] = {
        "trustedActors": sorted({*memory["trustedActors"], *actors}),
        "trustedKinds": sorted({*memory["trustedKinds"], *kinds}),
    }
    out = encode_indent(doc)
    parse_policy(out)
    return out


def policy_context(commit: str, blob: bytes | None) -> PolicyContext:
    """The policy context at ``commit`` given the ``.hn/policy.json`` bytes there (or None)."""
    if blob is None:
        return PolicyContext(commit, MISSING_POLICY_DIGEST, None)
    return PolicyContext(commit, memory_id(blob), parse_policy(blob))


__all__ = [
    "MISSING_POLICY_DIGEST",
    "TRUST_CLASSES",
    "MemoryPolicy",
    "PolicyContext",
    "parse_policy",
    "policy_context",
    "trusting",
]
