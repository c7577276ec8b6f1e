"""Core types of the memory service (UHP Memories + Memory Git history).

Every type here is a frozen, slotted dataclass: a value, never a handle on storage. Wire input
is turned into these types by :mod:`palimpsest.service.wire`; these types turn themselves back
into wire dicts with ``to_wire()``. Nothing here does I/O.

Error codes used across the service are the eight ``memory_*`` codes of uhp-memories.md §11,
carried on the :mod:`palimpsest.errors` tree (``NotFound(code="memory_not_found")`` …); the API
maps a code to its HTTP status.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from palimpsest import canonical
from palimpsest.errors import Conflict, Forbidden, InvalidInput, NotFound, Unavailable

Wire = dict[str, Any]

# --- error codes (uhp-memories.md §11) -------------------------------------------------------
MEMORY_NOT_FOUND: Final = "memory_not_found"
MEMORY_FORBIDDEN: Final = "memory_forbidden"
MEMORY_RECORD_NOT_FOUND: Final = "memory_record_not_found"
MEMORIES_NOT_ATTACHED: Final = "memories_not_attached"
MEMORY_INVALID: Final = "memory_invalid"
MEMORY_UNSUPPORTED: Final = "memory_unsupported"
MEMORY_BUSY: Final = "memory_busy"
MEMORY_UNAVAILABLE: Final = "memory_unavailable"
# Service codes outside the eight (the API maps them to 401 / 409).
INVALID_CREDENTIAL: Final = "invalid_credential"
IDEMPOTENCY_MISMATCH: Final = "idempotency_mismatch"
CAS_MISMATCH: Final = "cas_mismatch"
INTEGRITY: Final = "integrity_failure"


def not_found() -> NotFound:
    """The one answer for an unknown memory and a memory the caller may not see."""
    return NotFound("no such memory within your reach", code=MEMORY_NOT_FOUND,
                    hint="list your memories with GET /v1/memories")


def record_not_found() -> NotFound:
    """No such record in this memory (including another memory's record)."""
    return NotFound("no such record in this memory", code=MEMORY_RECORD_NOT_FOUND)


def forbidden(privilege: str) -> Forbidden:
    """The caller sees the memory but lacks ``privilege``."""
    return Forbidden(f"this needs the {privilege} privilege on the memory",
                     code=MEMORY_FORBIDDEN, hint="ask someone holding delete to grant it")


def invalid(message: str, hint: str | None = None) -> InvalidInput:
    """A malformed request (422 memory_invalid); nothing was written."""
    return InvalidInput(message, code=MEMORY_INVALID, hint=hint)


def unsupported(message: str) -> InvalidInput:
    """The provider does not implement this at all (422 memory_unsupported)."""
    return InvalidInput(message, code=MEMORY_UNSUPPORTED)


def busy(message: str) -> Conflict:
    """A consolidation runs on the memory (409 memory_busy)."""
    return Conflict(message, code=MEMORY_BUSY, hint="retry when the consolidation finishes")


def unavailable(message: str) -> Unavailable:
    """Storage could not serve the request (503 memory_unavailable)."""
    return Unavailable(message, code=MEMORY_UNAVAILABLE)


def store_busy(waited_seconds: float, retry_after: int = 1) -> Unavailable:
    """Other writers held the store past the bounded wait (503 memory_unavailable with
    ``Retry-After``): nothing of this request was written, so sending it again is safe."""
    return Unavailable(
        f"the store is busy with other writes (waited {waited_seconds:g} s); nothing was "
        "written", code=MEMORY_UNAVAILABLE,
        hint=f"retry after {retry_after} second{'s' if retry_after != 1 else ''}",
        retry_after=retry_after)


# --- vocabulary ----------------------------------------------------------------------------
PRIVILEGES: Final = ("read", "write", "create", "delete")
ALL_PRIVILEGES: Final = frozenset(PRIVILEGES)
CORE_TYPES: Final = ("episode", "fact", "note", "procedure", "link", "entity")
# The requirements also name person and company (uhp-memories.md §16): served as server kinds.
SERVER_TYPES: Final = ("person", "company")
DEFINED_RELS: Final = ("derived_from", "part_of", "about", "subject", "object")
STATUSES: Final = ("active", "superseded", "forgotten")
MEMBER_TYPES: Final = ("human", "agent")
PRINCIPAL_KINDS: Final = ("member", "group", "provider")
ROLES: Final = ("user", "assistant", "system", "tool")
PROVIDER_ID: Final = "builtin"
SHARED_MAIN: Final = "refs/shared/main"
SCHEMA_VERSION: Final = "memory_git/v1"  # the changeset format name (memory-git.md §3)


def privileges_wire(privs: frozenset[str]) -> list[str]:
    """Privileges in the chapter's fixed order."""
    return [p for p in PRIVILEGES if p in privs]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who may act (grants) or who did (``written_by``): ``<kind>:<id>``."""

    kind: str
    id: str
    type: str | None = None  # member type (human | agent) on written_by only

    @property
    def grant_form(self) -> str:
        """``kind:id``, the form a grant names."""
        return f"{self.kind}:{self.id}"

    def to_wire(self) -> Wire:
        """``{kind, id, type?}`` as on a record's ``written_by``."""
        out: Wire = {"kind": self.kind, "id": self.id}
        if self.type is not None:
            out["type"] = self.type
        return out


@dataclass(frozen=True, slots=True)
class Member:
    """A person or an agent; holds grants and writes records."""

    id: str
    name: str
    type: str  # human | agent
    admin: bool
    created_at: int  # epoch ms

    @property
    def principal(self) -> Principal:
        """This member as a writer."""
        return Principal("member", self.id, self.type)

    def to_wire(self) -> Wire:
        """The member as ``pal admin`` and the API show it."""
        return {"id": self.id, "object": "member", "name": self.name, "type": self.type,
                "admin": self.admin, "createdAt": self.created_at}


@dataclass(frozen=True, slots=True)
class Group:
    """A set of members the server resolves; holds grants, never writes."""

    id: str
    name: str
    created_at: int
    members: tuple[str, ...] = ()

    def to_wire(self) -> Wire:
        """The group with its member ids."""
        return {"id": self.id, "object": "group", "name": self.name,
                "members": list(self.members), "createdAt": self.created_at}


@dataclass(frozen=True, slots=True)
class Credential:
    """A bearer credential; only its hash is stored, the secret is shown once."""

    id: str
    member_id: str
    created_at: int
    revoked: bool = False
    label: str = ""

    def to_wire(self) -> Wire:
        """The credential without any secret."""
        return {"id": self.id, "object": "credential", "member_id": self.member_id,
                "label": self.label, "revoked": self.revoked, "createdAt": self.created_at}


@dataclass(frozen=True, slots=True)
class Session:
    """A person signed in to the review desk from a browser, as the store keeps it: the
    SHA-256 of its id (the id itself lives only in the browser's cookie), the credential it was
    opened with by id (never its secret), its CSRF token, and when it ends, in epoch
    milliseconds: ``idle_until`` moves on with use, ``expires_at`` never does."""

    key: str
    member_id: str
    credential_id: str
    csrf: str
    created_at: int
    idle_until: int
    expires_at: int


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated member and the groups it belongs to (resolved by the server)."""

    member: Member
    groups: frozenset[str] = frozenset()

    @property
    def principals(self) -> frozenset[str]:
        """Every grant form that speaks for this caller (an agent stands where a person does)."""
        return frozenset({f"member:{self.member.id}"} | {f"group:{g}" for g in self.groups})

    @property
    def writer(self) -> Principal:
        """The ``written_by`` stamped on this caller's writes."""
        return self.member.principal


@dataclass(frozen=True, slots=True)
class Memory:
    """A node of the tree. Counts and privileges are per caller, so they live outside."""

    id: str
    name: str
    description: str
    parent_id: str | None
    restricted: bool
    provider: str
    created_by: str  # member id: holds the creator's implicit grant
    created_at: int  # epoch ms
    updated_at: int

    def to_wire(self, *, ancestors: list[str], privileges: frozenset[str], records: int,
                children: int) -> Wire:
        """The memory object of uhp-memories.md §3 for one caller."""
        return {"id": self.id, "object": "memory", "name": self.name,
                "description": self.description, "parent_id": self.parent_id,
                "ancestors": ancestors, "restricted": self.restricted, "provider": self.provider,
                "privileges": privileges_wire(privileges), "records": {"count": records},
                "children": {"count": children}, "createdAt": self.created_at,
                "updatedAt": self.updated_at}


@dataclass(frozen=True, slots=True)
class Grant:
    """One principal's privileges on one memory (one grant per principal per node)."""

    id: str
    memory_id: str
    principal: str  # kind:id
    privileges: frozenset[str]
    created_at: int = 0

    def to_wire(self, *, inherited: bool = False) -> Wire:
        """``{id, object, memory_id, principal, privileges, inherited}``."""
        return {"id": self.id, "object": "memory.grant", "memory_id": self.memory_id,
                "principal": self.principal, "privileges": privileges_wire(self.privileges),
                "inherited": inherited}


@dataclass(frozen=True, slots=True)
class FileRef:
    """An uploaded file: bytes are kept content-addressed (sha256) beside the database."""

    id: str
    name: str
    media_type: str
    bytes: int
    sha256: str

    def to_wire(self) -> Wire:
        """The ``file`` object inside a content part."""
        return {"id": self.id, "name": self.name, "media_type": self.media_type,
                "bytes": self.bytes}


@dataclass(frozen=True, slots=True)
class ContentPart:
    """One part of a record's content: ``text``, ``file`` or an ``x.``-prefixed kind.

    ``raw`` keeps an ``x.`` part exactly as written (carried unchanged).
    """

    type: str
    text: str | None = None
    file: FileRef | None = None
    text_source: str | None = None
    role: str | None = None
    raw: Mapping[str, Any] | None = None

    def to_wire(self) -> Wire:
        """The part as written on the wire."""
        if self.raw is not None:
            return dict(self.raw)
        out: Wire = {"type": self.type}
        if self.file is not None:
            out["file"] = self.file.to_wire()
        if self.text is not None:
            out["text"] = self.text
        if self.text_source is not None:
            out["text_source"] = self.text_source
        if self.role is not None:
            out["role"] = self.role
        return out

    @property
    def words(self) -> str:
        """The words recall by text finds for this part."""
        return self.text or ""


@dataclass(frozen=True, slots=True)
class Reference:
    """An edge from a record to a record: ``{rel, memory_id, record_id}``."""

    rel: str
    memory_id: str | None
    record_id: str

    def to_wire(self) -> Wire:
        """The stored (fully available) form."""
        out: Wire = {"rel": self.rel, "record_id": self.record_id}
        if self.memory_id is not None:
            out = {"rel": self.rel, "memory_id": self.memory_id, "record_id": self.record_id}
        return out


@dataclass(frozen=True, slots=True)
class RecordBody:
    """The client-written part of a record version (what a write states).

    This is what erase removes: it is stored apart from the changeset that names its digest.
    """

    type: str
    title: str | None
    content: tuple[ContentPart, ...]
    attributes: Mapping[str, Any]
    references: tuple[Reference, ...]
    valid_from: str | None = None
    valid_to: str | None = None

    def to_wire(self) -> Wire:
        """The body as stored (canonical JSON source)."""
        return {"type": self.type, "title": self.title,
                "content": [p.to_wire() for p in self.content],
                "attributes": dict(self.attributes),
                "references": [r.to_wire() for r in self.references],
                "valid_from": self.valid_from, "valid_to": self.valid_to}

    @staticmethod
    def from_bytes(data: bytes) -> RecordBody:
        """A body from the canonical bytes this service stored (checked against their digest
        by the caller; they were validated before they were first encoded)."""
        return RecordBody.from_stored(json.loads(data))

    @staticmethod
    def from_stored(data: Any) -> RecordBody:
        """A stored (already validated) body document back into a value."""
        parts: list[ContentPart] = []
        for p in data["content"]:
            if p["type"] == "text":
                parts.append(ContentPart("text", text=p.get("text", ""), role=p.get("role")))
            elif p["type"] == "file":
                f = p["file"]
                parts.append(ContentPart("file", text=p.get("text"),
                                         file=FileRef(f["id"], f["name"], f["media_type"],
                                                      f["bytes"], ""),
                                         text_source=p.get("text_source"), role=p.get("role")))
            else:
                parts.append(ContentPart(p["type"], raw=p))
        refs = tuple(Reference(r["rel"], r.get("memory_id"), r["record_id"])
                     for r in data["references"])
        return RecordBody(data["type"], data["title"], tuple(parts), data["attributes"], refs,
                          data.get("valid_from"), data.get("valid_to"))

    @property
    def text(self) -> str:
        """Title and every part's words: what lexical recall indexes."""
        parts = [self.title or ""] + [p.words for p in self.content]
        return "\n".join(x for x in parts if x)


@dataclass(frozen=True, slots=True)
class RecordVersion:
    """One version of a record, as projected from the changesets."""

    id: str
    memory_id: str
    version: int
    status: str  # active | superseded | forgotten
    supersedes: int | None
    body: RecordBody
    written_at: str  # ISO 8601 UTC
    invalidated_at: str | None
    written_by: Principal
    changeset_id: str
    on_behalf_of: Principal | None = None
    consolidation_id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_wire(self, references: list[Wire] | None = None) -> Wire:
        """The record object of uhp-memories.md §5; ``references`` as the reader may see them."""
        b = self.body
        out: Wire = {
            "id": self.id, "object": "memory.record", "memory_id": self.memory_id,
            "type": b.type, "title": b.title, "content": [p.to_wire() for p in b.content],
            "attributes": dict(b.attributes), "version": self.version, "status": self.status,
            "supersedes": self.supersedes,
            "time": {"valid_from": b.valid_from, "valid_to": b.valid_to,
                     "written_at": self.written_at, "invalidated_at": self.invalidated_at},
            "written_by": self.written_by.to_wire(),
            "references": references if references is not None
            else [r.to_wire() for r in b.references],
            "trust": "untrusted",
        }
        if self.on_behalf_of is not None:
            out["written_by"]["on_behalf_of"] = self.on_behalf_of.to_wire()
        if self.consolidation_id is not None:
            out["written_by"]["consolidation_id"] = self.consolidation_id
        return out


def sort_keys(value: Any) -> Any:
    """Recursively sort mapping keys (Go marshals maps in key order): one canonical form."""
    if isinstance(value, Mapping):
        return {k: sort_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [sort_keys(v) for v in value]
    return value


def payload_bytes(payload: Mapping[str, Any]) -> bytes:
    """The canonical bytes of a payload kept apart from its changeset (what its digest
    covers): sorted keys, compact, Go-compatible."""
    return canonical.encode(sort_keys(dict(payload)))


# --- history: changesets of ops ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Op:
    """One semantic operation of a changeset, applied in order — the one op model of every
    write, UHP (``add_record``, ``revise_record``, ``forget_record``, ``erase_record``) and
    Memory Git (the eight ops of memory-git.md §4) alike.

    A UHP op's ``payload`` is server metadata (who wrote, when, which body digest) and is part
    of the changeset's canonical bytes. A Memory Git op's payload is client content: the
    canonical bytes carry only its ``payload_digest`` and the payload is stored apart, once,
    content-addressed, so erase can remove it while the changeset still verifies. ``payload``
    is ``None`` once erased.
    """

    op_type: str
    target: str | None
    payload: Mapping[str, Any] | None
    result: str | None = None  # resulting_event_id of Memory Git ops that create a memory
    payload_digest: str | None = None  # set when the payload is kept apart (erasable)

    @property
    def erased(self) -> bool:
        """The payload was erased; only its digest is left."""
        return self.payload is None

    def canonical(self, ordinal: int) -> Wire:
        """The op as the changeset's canonical bytes hold it."""
        out: Wire = {"ordinal": ordinal, "op_type": self.op_type}
        if self.target is not None:
            out["target_event_id"] = self.target
        if self.result is not None:
            out["resulting_event_id"] = self.result
        if self.payload_digest is not None:
            out["payload_digest"] = self.payload_digest
        else:
            out["payload"] = dict(self.payload or {})
        return out

    def to_wire(self, ordinal: int) -> Wire:
        """``{ordinal, op_type, target_event_id?, resulting_event_id?, payload}`` (§3); an
        erased payload is shown as ``erased: true`` beside its digest."""
        out = self.canonical(ordinal)
        if self.payload_digest is None:
            return out
        digest = out.pop("payload_digest")
        if self.payload is None:
            out["erased"] = True
        else:
            out["payload"] = dict(self.payload)
        out["payload_digest"] = digest
        return out


@dataclass(frozen=True, slots=True)
class Changeset:
    """An immutable unit of history; ``id`` is the integrity digest of its canonical bytes."""

    id: str
    memory_id: str
    ref_name: str
    parent_ids: tuple[str, ...]
    author: str  # principal grant form, e.g. member:hmbr_…
    message: str
    created_at: str  # ISO 8601 UTC
    idempotency_key: str
    ops: tuple[Op, ...]
    # Optional Memory Git fields (provenance strings, evidence, verification), only when set.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def _document(self, ops: list[Wire]) -> Wire:
        out: Wire = {"changeset_id": self.id, "schema_version": SCHEMA_VERSION,
                     "project_id": self.memory_id, "ref_name": self.ref_name,
                     "parent_ids": list(self.parent_ids), "author_principal": self.author}
        out.update(self.extra)
        out.update({"message": self.message, "created_at": self.created_at,
                    "idempotency_key": self.idempotency_key, "ops": ops,
                    "integrity_digest": self.id})
        return out

    def to_wire(self) -> Wire:
        """The changeset as memory-git.md §3 shows it (payloads inline, erased ones marked)."""
        return self._document([op.to_wire(i) for i, op in enumerate(self.ops)])

    def document(self) -> Wire:
        """What storage keeps: the canonical form, payloads kept apart named by digest."""
        return self._document([op.canonical(i) for i, op in enumerate(self.ops)])

    @staticmethod
    def from_document(data: Mapping[str, Any],
                      payloads: Mapping[str, Mapping[str, Any]] | None = None) -> Changeset:
        """A stored document back into a value; ``payloads`` maps the digests of payloads
        kept apart to their content (a digest missing from it was erased)."""
        found = payloads or {}
        ops = []
        for o in data["ops"]:
            digest = o.get("payload_digest")
            payload = found.get(digest) if digest is not None else o.get("payload", {})
            ops.append(Op(o["op_type"], o.get("target_event_id"), payload,
                          o.get("resulting_event_id"), digest))
        extra = {k: data[k] for k in CHANGESET_EXTRA if data.get(k)}
        return Changeset(data["changeset_id"], data["project_id"], data["ref_name"],
                         tuple(data["parent_ids"]), data["author_principal"], data["message"],
                         data["created_at"], data["idempotency_key"], tuple(ops), extra)


# Optional changeset fields of Memory Git requests (memory-git.md §3), kept only when set.
CHANGESET_EXTRA: Final = ("persona_id", "actor_id", "surface", "model", "environment",
                          "session_id", "topic_id", "context_manifest_id", "evidence",
                          "verification")


@dataclass(frozen=True, slots=True)
class Signature:
    """An Ed25519 signature over a changeset's canonical bytes (the bytes its id digests).

    ``role`` is ``server`` (the service's identity signs every changeset it accepts),
    ``member`` (the author signed it client-side with a key it registered) or ``origin`` (the
    server of another deployment it was imported from, ``pal import --git``); ``signer``
    names who: ``server``, the member's grant form or ``origin:<key id>``. Key and signature
    are unpadded base64, as in repository memory; ``key_id`` is the key's fingerprint (hex
    SHA-256 of the raw key)."""

    role: str
    signer: str
    public_key: str
    signature: str

    @property
    def key_id(self) -> str:
        """The fingerprint of the signing key."""
        return hashlib.sha256(_key_bytes(self.public_key)).hexdigest()

    def to_wire(self) -> Wire:
        """``{role, signer, key_id, public_key, algorithm, signature}``."""
        return {"role": self.role, "signer": self.signer, "key_id": self.key_id,
                "public_key": self.public_key, "algorithm": "ed25519",
                "signature": self.signature}


def _key_bytes(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class MemberKey:
    """A public key a member registered to sign its own changesets."""

    member_id: str
    public_key: str  # unpadded base64 of the raw 32 bytes
    created_at: int  # epoch ms
    revoked: bool = False

    @property
    def key_id(self) -> str:
        """The key's fingerprint."""
        return hashlib.sha256(_key_bytes(self.public_key)).hexdigest()

    def to_wire(self) -> Wire:
        """The key as the member's key list shows it."""
        return {"object": "member.key", "member_id": self.member_id, "key_id": self.key_id,
                "public_key": self.public_key, "algorithm": "ed25519",
                "revoked": self.revoked, "createdAt": self.created_at}


@dataclass(frozen=True, slots=True)
class Ref:
    """A named pointer to a changeset of one memory; CAS-advanced."""

    memory_id: str
    name: str
    head: str | None
    protected: bool
    created_by: str
    created_at: str
    updated_at: str

    def to_wire(self) -> Wire:
        """``models.MemoryRef`` shape (memory-git.md §5)."""
        return {"project_id": self.memory_id, "ref_name": self.name,
                "head_changeset_id": self.head, "protected": self.protected,
                "created_by_principal": self.created_by, "created_at": self.created_at,
                "updated_at": self.updated_at}


@dataclass(frozen=True, slots=True)
class FileBytes:
    """Bytes of a file part, read back exactly, with what the API needs for headers."""

    data: bytes
    media_type: str
    name: str


__all__ = [name for name in dir() if not name.startswith("_")]
