"""JSON Schemas of the response bodies, for the OpenAPI document (uhp-memories.md §3–§12).

The service builds every response; these schemas only describe them, so that
``/openapi.json`` tells a client (and schemathesis) what comes back. Objects allow additional
properties, as the chapter's OpenAPI does: a newer server may add fields.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

_STR = {"type": "string"}
_NSTR = {"type": ["string", "null"]}
_INT = {"type": "integer"}
_COUNT = {"type": "object", "required": ["count"], "properties": {"count": _INT}}
_PRIVS = {"type": "array",
          "items": {"type": "string", "enum": ["read", "write", "create", "delete"]}}


def _obj(required: list[str], **props: Any) -> Schema:
    return {"type": "object", "required": required, "properties": props,
            "additionalProperties": True}


def _list_of(ref: str, *extra_required: str, **extra: Any) -> Schema:
    return _obj(["object", "data", *extra_required], object={"const": "list"},
                data={"type": "array", "items": {"$ref": f"#/components/schemas/{ref}"}},
                **extra)


def ref(name: str) -> Schema:
    """A ``$ref`` to one of :data:`SCHEMAS`."""
    return {"$ref": f"#/components/schemas/{name}"}


_WRITER = _obj(["kind", "id"], kind=_STR, id=_STR, type=_STR)
_SIGNATURE = _obj(["role", "signer", "key_id", "public_key", "signature"],
                  role={"enum": ["server", "member"]}, signer=_STR, key_id=_STR,
                  public_key=_STR, algorithm={"const": "ed25519"}, signature=_STR)
_NAV = _obj(["id", "name"], id=_STR, name=_STR, description=_STR, records=_COUNT)

SCHEMAS: dict[str, Schema] = {
    "Discovery": _obj(["capabilities"], object=_STR, version=_STR,
                      versions={"type": "array", "items": _STR},
                      capabilities={"type": "object", "additionalProperties": True,
                                    "properties": {"memories": {"type": "boolean"}}}),
    "Memory": _obj(
        ["id", "object", "name", "parent_id", "privileges"],
        id=_STR, object={"const": "memory"}, name=_STR, description=_STR, parent_id=_NSTR,
        ancestors={"type": "array", "items": _STR}, restricted={"type": "boolean"},
        provider=_STR, privileges=_PRIVS, records=_COUNT, children=_COUNT,
        createdAt=_INT, updatedAt=_INT),
    "MemoryList": _list_of("Memory", next=_NSTR),
    "MemoryDeleted": _obj(["id", "object", "deleted", "memories"], id=_STR,
                          object={"const": "memory"}, deleted={"const": True},
                          memories={"type": "array", "items": _STR}),
    "Grant": _obj(["id", "object", "memory_id", "principal", "privileges"], id=_STR,
                  object={"const": "memory.grant"}, memory_id=_STR, principal=_STR,
                  privileges=_PRIVS, inherited={"type": "boolean"}),
    "GrantList": _list_of("Grant"),
    "GrantDeleted": _obj(["id", "deleted"], id=_STR, object=_STR, deleted={"const": True}),
    "Record": _obj(
        ["id", "object", "memory_id", "type", "content", "version", "status", "written_by",
         "trust"],
        id=_STR, object={"const": "memory.record"}, memory_id=_STR, type=_STR, title=_NSTR,
        content={"type": "array", "items": _obj(["type"], type=_STR)},
        attributes={"type": "object"}, version=_INT, status=_STR,
        supersedes={"type": ["integer", "null"]}, time={"type": "object"},
        written_by=_WRITER, references={"type": "array", "items": {"type": "object"}},
        trust={"const": "untrusted"}),
    "RecordList": _list_of("Record", next=_NSTR, parent=_NAV,
                           children={"type": "array", "items": _NAV}),
    "Job": _obj(["object", "id", "status"], object={"const": "memory.job"}, id=_STR,
                status={"enum": ["pending", "completed", "failed"]}, error={},
                data={"type": "array", "items": {"$ref": "#/components/schemas/Record"}}),
    "Observed": _list_of("Record", job={"$ref": "#/components/schemas/Job"}),
    "Erasure": _obj(["object", "erased", "unreachable"], object={"const": "memory.erasure"},
                    erased={"type": "array", "items": _STR},
                    unreachable={"type": "array", "items": _STR}),
    "File": _obj(["id", "name", "media_type", "bytes"], id=_STR, object=_STR, name=_STR,
                 media_type=_STR, bytes=_INT, sha256=_STR),
    "RecallResult": _obj(
        ["results", "degraded", "abstain"], object=_STR,
        results={"type": "array", "items": _obj(
            ["record", "memory"], record={"$ref": "#/components/schemas/Record"},
            memory=_obj(["id", "name"], id=_STR, name=_STR),
            score={"type": ["number", "null"]}, why={"type": "array", "items": _STR})},
        parent=_NAV, children={"type": "array", "items": _NAV},
        degraded={"type": "array", "items": _STR}, abstain={"type": "boolean"}),
    "GraphResult": _obj(["object", "nodes", "edges"], object={"const": "memory.graph"},
                  nodes={"type": "array", "items": _obj(["record", "memory"])},
                  edges={"type": "array", "items": _obj(["from", "to", "available"])},
                  truncated={"type": "boolean"}, degraded={"type": "array", "items": _STR}),
    "Prime": _obj(["memory_id", "text", "tokens"], object=_STR, memory_id=_STR, text=_STR,
                  tokens=_INT, budget=_INT, records={"type": "array", "items": _STR},
                  truncated={"type": "boolean"}),
    "Providers": _obj(["data"], object=_STR,
                      data={"type": "array", "items": _obj(["id", "isolation"], id=_STR,
                                                           isolation=_STR)}),
    "Types": _obj(["object", "data"], object={"const": "list"},
                  data={"type": "array", "items": _obj(["type"], type=_STR)}),
    "Query": _obj(["name"], name=_STR, description=_STR, requires=_STR, language=_STR),
    "QueryList": _list_of("Query"),
    "Operation": _obj(["object", "name"], object={"const": "memory.operation"}, name=_STR,
                      result={}),
    "Snapshot": _obj(["id", "object", "memory_id", "name", "at"],
                     id=_STR, object={"const": "memory.snapshot"}, memory_id=_STR,
                     name=_STR, message=_NSTR, at={}),
    "SnapshotList": _list_of("Snapshot"),
    "Consolidation": _obj(["id", "object", "memory_id", "status"], id=_STR,
                          object={"const": "memory.consolidation"}, memory_id=_STR,
                          status=_STR),
    "ConsolidationList": _list_of("Consolidation"),
    "ConsolidationChanges": _obj(["data"], object=_STR,
                                 data={"type": "array", "items": _obj(["change"])}),
    "PendingReview": _obj(["object", "status", "project_id", "proposal_id"],
                          object={"const": "memory.pending_review"},
                          status={"const": "pending_review"}, memory_id=_STR, project_id=_STR,
                          ref_name=_STR, changeset_id=_STR, proposal_id=_STR, target_ref=_STR),
    "HarnessMemories": _obj(["object", "data"], object={"const": "harness.memories"},
                            principal=_STR, default_memory_id=_NSTR,
                            observe={"type": "boolean"},
                            data={"type": "array", "items": _obj(["id", "name"], id=_STR,
                                                                 name=_STR, privileges=_PRIVS,
                                                                 default={"type": "boolean"})}),
    "ProvenanceKeys": _obj(["object", "keys"], object={"const": "provenance.keys"},
                           algorithm={"const": "ed25519"}, signs=_STR,
                           keys={"type": "array", "items": _obj(
                               ["key_id", "public_key", "status"], key_id=_STR,
                               public_key=_STR, algorithm=_STR,
                               status={"enum": ["active", "retired"]}, created_at=_STR,
                               retired_at=_NSTR)}),
    "MemberKey": _obj(["object", "member_id", "key_id", "public_key", "revoked"],
                      object={"const": "member.key"}, member_id=_STR, key_id=_STR,
                      public_key=_STR, algorithm=_STR, revoked={"type": "boolean"},
                      createdAt=_INT),
    "MemberKeyList": _list_of("MemberKey"),
    "Signature": _SIGNATURE,
    "ChangesetSignatures": _obj(["object", "changeset_id", "canonical", "signatures"],
                                object={"const": "memory.changeset.signatures"},
                                changeset_id=_STR, memory_id=_STR, author=_STR,
                                canonical=_STR,
                                signatures={"type": "array", "items": ref("Signature")}),
}


__all__ = ["SCHEMAS", "ref"]
