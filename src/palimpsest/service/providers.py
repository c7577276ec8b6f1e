"""The built-in provider's capability document (uhp-memories.md §12) — truthful by construction.

Each entry is derived from what the code serves: recall signals from :data:`SERVED_SIGNALS`
(what :mod:`palimpsest.service.ops.recall` answers), kept media from :data:`KEPT_MEDIA`, which
the upload path enforces. A signal the engine lacks is left out here and reported in ``degraded``.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Final

from palimpsest.service.model import CORE_TYPES, PROVIDER_ID, SERVER_TYPES, Wire

# Media types whose bytes the provider keeps (``bytes: "kept"``); anything else is refused with
# memory_unsupported at upload and at write, so a record is never stored without its file.
KEPT_MEDIA: Final = ("text/*", "image/*", "audio/*", "application/pdf", "application/json")
MAX_FILE_BYTES: Final = 25 * 1024 * 1024
SERVED_SIGNALS: Final = ("text", "filters")  # what ops.recall answers
MAX_RECALL_MEMORIES: Final = 200  # subtree cap, reported in degraded when reached
# A memory whose records are a Git repository's hn-memory/0 streams (service/mounts.py).
REPOSITORY_PROVIDER: Final = "hn-memory"
REPOSITORY_SIGNALS: Final = ("text", "filters")  # what service/mounts.py answers


def keeps_media(media_type: str) -> bool:
    """The provider keeps bytes of this media type (parameters after ``;`` ignored)."""
    base = media_type.split(";", 1)[0].strip().lower()
    return any(fnmatchcase(base, pattern) for pattern in KEPT_MEDIA)


TRUST_FILTERS = ("reviewed_by_other", "written_by", "signed_by", "unreviewed_agents")


def capability_document() -> Wire:
    """The document served at ``GET /v1/memories/providers``."""
    return {
        "id": PROVIDER_ID,
        "object": "memory.provider",
        # One store for every memory; the server adds the memory scope to every read and
        # re-checks membership on every fetch by id.
        "isolation": "enforced_filter",
        # Nothing is derived from episodes by a model; the consolidator runs on request.
        "derivation": "none",
        "observe": {"keeps_episodes": True, "answers": "records"},
        "recall": {"signals": list(SERVED_SIGNALS), "abstain": True},
        "history": {"content": "versions", "structure": "none"},
        "revise": "native",
        "forget": "native",
        "erase": {"unreachable": "reported"},
        "prime": True,
        "consolidate": "runs",
        "holds": True,
        "queries": {"named": True, "free": None},
        "types": True,
        "graph": {"entities": "stated"},
        "content": {"media": list(KEPT_MEDIA), "bytes": "kept", "describes": []},
        "limits": {"recall_memories": MAX_RECALL_MEMORIES, "file_bytes": MAX_FILE_BYTES},
        # Trust you can filter by (docs/provenance.md): recall's body x.pal.provenance and
        # prime's provenance parameter; prime's default in a memory that requires review.
        "x.pal.provenance": {"recall": True, "prime": True, "filters": list(TRUST_FILTERS),
                             "prime_default_when_review_required": "unreviewed_agents:false"},
    }


def repository_capability_document() -> Wire:
    """What a mounted repository serves (``service/mounts.py``): verified, applicable,
    evidence-resolved memories of its streams at ``HEAD``, read-only."""
    return {
        "id": REPOSITORY_PROVIDER,
        "object": "memory.provider",
        # Each mounted memory reads its own repository and nothing else.
        "isolation": "container",
        "derivation": "none",
        "observe": False,  # episodes are refused: memory_unsupported
        # text: every term must be present, the repository's lexical recall (no relevance
        # score); filters: the grammar over each record (kind, trust, lifecycle, actor pushed
        # down to the repository's own filters).
        "recall": {"signals": list(REPOSITORY_SIGNALS), "abstain": True},
        # A repository memory is never rewritten: its one signed version is its history
        # (supersede, retract and challenge are memories of their own).
        "history": {"content": "versions", "structure": "none"},
        "revise": False, "forget": False, "erase": False,  # memory_unsupported
        "prime": False,  # a repository memory is never a standing record
        "consolidate": False,
        "holds": False,
        "queries": {"named": False, "free": None},
        "types": False,
        "graph": {"entities": "none"},
        "content": {"media": [], "bytes": "kept", "describes": []},
        "limits": {"recall_memories": MAX_RECALL_MEMORIES},
        "x.pal.source": "hn-memory/0",
        "x.pal.read_only": True,
        # The filter applies, but nothing of a repository is reviewed or signed by this
        # service: reviewed_by_other and signed_by leave its memories out.
        "x.pal.provenance": {"recall": True, "prime": False, "filters": list(TRUST_FILTERS),
                             "reviewed_or_signed_here": False},
    }


def is_known(provider_id: str) -> bool:
    """Only the built-in provider takes a memory at creation (a repository is mounted by the
    operator: ``pal admin mount-repo``)."""
    return provider_id == PROVIDER_ID


def types_list() -> Wire:
    """Core and server types; none declares operations."""
    data: list[Wire] = [{"type": t, "core": True} for t in CORE_TYPES]
    data += [{"type": t, "core": False, "description": f"a {t} the others are about",
              "schema": {"type": "object"}, "text": "title", "operations": [],
              "provider": PROVIDER_ID} for t in SERVER_TYPES]
    return {"object": "list", "data": data}


__all__ = ["KEPT_MEDIA", "MAX_FILE_BYTES", "MAX_RECALL_MEMORIES", "REPOSITORY_PROVIDER",
           "REPOSITORY_SIGNALS", "capability_document", "is_known", "keeps_media",
           "repository_capability_document", "types_list"]
