"""``pal admin export`` and ``import``: a memory subtree as a portable archive.

An archive is one canonical JSON document, independent of the store it came from: no memory,
record, file or member id of the source, so it can be imported into another server, or under
another parent of the same one. It holds

- ``memories``: the subtree, root first, each ``{key, parent, name, description,
  restricted}`` (``parent`` is the key of an earlier entry; the root's is ``null``);
- ``records``: each memory's active records, oldest first, as the body of the write that
  would make them — ``type``, ``title``, ``content``, ``attributes``, ``references``,
  ``time.valid_from``/``valid_to`` — where a file part names its bytes by digest and a
  reference to a record of the archive names it by position (``{"rel", "record": n}``);
  a reference leaving the subtree keeps its ids (one into a memory the exporter may not read
  shows it nothing to carry, and is left out);
- ``files``: the bytes of every file part, base64, by sha256, with name and media type.

What an archive does not carry: superseded versions, forgotten and erased records, the
history's changesets and signatures (those are ``pal export --git``), grants, who wrote what
and when (the importer becomes the writer; ``written_at`` is the import's).

Importing validates the whole archive before writing anything — its structure, every digest,
and every record body through the service's own parser (``service/wire.py``) — then writes it
through the service's front door (``create_memory``, ``upload_file``, ``remember``), so every
check a write makes is made again. If a write is still refused, the memories made so far are
deleted (with their records and bytes) and the refusal is raised: nothing partial stays.
Round trip: exporting what an import made gives the archive's ``content`` back, exactly.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final, Protocol

from palimpsest import canonical
from palimpsest.errors import InvalidInput, PalError
from palimpsest.service import wire
from palimpsest.service.model import Caller, FileBytes, Wire

FORMAT: Final = "palimpsest-export/1"
PAGE: Final = 200
_RECORD_KEYS: Final = ("type", "title", "content", "attributes", "references", "time")


class Front(Protocol):
    """What export and import need of the service (the facade is one)."""

    def get_memory(self, caller: Caller, memory_id: str) -> Wire: ...
    def list_memories(self, caller: Caller, *, parent: str | None = None,
                      ancestor: str | None = None, granted: bool = False, limit: int = 50,
                      cursor: str | None = None) -> Wire: ...
    def list_records(self, caller: Caller, memory_id: str, *, type: str | None = None,
                     include: str = "active", as_of: str | None = None, limit: int = 50,
                     cursor: str | None = None) -> Wire: ...
    def record_content(self, caller: Caller, memory_id: str, record_id: str,
                       index: int) -> FileBytes: ...
    def create_memory(self, caller: Caller, body: Wire, *,
                      idempotency_key: str | None = None) -> Wire: ...
    def upload_file(self, caller: Caller, data: bytes, *, name: str, media_type: str,
                    idempotency_key: str | None = None) -> Wire: ...
    def remember(self, caller: Caller, memory_id: str, body: Wire, *,
                 idempotency_key: str | None = None) -> Wire: ...
    def delete_memory(self, caller: Caller, memory_id: str, *,
                      idempotency_key: str | None = None) -> Wire: ...


# --- export ----------------------------------------------------------------------------------


def export(svc: Front, caller: Caller, memory_id: str) -> Wire:
    """The archive of ``memory_id`` and every memory below it that ``caller`` may read."""
    root = svc.get_memory(caller, memory_id)
    below = _pages(lambda cursor: svc.list_memories(caller, ancestor=memory_id, limit=PAGE,
                                                    cursor=cursor))
    order = [root]
    children: dict[str | None, list[Wire]] = {}
    for m in below:
        children.setdefault(m["parent_id"], []).append(m)
    for m in order:  # breadth first: a parent always comes before its children; siblings by
        # what they are, not by their ids (which an import mints anew)
        order.extend(sorted(children.get(m["id"], []), key=lambda c: (
            c["name"], c["description"], c["restricted"])))
    keys = {m["id"]: i for i, m in enumerate(order)}
    memories = [{"key": i, "parent": None if i == 0 else keys[m["parent_id"]],
                 "name": m["name"], "description": m["description"],
                 "restricted": m["restricted"]} for i, m in enumerate(order)]
    rows: list[tuple[int, Wire]] = []
    for m in order:
        listed = _pages(_records_of(svc, caller, m["id"]))
        rows.extend((keys[m["id"]], r) for r in reversed(listed))  # oldest first
    position = {r["id"]: n for n, (_, r) in enumerate(rows)}
    files: dict[str, Wire] = {}
    records = [_exported(svc, caller, key, r, position=position, files=files)
               for key, r in rows]
    content = {"memories": memories, "records": records,
               "files": dict(sorted(files.items()))}
    return {"format": FORMAT,
            "exported_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "content": content}


def _exported(svc: Front, caller: Caller, key: int, record: Wire, *,
              position: dict[str, int], files: dict[str, Wire]) -> Wire:
    parts: list[Wire] = []
    for i, part in enumerate(record["content"]):
        if part.get("type") != "file":
            parts.append(part)
            continue
        got = svc.record_content(caller, record["memory_id"], record["id"], i)
        sha = hashlib.sha256(got.data).hexdigest()
        files[sha] = {"name": got.name, "media_type": got.media_type,
                      "data": base64.b64encode(got.data).decode("ascii")}
        parts.append({**{k: v for k, v in part.items() if k != "file"}, "file": {"sha256": sha}})
    refs = [{"rel": ref["rel"], "record": position[ref["record_id"]]}
            if ref.get("record_id") in position else
            {k: ref[k] for k in ("rel", "memory_id", "record_id") if ref.get(k) is not None}
            for ref in record.get("references", []) if ref.get("available") is not False]
    time = {k: record["time"][k] for k in ("valid_from", "valid_to")
            if record["time"].get(k) is not None}
    return {"memory": key, "type": record["type"], "title": record["title"], "content": parts,
            "attributes": record["attributes"], "references": refs, "time": time}


def _records_of(svc: Front, caller: Caller, memory_id: str) -> Callable[[str | None], Wire]:
    def fetch(cursor: str | None) -> Wire:
        return svc.list_records(caller, memory_id, include="active", limit=PAGE, cursor=cursor)
    return fetch


def _pages(fetch: Callable[[str | None], Wire]) -> list[Wire]:
    out: list[Wire] = []
    cursor = None
    while True:
        page = fetch(cursor)
        out.extend(page["data"])
        cursor = page.get("next")
        if cursor is None:
            return out


# --- import ----------------------------------------------------------------------------------


def import_archive(svc: Front, caller: Caller, data: bytes, parent_id: str | None) -> Wire:
    """Write the archive ``data`` as a new subtree (under ``parent_id``, or at the top).

    Raises:
        InvalidInput: the archive is malformed (the message names the part), or a write was
            refused (the service's own error, after removing what was written).
    """
    doc = _decode(data)
    content = doc["content"]
    digest = hashlib.sha256(canonical.encode(content)).hexdigest()[:32]
    made: dict[int, str] = {}
    record_ids: list[str] = []
    uploaded: dict[str, str] = {}
    try:
        for m in content["memories"]:
            body = {"name": m["name"], "description": m["description"],
                    "restricted": m["restricted"],
                    "parent_id": parent_id if m["parent"] is None else made[m["parent"]]}
            made[m["key"]] = svc.create_memory(
                caller, body, idempotency_key=f"import:{digest}:m{m['key']}")["id"]
        for n, rec in enumerate(content["records"]):
            body = _body(rec, record_ids, uploaded, lambda sha: _upload(
                svc, caller, content["files"][sha], f"import:{digest}:f{sha[:32]}"))
            record_ids.append(svc.remember(caller, made[rec["memory"]], body,
                                           idempotency_key=f"import:{digest}:r{n}")["id"])
    except PalError:
        if 0 in made:
            svc.delete_memory(caller, made[0])  # its descendants, records and bytes with it
        raise
    return {"object": "import", "memory_id": made[0], "memories": len(made),
            "records": len(record_ids), "files": len(uploaded)}


def _upload(svc: Front, caller: Caller, entry: Wire, key: str) -> str:
    made = svc.upload_file(caller, base64.b64decode(entry["data"]), name=entry["name"],
                           media_type=entry["media_type"], idempotency_key=key)
    return str(made["id"])


def _body(rec: Wire, record_ids: list[str], uploaded: dict[str, str],
          upload: Callable[[str], str]) -> Wire:
    parts = []
    for part in rec["content"]:
        if part.get("type") == "file":
            sha = part["file"]["sha256"]
            if sha not in uploaded:
                uploaded[sha] = upload(sha)
            parts.append({**part, "file": {"id": uploaded[sha]}})
        else:
            parts.append(part)
    refs = [{"rel": r["rel"], "record_id": record_ids[r["record"]]} if "record" in r else r
            for r in rec["references"]]
    body: Wire = {"type": rec["type"], "content": parts, "attributes": rec["attributes"],
                  "references": refs, "time": rec["time"]}
    if rec["title"] is not None:
        body["title"] = rec["title"]
    return body


def _bad(message: str) -> InvalidInput:
    return InvalidInput(f"the archive {message}; nothing was imported", code="bad-archive",
                        hint="import an archive written by pal admin export, unchanged")


def _decode(data: bytes) -> Wire:
    """The archive, every part checked before anything is written."""
    try:
        doc = canonical.decode(data.rstrip(b"\n"))
    except ValueError as exc:
        raise _bad(f"is not strict JSON ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT \
            or not isinstance(doc.get("content"), dict):
        raise _bad(f"is not a {FORMAT} document")
    content = doc["content"]
    if set(content) != {"memories", "records", "files"}:
        raise _bad("content must hold exactly memories, records and files")
    memories, records, files = content["memories"], content["records"], content["files"]
    if not isinstance(memories, list) or not memories or not isinstance(records, list) \
            or not isinstance(files, dict):
        raise _bad("content has the wrong shape")
    for i, m in enumerate(memories):
        if not isinstance(m, dict) or set(m) != {"key", "parent", "name", "description",
                                                 "restricted"} or m["key"] != i:
            raise _bad(f"memories[{i}] is not {{key: {i}, parent, name, description, "
                       "restricted}")
        if (m["parent"] is None) != (i == 0) or (
                i > 0 and not (isinstance(m["parent"], int) and 0 <= m["parent"] < i)):
            raise _bad(f"memories[{i}].parent must name an earlier memory (only the first "
                       "has none)")
    for sha, entry in files.items():
        if not isinstance(entry, dict) or set(entry) != {"name", "media_type", "data"}:
            raise _bad(f"files[{sha}] is not {{name, media_type, data}}")
        try:
            raw = base64.b64decode(entry["data"], validate=True)
        except (ValueError, TypeError) as exc:
            raise _bad(f"files[{sha}].data is not base64") from exc
        if hashlib.sha256(raw).hexdigest() != sha:
            raise _bad(f"files[{sha}] does not hash to its name")
    for n, rec in enumerate(records):
        if not isinstance(rec, dict) or set(rec) != {"memory", *_RECORD_KEYS}:
            raise _bad(f"records[{n}] does not hold memory, {', '.join(_RECORD_KEYS)}")
        if not isinstance(rec["memory"], int) or not 0 <= rec["memory"] < len(memories):
            raise _bad(f"records[{n}].memory names no memory of the archive")
        if not isinstance(rec["content"], list) or not isinstance(rec["references"], list):
            raise _bad(f"records[{n}] content and references must be lists")
        for part in rec["content"]:
            if isinstance(part, dict) and part.get("type") == "file" and (
                    not isinstance(part.get("file"), dict)
                    or part["file"].get("sha256") not in files):
                raise _bad(f"records[{n}] names a file the archive does not hold")
        for ref in rec["references"]:
            if isinstance(ref, dict) and "record" in ref and not (
                    isinstance(ref["record"], int) and 0 <= ref["record"] < n):
                raise _bad(f"records[{n}] refers to a record that does not come before it")
        # the service's own parser, as every write is checked (file ids stand in)
        draft = _body(rec, [f"hrec_{i}" for i in range(n)], {},
                      lambda sha: "hfile_" + sha[:26])
        try:
            wire.record_draft(draft)
        except InvalidInput as exc:
            raise _bad(f"records[{n}] is refused: {exc.message}") from exc
    return doc


__all__ = ["FORMAT", "export", "import_archive"]
