"""``pal import --git DIR``: an exported history brought into this server — the I/O shell.

The path is replication's (:mod:`palimpsest.hn.replication`): the repository is fetched, every
object fsck-checked on arrival, into a throw-away private *quarantine* below
``<data_dir>/provenance/imports/``; measured against budgets before anything is read;
verified with the same checks ``pal verify DIR`` makes (:func:`.verify.check`: the signed
statement, every ref, changeset, signature, parent link and body) and then re-read as the
service's own changesets (closed op shapes, bodies in canonical form, ids recomputed); and
only then promoted — every changeset, signature, ref and projection of every memory in one
store transaction, or nothing. The outcome is named in replication's words: ``promoted``,
``over-budget`` or ``structurally-invalid`` (a fetch, a verification or a fork that failed),
with a diagnostic naming what failed. The quarantine is removed either way.

Trust: the changesets are trusted because the exporting server's keys sign them — the keys
given (``--keys``, pinned), or, only when the importer says so, the keys the export carries.
The origin's signatures are kept beside this server's own (role ``origin``), a member's as
they are.

``accepted`` history lands as it was: the refs of each memory mirror the export's, and what
``refs/shared/main`` gains is projected into records and the search index. A ref that
already exists here must be an ancestor of the imported head (a fork or a rollback is
refused, as replication refuses them). ``reviewed`` history lands on
``refs/topics/imports/<transaction>/…`` refs owned by the member who imports it, nothing is
projected, and :meth:`MemoryService.import_git` opens a merge request of the imported
``refs/shared/main`` into this server's, so it reaches recall only through the review desk.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pygit2

from palimpsest import canonical
from palimpsest.errors import InvalidInput, PalError
from palimpsest.hn.replication import transport as rgit
from palimpsest.hn.replication.report import over_budget
from palimpsest.hn.replication.selection import Budgets, ensure_private_dir
from palimpsest.hn.replication.txn import sync_lock
from palimpsest.service import history
from palimpsest.service.core import Core
from palimpsest.service.model import (
    MEMBER_TYPES,
    PROVIDER_ID,
    SHARED_MAIN,
    Changeset,
    Member,
    Memory,
    RecordBody,
    Ref,
    Signature,
    Wire,
)
from palimpsest.service.provenance import layout, signing, verify
from palimpsest.service.provenance.receipt import Refused

MODES: Final = ("accepted", "reviewed")
# An export's own files; every other blob (a body) counts as an attachment in the budgets.
PLAIN_FILES: Final = frozenset({layout.CHANGESET, layout.SIGNATURES, layout.STORED,
                                layout.KEYS, layout.STATEMENT, layout.STATEMENT_SIG})
DEFAULT_BUDGETS: Final = Budgets(max_events=1_000_000, max_objects=10_000_000,
                                 max_object_bytes=layout.MAX_BLOB,
                                 max_attachment_bytes=4 << 30, max_total_bytes=8 << 30)


class _Failed(Exception):
    """An import that ends in quarantine: its outcome and why."""

    def __init__(self, status: str, diagnostic: str) -> None:
        super().__init__(diagnostic)
        self.status = status
        self.diagnostic = diagnostic


@dataclass(slots=True)
class _Memory:
    """What the export holds for one memory, read and checked."""

    memory_id: str
    name: str
    description: str
    changesets: list[Changeset] = field(default_factory=list)  # parents first
    signatures: dict[str, list[Signature]] = field(default_factory=dict)
    bodies: dict[str, bytes] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)  # ref name -> head


def import_git(core: Core, data_dir: Path, source: Path, *, keys: dict[str, str] | None,
               mode: str = "accepted", member_id: str | None = None,
               budgets: Budgets = DEFAULT_BUDGETS) -> Wire:
    """Quarantine, validate and promote the export at ``source``; returns the outcome.

    ``keys`` ``None`` trusts the keys the export carries (the caller decided so).

    Raises:
        InvalidInput: usage (an unknown mode, no such member, ``source`` not a repository).
        Conflict: ``sync-running`` while another import runs on this data directory.
    """
    if mode not in MODES:
        raise InvalidInput(f"--as is {' or '.join(MODES)}", code="usage")
    member = _member(core, member_id, mode)
    git_dir = rgit.git_dir_of(source)
    parent = data_dir / "provenance" / "imports"
    ensure_private_dir(parent.parent)
    with sync_lock(parent, parent):
        rgit.remove_quarantines(parent, parent)  # a killed import's leftovers
        quarantine = rgit.new_quarantine(parent, object_format=rgit.object_format(git_dir))
        report: Wire = {"object": "palimpsest.import", "source": str(source), "mode": mode,
                        "member_id": member,
                        "transaction": quarantine.txn, "keys": "given with --keys" if keys
                        else "carried by the export", "measurement": None, "memories": []}
        try:
            _run(core, quarantine, git_dir, keys, mode, member, budgets, report)
        except _Failed as failed:
            report.update(status=failed.status, diagnostic=failed.diagnostic, promoted=False)
        finally:
            rgit.discard_quarantine(quarantine)
    return report


def _member(core: Core, member_id: str | None, mode: str) -> str:
    """Who owns what the import makes: the named member, or the first admin."""
    if member_id is not None:
        found = core.store.member(member_id)
        if found is None:
            raise InvalidInput(f"no member {member_id[:40]} on this server", code="usage",
                               hint="name one `pal admin member list` shows")
        return found.id
    if mode == "reviewed":
        raise InvalidInput("a reviewed import needs the member who proposes it",
                           code="usage", hint="pass --member MEMBER_ID")
    admins = [m for m in core.store.members() if m.admin]
    if not admins:
        raise InvalidInput("this server has no admin member to own what the import makes",
                           code="usage", hint="start pal serve once, or pass --member")
    return admins[0].id


def _run(core: Core, quarantine: rgit.Quarantine, git_dir: Path,  # noqa: PLR0917
         keys: dict[str, str] | None, mode: str, member: str, budgets: Budgets,
         report: Wire) -> None:
    problem = rgit.fetch_refspecs(quarantine, git_dir.resolve().as_uri(), ["+refs/*:refs/*"])
    if problem is not None:
        raise _Failed("structurally-invalid", problem)
    heads = sorted(set(rgit.list_refs(quarantine.path, "refs/").values()))
    if not heads:
        raise _Failed("structurally-invalid", "the repository has no refs (not an export)")
    m = rgit.measure(quarantine.path, heads[0], None, max_events=budgets.max_events,
                     more_heads=heads[1:], plain_files=PLAIN_FILES)
    report["measurement"] = m.to_json()
    over = over_budget(m, budgets)
    if over:
        raise _Failed("over-budget", "exceeds the import budget for " + ", ".join(over))
    repo = pygit2.Repository(str(quarantine.path))
    try:
        checked = verify.check(repo, keys)
        memories = _read(repo, checked)
    except Refused as refused:
        raise _Failed("structurally-invalid", str(refused)) from refused
    try:
        with core.store.write():  # one transaction: a failure keeps nothing of any memory
            report["writers"] = _writers(core, checked.statement.get("writers"))
            report["memories"] = [_promote(core, mem, mode, member, quarantine.txn)
                                  for mem in memories]
    except PalError as exc:  # e.g. a record id another memory here holds
        raise _Failed("relationship-invalid", exc.message) from exc
    finally:
        core._sealed.clear()
    report.update(status="promoted", diagnostic="", promoted=True)


# --- reading the verified export as changesets -----------------------------------------------
def _blob(repo: pygit2.Repository, tree: Any, name: str) -> bytes:
    obj = repo[tree[name].id]
    assert isinstance(obj, pygit2.Blob)  # noqa: S101 — verify.check read it as one
    return bytes(obj.data)


def _read(repo: pygit2.Repository, checked: verify.Verified) -> list[_Memory]:
    names = checked.statement.get("memories")
    out: dict[str, _Memory] = {}
    for mid in checked.statement["refs"]:
        info = names.get(mid) if isinstance(names, Mapping) else None
        info = info if isinstance(info, Mapping) else {}
        name, text = info.get("name"), info.get("description")
        out[mid] = _Memory(mid, name[:200] if isinstance(name, str) and name.strip() else mid,
                           text[:2000] if isinstance(text, str) else "")
    for _git_name, (mid, ref_name, head) in sorted(checked.refs.items()):
        try:
            out[mid].refs[_ref_name(ref_name)] = head
        except InvalidInput as exc:
            raise Refused(f"ref {ref_name[:80]}", exc.message) from exc
    for oid, mid, cid in checked.commits:
        _changeset(repo, repo[oid].peel(pygit2.Commit), cid, out[mid])
    return list(out.values())


def _ref_name(name: str) -> str:
    from palimpsest.service.memorygit.repository import check_ref_name  # noqa: PLC0415

    return check_ref_name(name)


def _changeset(repo: pygit2.Repository, commit: pygit2.Commit, cid: str, into: _Memory) -> None:
    """One verified commit as the service's changeset (refused by name when it is none)."""
    where = f"changeset {cid[:12]}"
    content = canonical.decode(_blob(repo, commit.tree, layout.CHANGESET))
    bodies: dict[str, bytes] = {}
    if layout.BODIES in commit.tree:
        sub = repo[commit.tree[layout.BODIES].id]
        assert isinstance(sub, pygit2.Tree)  # noqa: S101 — verify.check read it as one
        bodies = {str(e.name): _blob(repo, sub, str(e.name)) for e in sub}
    try:
        stored = canonical.decode(_blob(repo, commit.tree, layout.STORED))
        created_at = stored["created_at"]
        if not isinstance(created_at, str) or len(created_at) > 40:
            raise TypeError("created_at")
        payloads = {}
        for op in content.get("ops") or ():
            d = op.get("payload_digest")
            if isinstance(d, str) and d in bodies:
                payloads[d] = canonical.decode(bodies[d])
        cs = Changeset.from_document({**content, "changeset_id": cid,
                                      "created_at": created_at}, payloads)
        for op in cs.ops:
            if op.payload is not None:
                history.validate_op(op)
        history.verify(cs)
        for digest, data in bodies.items():
            if digest not in payloads:
                _record_body(data)
    except (PalError, KeyError, TypeError, ValueError, AttributeError) as exc:
        why = exc.message if isinstance(exc, PalError) else f"malformed ({exc!r:.80})"
        raise Refused(f"changeset bytes ({where})",
                      f"not a changeset this service accepts: {why}") from exc
    sigs = canonical.decode(_blob(repo, commit.tree, layout.SIGNATURES), allow_floats=True)
    into.signatures[cid] = [_kept(signing.signature_of(s)) for s in sigs]
    into.bodies.update(bodies)
    into.changesets.append(cs)


def _record_body(data: bytes) -> None:
    """A record body in exactly the canonical form this service stores (else ValueError)."""
    body = RecordBody.from_stored(canonical.decode(data))
    if canonical.encode(body.to_wire()) != data:
        raise ValueError("a record body is not in its canonical form")


def _kept(sig: Signature) -> Signature:
    """How an origin's signature is kept here: its server's as ``origin``, a member's as is."""
    if sig.role == signing.SERVER:
        return Signature("origin", f"origin:{sig.key_id[:16]}", sig.public_key, sig.signature)
    return sig


# --- promotion ---------------------------------------------------------------------------------
def _writers(core: Core, writers: Any) -> list[str]:
    """Directory entries for the members who authored the imported changesets and are not
    members here: a name and a type (human or agent) so their writes read as they did at the
    origin — no credential, no grant, no admin: an entry cannot sign in or read anything."""
    made: list[str] = []
    for ident, info in sorted(writers.items()) if isinstance(writers, Mapping) else ():
        if not isinstance(info, Mapping) or core.store.member(ident) is not None:
            continue
        name, kind = info.get("name"), info.get("type")
        if not (isinstance(ident, str) and ident.startswith("hmbr_") and len(ident) <= 64
                and isinstance(name, str) and 0 < len(name) <= 200
                and kind in MEMBER_TYPES):
            raise _Failed("structurally-invalid", f"the statement names writer "
                          f"{str(ident)[:40]} with no valid name and type")
        core.store.insert_member(Member(ident, name, str(kind), False, core.now_ms()))
        made.append(ident)
    return made



def _reach(parents: Mapping[str, tuple[str, ...]], head: str | None) -> set[str]:
    out: set[str] = set()
    stack = [head] if head else []
    while stack:
        cid = stack.pop()
        if cid in out:
            continue
        out.add(cid)
        stack.extend(parents.get(cid, ()))
    return out


def _promote(core: Core, mem: _Memory, mode: str, member: str, txn: str) -> Wire:
    store = core.store
    known = {m.id for m in store.all_memories()}
    created = mem.memory_id not in known
    if created:
        now = core.now_ms()
        store.insert_memory(Memory(mem.memory_id, mem.name, mem.description, None, False,
                                   PROVIDER_ID, member, now, now))
    store.lock_memory(mem.memory_id)
    new = 0
    for cs in mem.changesets:
        if store.changeset(cs.id) is not None:
            continue
        for digest, data in mem.bodies.items():
            if hashlib.sha256(data).hexdigest() == digest and store.body(digest) is None:
                store.put_body(digest, data)
        store.insert_changeset(cs)  # this server signs it too
        for sig in mem.signatures.get(cs.id, ()):
            store.add_signature(cs.id, sig)
        new += 1
    parents = {cs.id: cs.parent_ids for cs in mem.changesets}
    refs: list[Wire] = []
    owner = f"member:{member}"
    now_iso = core.now_iso()
    for name, head in sorted(mem.refs.items()):
        target = name if mode == "accepted" else f"refs/topics/imports/{txn}/{name[5:]}"
        _ref_name(target)
        current = store.ref(mem.memory_id, target)
        before = current.head if current else None
        if before == head:
            refs.append({"ref": target, "head": head, "previous": before, "status": "unchanged"})
            continue
        if before is not None and before not in _reach(parents, head):
            raise _Failed("structurally-invalid", f"fork: {target} of memory "
                          f"{mem.memory_id} is at {before[:12]} here, which the imported "
                          f"history of that ref does not contain (no rollback, no fork)")
        store.advance_ref(Ref(mem.memory_id, target, head, target.startswith("refs/shared/"),
                              current.created_by if current else owner,
                              current.created_at if current else now_iso, now_iso),
                          expected=before)
        if target == SHARED_MAIN:
            old = _reach(parents, before)
            gained = _reach(parents, head) - old
            for cs in mem.changesets:  # parents first
                if cs.id in gained:
                    for op in cs.ops:
                        core.apply(cs, op)
        refs.append({"ref": target, "head": head, "previous": before,
                     "status": "created" if before is None else "advanced"})
    return {"memory_id": mem.memory_id, "name": mem.name, "created": created,
            "changesets": len(mem.changesets), "new_changesets": new, "refs": refs,
            "proposal_id": None}


__all__ = ["DEFAULT_BUDGETS", "MODES", "import_git"]
