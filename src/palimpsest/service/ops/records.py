"""Record operations (uhp-memories.md §5, §6.2) and recall (§7).

Every write is one changeset on the memory's ``refs/shared/main`` (see :mod:`history`), applied
to the projection and the search index in the same transaction.
"""

from __future__ import annotations

from dataclasses import replace

from palimpsest.errors import Forbidden
from palimpsest.service import history, mounts, providers, wire
from palimpsest.service.access import View
from palimpsest.service.core import Core, mint
from palimpsest.service.model import (
    MEMORY_FORBIDDEN,
    Caller,
    ContentPart,
    FileBytes,
    FileRef,
    Memory,
    Op,
    Principal,
    RecordBody,
    RecordVersion,
    Wire,
    invalid,
    record_not_found,
    unsupported,
)
from palimpsest.service.ops import tree
from palimpsest.service.projection import erasure


def _resolve_parts(core: Core, caller_id: str,
                   drafts: list[wire.PartDraft] | None) -> tuple[ContentPart, ...] | None:
    """Fill file parts from the uploaded file table (the server states name/type/size)."""
    if drafts is None:
        return None
    out: list[ContentPart] = []
    for d in drafts:
        if d.file_id is None:
            out.append(d.part)
            continue
        row = core.store.file(d.file_id)
        if row is None:
            raise invalid("content names a file that was not uploaded (POST /v1/files)")
        if not providers.keeps_media(row.media_type):
            raise unsupported(f"the provider does not keep {row.media_type} files")
        ref = FileRef(row.id, row.name, row.media_type, row.bytes, row.sha256)
        out.append(ContentPart("file", text=d.part.text, file=ref,
                               text_source=d.part.text_source, role=d.part.role))
    return tuple(out)


def _fill_reference_memories(core: Core, body: RecordBody) -> RecordBody:
    """Store the memory of each reference target the server knows (needs no read on it)."""
    missing = [r.record_id for r in body.references if r.memory_id is None]
    if not missing:
        return body
    where = core.store.memory_of_records(missing)
    refs = tuple(type(r)(r.rel, r.memory_id or where.get(r.record_id), r.record_id)
                 for r in body.references)
    return RecordBody(body.type, body.title, body.content, body.attributes, refs,
                      body.valid_from, body.valid_to)


def remember(core: Core, caller: Caller, memory_id: str, body: Wire, key: str | None,
             *, writer: Principal | None = None, on_behalf_of: Principal | None = None,
             consolidation_id: str | None = None) -> Wire:
    """``POST /v1/memories/{id}/records``."""
    draft = wire.record_draft(body)
    views: list[View] = []

    def check() -> None:
        views.append(core.resolve(caller, memory_id, "write")[0])

    def apply(k: str) -> Wire:
        parts = _resolve_parts(core, caller.member.id, draft.content)
        rb = _fill_reference_memories(core, wire.merge_draft(None, draft, parts))
        rid = mint("hrec")
        digest = core.seal(rb)
        who = writer or caller.writer
        at = core.now_iso()
        payload = {"record_id": rid, "body_digest": digest,
                   **history.writer_payload(at, who, on_behalf_of=on_behalf_of,
                                            consolidation_id=consolidation_id)}
        cs = core.commit(memory_id, who, k, [Op("add_record", None, payload)], "remember")
        # The version just projected, rendered without reading it back.
        rec = RecordVersion(rid, memory_id, 1, "active", None, rb, at, None, who, cs.id,
                            on_behalf_of, consolidation_id)
        return core.render(views[-1], rec)  # the view this transaction checked access with

    def again(stored: Wire) -> Wire:
        """The first answer once more: version 1 as it was written (history holds it)."""
        if set(stored) != {"record"}:
            return stored  # kept whole (a store migrated from an older version)
        row = core.store.version_row(str(stored["record"]), 1)
        if row is None:  # erased since (erase drops the reference too): nothing to answer
            raise record_not_found()
        first = replace(core.version(row), status="active", invalidated_at=None)
        return core.render(views[-1] if views else core.view(caller), first)

    # Kept for a replay: the record's id, not a second copy of what it says.
    return core.idempotent(caller, memory_id, "remember", body, key, apply, check,
                           keep=(lambda response: {"record": response["id"]}, again))


def _current(core: Core, record_id: str, memory_id: str) -> RecordVersion:
    head = core.store.record_head(record_id)
    if head is None or head.memory_id != memory_id:
        raise record_not_found()
    row = core.store.version_row(record_id, head.version)
    if row is None:
        raise record_not_found()
    return core.version(row)


def _current_wire(core: Core, view: View, record_id: str) -> Wire:
    head = core.store.record_head(record_id)
    if head is None:
        raise record_not_found()
    return core.render(view, _current(core, record_id, head.memory_id))


def get_record(core: Core, caller: Caller, memory_id: str, record_id: str,
               as_of: str | None) -> Wire:
    """``GET …/records/{rid}`` (optionally as of an instant)."""
    at = wire.timestamp(as_of, "as_of") if as_of is not None else None
    with core.store.read():
        view, _ = core.resolve(caller, memory_id, "read")
        path = mounts.mounted(core.store, [memory_id]).get(memory_id)
        if path is None:
            if at is None:
                return core.render(view, _current(core, record_id, memory_id))
            row = core.store.version_at(record_id, at)
            if row is None or row.memory_id != memory_id:
                raise record_not_found()
            return core.render(view, core.version(row, as_of=at))
    # A repository is read outside the store's lock (its own files, its own index).
    return _mounted_record(path, memory_id, record_id, at).to_wire([])


def _mounted_record(path: str, memory_id: str, record_id: str, at: str | None
                    ) -> RecordVersion:
    """A mounted repository's memory by id (its one signed version; it keeps no instants)."""
    if at is not None:
        raise unsupported("a repository memory keeps no versions in time; read it without "
                          "as_of")
    found = mounts.find(path, memory_id, record_id)
    if found is None:
        raise record_not_found()
    return found


def record_history(core: Core, caller: Caller, memory_id: str, record_id: str) -> Wire:
    """``GET …/records/{rid}/history``: versions oldest first."""
    with core.store.read():
        view, _ = core.resolve(caller, memory_id, "read")
        path = mounts.mounted(core.store, [memory_id]).get(memory_id)
        if path is None:
            rows = core.store.versions(record_id)
            if not rows or rows[0].memory_id != memory_id:
                raise record_not_found()
            return {"object": "list",
                    "data": [core.render(view, core.version(r)) for r in rows]}
    return {"object": "list",
            "data": [_mounted_record(path, memory_id, record_id, None).to_wire([])]}


def record_content(core: Core, caller: Caller, memory_id: str, record_id: str,
                   index: int) -> FileBytes:
    """``GET …/records/{rid}/content/{index}``: the bytes of a file part."""
    with core.store.read():
        core.resolve(caller, memory_id, "read")
        rec = _current(core, record_id, memory_id)
        if isinstance(index, bool) or not isinstance(index, int) or not \
                0 <= index < len(rec.body.content):
            raise record_not_found()
        part = rec.body.content[index]
        if part.type != "file" or part.file is None:
            raise record_not_found()
        row = core.store.file(part.file.id)
        data = core.store.read_file_bytes(row.sha256) if row else None
        if row is None or data is None:
            raise record_not_found()
        return FileBytes(data, row.media_type, row.name)


def list_records(core: Core, caller: Caller, memory_id: str, *, type: str | None, include: str,
                 as_of: str | None, limit: int, cursor: str | None) -> Wire:
    """``GET /v1/memories/{id}/records``: newest first, with navigation."""
    if include not in ("active", "all"):
        raise invalid("include must be active or all")
    rtype = wire.record_type(type) if type is not None else None
    limit = wire.integer(limit, "limit", lo=1, hi=wire.MAX_LIST_LIMIT)
    at = wire.timestamp(as_of, "as_of") if as_of is not None else None
    with core.store.read():
        view, m = core.resolve(caller, memory_id, "read")
        path = mounts.mounted(core.store, [memory_id]).get(memory_id)
        if path is None:
            return _list_stored(core, view, m, include=include, rtype=rtype, at=at,
                                limit=limit, cursor=cursor)
        nav = tree.navigation(core, view, m)
    # A mounted repository, read outside the store's lock, pages with its own cursor.
    if at is not None:
        raise unsupported("a repository memory keeps no versions in time; list it without "
                          "as_of")
    page = mounts.listing(path, memory_id, include=include, type=rtype, limit=limit,
                          cursor=cursor)
    page.update(nav)
    return page


def _list_stored(core: Core, view: View, m: Memory, *, include: str, rtype: str | None,
                 at: str | None, limit: int, cursor: str | None) -> Wire:
    """A page of the store's records of one memory (inside a read)."""
    before = None
    if cursor is not None:
        if not cursor.isdigit() or len(cursor) > 18:
            raise invalid("cursor is not one this server issued")
        before = int(cursor)
    statuses = ("active",) if include == "active" else ("active", "forgotten")
    if at is None:
        rows = core.store.list_current(m.id, statuses, rtype, before, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        data = [core.render(view, core.version(r)) for r in rows]
        nxt = str(rows[-1].n) if more and rows else None
    else:
        offset = before or 0
        rows = core.store.list_at([m.id], at, limit + 1 + 4 * limit, offset)
        recs = [core.version(r, as_of=at) for r in rows]
        recs = [r for r in recs if r.status in statuses and (rtype is None
                                                               or r.body.type == rtype)]
        more = len(recs) > limit
        data = [core.render(view, r) for r in recs[:limit]]
        nxt = str(offset + len(rows)) if len(rows) == limit + 1 + 4 * limit or more \
            else None
    out: Wire = {"object": "list", "data": data, "next": nxt}
    out.update(tree.navigation(core, view, m))
    return out


def revise(core: Core, caller: Caller, memory_id: str, record_id: str, body: Wire,  # noqa: PLR0917
           key: str | None, *, writer: Principal | None = None,
           on_behalf_of: Principal | None = None, consolidation_id: str | None = None) -> Wire:
    """``PATCH …/records/{rid}``: a new version; unreadable references are kept."""
    draft = wire.record_draft(body, revise=True)
    reason = None
    if isinstance(body, dict) and body.get("reason") is not None:
        reason = wire.string(body["reason"], "reason", max_len=500)

    def check() -> None:
        core.resolve(caller, memory_id, "write")

    def apply(k: str) -> Wire:
        view = core.view(caller)
        old = _current(core, record_id, memory_id)
        parts = _resolve_parts(core, caller.member.id, draft.content)
        new = wire.merge_draft(old.body, draft, parts)
        if draft.references is not None:
            # A reviser keeps the edges it cannot read unchanged (uhp-memories.md §5).
            rendered = core.render(view, old)["references"]
            hidden = [r for r, w in zip(old.body.references, rendered, strict=True)
                      if w.get("available") is False]
            named = {r.record_id for r in new.references}
            refs = list(new.references) + [r for r in hidden if r.record_id not in named]
            if sum(1 for r in refs if r.rel == "subject") > 1 or \
                    sum(1 for r in refs if r.rel == "object") > 1:
                raise invalid("a record has at most one subject and one object reference")
            new = RecordBody(new.type, new.title, new.content, new.attributes, tuple(refs),
                             new.valid_from, new.valid_to)
        if reason is not None:
            new = RecordBody(new.type, new.title, new.content,
                             {**new.attributes, "revision_reason": reason}, new.references,
                             new.valid_from, new.valid_to)
        new = _fill_reference_memories(core, new)
        payload = {"body_digest": core.seal(new),
                   **history.writer_payload(core.now_iso(), writer or caller.writer,
                                            on_behalf_of=on_behalf_of,
                                            consolidation_id=consolidation_id)}
        core.commit(memory_id, writer or caller.writer, k,
                    [Op("revise_record", record_id, payload)], "revise")
        return core.render(view, _current(core, record_id, memory_id))

    return core.idempotent(caller, memory_id, "revise", {"record": record_id, "body": body},
                           key, apply, check)


def forget(core: Core, caller: Caller, memory_id: str, record_id: str, key: str | None, *,
           writer: Principal | None = None, on_behalf_of: Principal | None = None,
           consolidation_id: str | None = None) -> Wire:
    """``DELETE …/records/{rid}``: status forgotten, trace kept."""
    def check() -> None:
        core.resolve(caller, memory_id, "write")

    def apply(k: str) -> Wire:
        old = _current(core, record_id, memory_id)
        if old.status != "forgotten":
            payload = history.writer_payload(core.now_iso(), writer or caller.writer,
                                             on_behalf_of=on_behalf_of,
                                             consolidation_id=consolidation_id)
            core.commit(memory_id, writer or caller.writer, k,
                        [Op("forget_record", record_id, payload)], "forget")
        return core.render(core.view(caller), _current(core, record_id, memory_id))

    return core.idempotent(caller, memory_id, "forget", {"record": record_id}, key, apply,
                           check)


def erase(core: Core, caller: Caller, memory_id: str, body: Wire, key: str | None) -> Wire:
    """``POST /v1/memories/{id}/erase``: bytes of every version removed; honest report."""
    b = wire.obj(body, "body", ("record_ids",))
    ids = b.get("record_ids")
    if not isinstance(ids, list) or not ids or len(ids) > 1000:
        raise invalid("record_ids must be a non-empty list of at most 1000 ids")
    rids = list(dict.fromkeys(wire.ident(x, "record_ids[]") for x in ids))

    def check() -> None:
        _, m = core.resolve(caller, memory_id, "delete")
        if m.provider == providers.REPOSITORY_PROVIDER:
            raise mounts.read_only()
        if caller.member.type == "agent":
            # Erase is a person's act, never an agent's (uhp-memories.md §14).
            raise Forbidden("erase is a person's act; an agent may forget instead",
                            code=MEMORY_FORBIDDEN)

    def apply(k: str) -> Wire:
        held = [rid for rid in rids if (h := core.store.record_head(rid)) is not None
                and h.memory_id == memory_id]
        if held:
            payloads, names, kept = erasure(core.store.changesets(memory_id), held,
                                            lambda rid: core.store.record_head(rid) is not None)
            core.commit(memory_id, caller.writer, k, [
                Op("erase_record", rid, history.writer_payload(core.now_iso(), caller.writer))
                for rid in held], "erase")
            core.store.erase_payloads(payloads)
            for name in sorted(names):
                core.store.forget_responses(name)
        else:
            kept = set()
        # not held here, or its words still in a correction that kept them: no guarantee
        return {"object": "memory.erasure", "erased": [r for r in held if r not in kept],
                "unreachable": [r for r in rids if r not in held or r in kept]}

    out = core.idempotent(caller, memory_id, "erase", {"record_ids": rids}, key, apply, check)
    if out["erased"]:
        core.store.compact_after_erase()
    return out


def upload_file(core: Core, caller: Caller, data: bytes, name: str, media_type: str,  # noqa: PLR0917
                key: str | None) -> Wire:
    """``POST /v1/files``: bytes kept content-addressed, refused when the type is not kept."""
    name = wire.string(name, "name", max_len=wire.MAX_NAME)
    if any(ord(c) < 32 or c in "/\\" for c in name):
        raise invalid("name must not contain control characters or path separators")
    media_type = wire.string(media_type, "media_type", max_len=127).lower()
    if not providers.keeps_media(media_type):
        raise unsupported(f"the provider does not keep {media_type} files")
    if len(data) > providers.MAX_FILE_BYTES:
        raise invalid(f"a file holds at most {providers.MAX_FILE_BYTES} bytes")
    sha = core.store.put_file_bytes(data)  # before the row: a crash leaves only stray bytes
    request = {"name": name, "media_type": media_type, "sha256": sha}

    def apply(_k: str) -> Wire:
        fid = mint("hfile")
        core.store.insert_file(fid, sha, name, media_type, len(data), caller.member.id,
                               core.now_ms())
        return {"id": fid, "object": "file", "name": name, "media_type": media_type,
                "bytes": len(data), "sha256": sha}

    return core.idempotent(caller, "-files", "upload_file", request, key, apply)


__all__ = ["erase", "forget", "get_record", "list_records", "record_content",
           "record_history", "remember", "revise", "upload_file"]
