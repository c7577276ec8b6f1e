"""The history rows of the embedded store: changesets and content-addressed bodies.

A base of :class:`~palimpsest.service.storage.sqlite.SqliteStore`, like :mod:`.records` and
:mod:`.principals`. A changeset is kept once, under its id (32 bytes), as its canonical
document deflated (:mod:`.pack`) less what the row says itself (its id, its memory, the format
name), its parents named by their row and its principals by their ``names`` key; a body
(record body or Memory Git payload) is kept once under its SHA-256, deflated, or as a delta
of the values it was derived from (its ``bases``). Reading either gives back exactly the bytes
their digests cover.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from palimpsest import canonical
from palimpsest.identity import b64_nopad, b64_nopad_decode
from palimpsest.service.model import Changeset, Signature, payload_bytes
from palimpsest.service.storage.pack import is_delta, pack, unpack
from palimpsest.service.storage.schema import Names, load

_HEX: Final = re.compile(r"[0-9a-f]{64}")
_MAX_DEPTH: Final = 16  # a delta of a delta of …: past this a body is kept whole
_KEPT_BY_ROW: Final = ("changeset_id", "integrity_digest", "project_id", "schema_version")
# principals of a UHP op's payload (server metadata, closed keys), kept by their names key
_PRINCIPALS: Final = ("written_by", "on_behalf_of")


def digest_key(digest: str) -> bytes | None:
    """A hex SHA-256 as the 32 bytes the rows keep (``None``: not a digest this store names)."""
    return bytes.fromhex(digest) if _HEX.fullmatch(digest) else None


class ChangesetRows(Names):
    """Changesets and bodies over ``_db``.

    The rows of recent changesets are remembered (a new changeset names its parent by row),
    those a write made only once it commits, as :class:`.schema.Names` does with its keys."""

    _seqs: dict[str, int]
    _new_seqs: dict[str, int]
    _signer: Callable[[Changeset], Sequence[Signature]] | None

    # --- changesets -----------------------------------------------------------------------
    def insert_changeset(self, cs: Changeset) -> None:
        """Append an immutable changeset (ignored if the same id exists); the payloads it keeps
        apart go to ``bodies``, once each."""
        doc = cs.document()
        for name in _KEPT_BY_ROW:
            del doc[name]
        doc["parent_ids"] = [self._seq(p) or p for p in cs.parent_ids]
        doc["author_principal"] = self._key(cs.author)
        for op in doc["ops"]:
            for name in _PRINCIPALS:
                if isinstance(op.get("payload", {}).get(name), dict):
                    op["payload"][name] = self._key(canonical.encode(op["payload"][name]).decode())
        cur = self._db.execute("INSERT OR IGNORE INTO changesets (id, mem, doc) VALUES (?,?,?)",
                               (bytes.fromhex(cs.id), self._key(cs.memory_id),
                                pack(canonical.encode(doc))))
        if not cur.rowcount:
            return  # stored already (the same id is the same changeset)
        seq = self._new_seqs[cs.id] = int(cur.lastrowid or 0)
        for sig in self._signer(cs) if self._signer is not None else ():
            self._put_signature(seq, sig)
        for op in cs.ops:
            if op.payload_digest is not None and op.payload is not None:
                self.put_body(op.payload_digest, payload_bytes(op.payload))

    # --- signatures -----------------------------------------------------------------------
    def set_signer(self, signer: Callable[[Changeset], Sequence[Signature]] | None) -> None:
        """What signs every changeset this store accepts, in the transaction that stores it
        (``None``: nothing signs; a migration's target)."""
        self._signer = signer

    def _put_signature(self, seq: int, sig: Signature) -> None:
        self._x("INSERT OR IGNORE INTO signatures VALUES (?,?,?,?,?)",
                (seq, b64_nopad_decode(sig.public_key, 32, "public key"), sig.role,
                 self._key(sig.signer), b64_nopad_decode(sig.signature, 64, "signature")))

    def add_signature(self, cid: str, sig: Signature) -> bool:
        """Keep one more signature of a stored changeset (checked by the caller); False when
        the changeset is unknown."""
        seq = self._seq(cid)
        if seq is None:
            return False
        self._put_signature(seq, sig)
        return True

    def signatures(self, cids: Sequence[str]) -> dict[str, list[Signature]]:
        """The signatures of each named changeset (server first, then members by key)."""
        out: dict[str, list[Signature]] = {}
        wanted = [k for k in (digest_key(c) for c in dict.fromkeys(cids)) if k is not None]
        for i in range(0, len(wanted), 500):
            part = wanted[i:i + 500]
            marks = ",".join("?" * len(part))
            for r in self._q(
                    "SELECT c.id, s.key, s.role, s.signer, s.sig FROM changesets c JOIN "  # noqa: S608 — placeholders only
                    f"signatures s ON s.cs = c.seq WHERE c.id IN ({marks}) "
                    "ORDER BY c.seq, s.role DESC, s.key", part):
                out.setdefault(bytes(r["id"]).hex(), []).append(Signature(
                    r["role"], self._name(r["signer"]), b64_nopad(bytes(r["key"])),
                    b64_nopad(bytes(r["sig"]))))
        return out

    def _seq(self, cid: str) -> int | None:
        """The row of a stored changeset."""
        found = self._new_seqs.get(cid) or self._seqs.get(cid)
        if found is not None:
            return found
        key = digest_key(cid)
        row = self._one("SELECT seq FROM changesets WHERE id=?", (key,)) if key else None
        return int(row["seq"]) if row is not None else None

    def _settle_seqs(self, committed: bool) -> None:
        """After a write: remember the rows it made (committed), or forget them."""
        if committed:
            if len(self._seqs) > 10_000:
                self._seqs.clear()
            self._seqs.update(self._new_seqs)
        self._new_seqs.clear()

    def _changeset_of(self, key: bytes, mem: int, blob: bytes) -> Changeset:
        data = load(unpack(blob))
        data["changeset_id"], data["project_id"] = key.hex(), self._name(mem)
        data["parent_ids"] = [self._cs_id(p) if isinstance(p, int) else p
                              for p in data["parent_ids"]]
        data["author_principal"] = self._name(data["author_principal"])
        for o in data["ops"]:
            for name in _PRINCIPALS:
                if isinstance(o.get("payload", {}).get(name), int):
                    o["payload"][name] = load(self._name(o["payload"][name]))
        payloads = {}
        for o in data["ops"]:
            found = self.body(o["payload_digest"]) if "payload_digest" in o else None
            if found is not None:
                payloads[o["payload_digest"]] = load(found)
        return Changeset.from_document(data, payloads)

    def _cs_id(self, seq: int) -> str:
        row = self._one("SELECT id FROM changesets WHERE seq=?", (seq,))
        if row is None:
            raise sqlite3.DatabaseError(f"changeset row {seq} is named but missing")
        return bytes(row["id"]).hex()

    def changeset(self, cid: str) -> Changeset | None:
        """A stored changeset with its payloads (an erased one's is ``None``); the caller
        verifies its digest."""
        key = digest_key(cid) if isinstance(cid, str) else None
        r = self._one("SELECT id, mem, doc FROM changesets WHERE id=?", (key,)) if key else None
        return self._changeset_of(r["id"], r["mem"], r["doc"]) if r is not None else None

    def changesets(self, memory_id: str | None = None) -> Iterator[Changeset]:
        """Every changeset in append order (a topological order), optionally of one memory."""
        if memory_id is None:
            rows = self._q("SELECT id, mem, doc FROM changesets ORDER BY seq")
        else:
            mem = self._known(memory_id)
            rows = [] if mem is None else self._q(
                "SELECT id, mem, doc FROM changesets WHERE mem=? ORDER BY seq", (mem,))
        for r in rows:
            yield self._changeset_of(r["id"], r["mem"], r["doc"])

    # --- bodies ---------------------------------------------------------------------------
    def put_body(self, digest: str, data: bytes, bases: Sequence[str] = ()) -> None:
        """Store content-addressed bytes once; ``bases`` name stored values they were derived
        from (kept as a delta of them, so words they repeat take their space once)."""
        key = bytes.fromhex(digest)
        if not bases:
            self._x("INSERT OR IGNORE INTO bodies VALUES (?,?,NULL)", (key, pack(data)))
            return
        if self._one("SELECT 1 FROM bodies WHERE digest=?", (key,)) is not None:
            return
        held = [(b, self._raw(b)) for b in dict.fromkeys(bases) if b != digest]
        found = [(b, raw) for b, raw in held if raw is not None
                 and self._depth(raw[0], raw[1]) < _MAX_DEPTH]
        if found:
            blob = pack(data, [self._inflated(raw[0], raw[1]) for _, raw in found])
            named: bytes | None = b"".join(bytes.fromhex(b) for b, _ in found)
        else:
            blob, named = pack(data), None
        self._x("INSERT INTO bodies VALUES (?,?,?)", (key, blob, named))

    def _raw(self, digest: str) -> tuple[bytes, bytes | None] | None:
        key = digest_key(digest)
        r = self._one("SELECT data, bases FROM bodies WHERE digest=?", (key,)) if key else None
        if r is None:
            return None
        data = r["data"]
        blob = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        return blob, bytes(r["bases"]) if r["bases"] is not None else None

    def _bases_of(self, named: bytes | None) -> list[str]:
        data = named or b""
        return [data[i:i + 32].hex() for i in range(0, len(data), 32)]

    def _depth(self, blob: bytes, named: bytes | None) -> int:
        if not is_delta(blob):
            return 0
        depths = [self._depth(*raw) for raw in map(self._raw, self._bases_of(named))
                  if raw is not None]
        return 1 + max(depths, default=0)

    def _inflated(self, blob: bytes, named: bytes | None) -> bytes:
        if not is_delta(blob):
            return unpack(blob)
        bases = []
        for base in self._bases_of(named):
            raw = self._raw(base)
            if raw is None:  # a base went without its dependents being made whole
                raise sqlite3.DatabaseError(f"body base {base[:12]} is missing")
            bases.append(self._inflated(*raw))
        return unpack(blob, bases)

    def body(self, digest: str) -> bytes | None:
        """The bytes stored under ``digest``, ``None`` once erased."""
        raw = self._raw(digest)
        if raw is None:
            return None
        try:
            return self._inflated(*raw)
        except ValueError:
            return raw[0]  # damaged: the caller's digest check refuses it

    def _drop_body(self, digest: str) -> None:
        """Remove one body; the deltas made of it are first kept whole (their bytes are
        their own records' — an erase of this body never takes them along)."""
        key = digest_key(digest)
        if key is None:
            return
        for r in self._q("SELECT digest, data, bases FROM bodies WHERE bases IS NOT NULL "
                         "AND instr(bases, ?) > 0", (key,)):
            named = bytes(r["bases"])
            if digest not in self._bases_of(named):
                continue  # the bytes matched across two names, not one of them
            whole = self._inflated(bytes(r["data"]), named)
            self._x("UPDATE bodies SET data=?, bases=NULL WHERE digest=?",
                    (pack(whole), r["digest"]))
        self._x("DELETE FROM bodies WHERE digest=?", (key,))

    def erase_payloads(self, digests: Sequence[str]) -> None:
        """Remove kept-apart payloads (their changesets keep the digests) and tell readers
        that cached history may hold erased content."""
        for d in digests:
            self._drop_body(d)
        self._x("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='erase_gen'")

    def erase_generation(self) -> int:
        """Bumped by every erase (caches of verified history key on it)."""
        row = self._one("SELECT value FROM meta WHERE key='erase_gen'")
        return int(row["value"]) if row else 0

    def changeset_digests(self, memory_id: str) -> set[str]:
        """Every body digest the changesets of a memory name (on any ref)."""
        out: set[str] = set()
        mem = self._known(memory_id)
        for r in self._q("SELECT doc FROM changesets WHERE mem=?", (mem,)) if mem else ():
            for op in load(unpack(r["doc"])).get("ops", ()):
                for d in ((op.get("payload") or {}).get("body_digest"), op.get("payload_digest")):
                    if isinstance(d, str):
                        out.add(d)
        return out


__all__ = ["ChangesetRows", "digest_key"]
