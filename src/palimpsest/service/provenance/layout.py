"""How a history exported to Git is laid out — pure, shared by the writer and the verifier.

One commit per changeset, its parents the commits of the changeset's parents, its tree::

    changeset.json   the canonical bytes, exactly (what the id digests and signatures sign)
    signatures.json  every signature kept for it (canonical JSON list)
    stored.json      what the canonical bytes leave out: {"created_at": …}
    bodies/<digest>  record bodies and Memory Git payloads it names that are still held
                     (an erased one is absent: its digest stays in changeset.json)

Its message ends with ``changeset <id>`` and ``memory <id>`` lines. Refs mirror the memory's
refs (``refs/shared/main``, ``refs/agents/<member>/main``…): as they are for an export of one
memory, below ``refs/memories/<memory id>/`` for an export of several. ``refs/palimpsest/
export`` holds ``keys.json`` (the server's published keys) and ``statement.json`` with its
signature: which head every ref had when exported (and each memory's name), signed by the
server, so a ref moved back
to an older changeset (or one added) is refused although every changeset still verifies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

FORMAT: Final = "palimpsest-export/v1"
STATEMENT_DOMAIN: Final = b"palimpsest-export/v1\n"
EXPORT_REF: Final = "refs/palimpsest/export"
CHANGESET: Final = "changeset.json"
SIGNATURES: Final = "signatures.json"
STORED: Final = "stored.json"
BODIES: Final = "bodies"
KEYS: Final = "keys.json"
STATEMENT: Final = "statement.json"
STATEMENT_SIG: Final = "statement.sig.json"
MAX_BLOB: Final = 8 << 20  # nothing the service writes is near this; an import refuses past it
_TRAILER = re.compile(r"^changeset ([0-9a-f]{64})$", re.M)
_MEMORY = re.compile(r"^memory (\S+)$", re.M)


def git_ref(memory_id: str, ref_name: str, *, single: bool) -> str:
    """The Git ref a memory's ref is exported under."""
    return ref_name if single else f"refs/memories/{memory_id}/{ref_name[len('refs/'):]}"


def memory_ref(git_name: str, memory_id: str | None) -> tuple[str, str] | None:
    """``(memory id, ref name)`` a Git ref stands for (``memory_id``: a one-memory export)."""
    if git_name.startswith("refs/memories/"):
        rest = git_name[len("refs/memories/"):]
        mid, _, name = rest.partition("/")
        return (mid, f"refs/{name}") if mid and name else None
    if memory_id is not None and git_name.startswith(("refs/shared/", "refs/agents/",
                                                      "refs/sessions/", "refs/topics/")):
        return memory_id, git_name
    return None


def message(subject: str, changeset_id: str, memory_id: str, ref_name: str) -> str:
    """A commit message: the changeset's own message, then the lines that name it."""
    first = " ".join(subject.split())[:200] or "changeset"
    return f"{first}\n\nchangeset {changeset_id}\nmemory {memory_id}\nref {ref_name}\n"


def named(text: str) -> tuple[str, str] | None:
    """``(changeset id, memory id)`` a commit message names (the last such lines)."""
    ids, mems = _TRAILER.findall(text), _MEMORY.findall(text)
    return (ids[-1], mems[-1]) if ids and mems else None


def statement(memories: Mapping[str, Mapping[str, str]], exported_at: str,
              single: str | None, names: Mapping[str, Mapping[str, str]] | None = None,
              writers: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
    """The signed statement of every exported ref's head, each memory's name and description,
    and the name and type of each member who authored a changeset (what an import into
    another server names the memory it makes and whose writes its records show)."""
    return {"object": "palimpsest.export", "format": FORMAT, "exported_at": exported_at,
            "memory": single, "writers": {k: dict(v) for k, v in sorted((writers or {}).items())},
            "memories": {mid: dict((names or {}).get(mid, {})) for mid in sorted(memories)},
            "refs": {mid: dict(sorted(refs.items())) for mid, refs in sorted(memories.items())}}


def body_digests(content: Mapping[str, Any]) -> set[str]:
    """Every body or payload digest a changeset's canonical content names."""
    out: set[str] = set()
    for op in content.get("ops") or ():
        if not isinstance(op, Mapping):
            continue
        payload = op.get("payload") if isinstance(op.get("payload"), Mapping) else {}
        for d in ((payload or {}).get("body_digest"), op.get("payload_digest")):
            if isinstance(d, str):
                out.add(d)
    return out


__all__ = ["BODIES", "CHANGESET", "EXPORT_REF", "FORMAT", "KEYS", "MAX_BLOB", "SIGNATURES",
           "STATEMENT", "STATEMENT_DOMAIN", "STATEMENT_SIG", "STORED", "body_digests",
           "git_ref", "memory_ref", "message", "named", "statement"]
