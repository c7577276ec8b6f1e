"""Trust you can filter by: which records a recall or a prime admits, by their provenance.

A filter (``x.pal.provenance`` on recall, ``provenance`` on prime) names what the version a
record shows must have — all of what it names, or the record is left out:

- ``reviewed_by_other``: admitted onto ``refs/shared/main`` by a review whose reviewer is not
  its writer (the review the record's receipt names);
- ``written_by``: ``human`` or ``agent``, the writer's member type;
- ``signed_by``: a signature over its changeset by this key (its key id, the hex
  fingerprint, or the public key itself) — the server's, a member's or an origin's.

In a memory that requires review, prime leaves out by default what an agent wrote without a
review (``unreviewed_agents: false``); ``"any"`` asks for everything. Each answer says which
filter it applied (``x.pal.provenance``). The judgement reads the same history a receipt
does; a record whose changeset this store does not hold (a mounted repository's) is neither
reviewed nor signed here.

The wire forms: an object ``{"reviewed_by_other": true, "written_by": "human", "signed_by":
"<key>"}``, or its string form for a query parameter, comma-separated:
``reviewed_by_other,written_by:human,signed_by:<key>`` (``any``: no filter).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from palimpsest.service.core import Core
from palimpsest.service.model import MEMBER_TYPES, SHARED_MAIN, RecordVersion, Wire, invalid

FIELD: Final = "x.pal.provenance"
KEYS: Final = ("reviewed_by_other", "written_by", "signed_by", "unreviewed_agents")
_FLAGS: Final = ("reviewed_by_other", "unreviewed_agents")
ReviewOf = Callable[[str, str], Wire | None]  # (memory id, changeset id) -> review or None


@dataclass(frozen=True, slots=True)
class TrustFilter:
    """What a record's version must have to be admitted (nothing named: everything)."""

    reviewed_by_other: bool = False
    written_by: str | None = None
    signed_by: str | None = None
    unreviewed_agents: bool = True  # False: an agent's version needs a review

    @property
    def empty(self) -> bool:
        """Admits everything."""
        return self == TrustFilter()

    def to_wire(self) -> Wire:
        """What an answer reports it applied."""
        return {"reviewed_by_other": self.reviewed_by_other, "written_by": self.written_by,
                "signed_by": self.signed_by, "unreviewed_agents": self.unreviewed_agents}


def parse(value: Any) -> TrustFilter | None:
    """A filter from its wire form; ``None`` for ``"any"`` (nothing filtered, no default).

    Raises:
        InvalidInput: memory_invalid naming what is wrong.
    """
    if value == "any":
        return None
    if isinstance(value, str):
        doc: dict[str, Any] = {}
        for word in (w.strip() for w in value.split(",") if w.strip()):
            name, sep, arg = word.partition(":")
            doc[name] = ({"true": True, "false": False}.get(arg, arg)
                         if name in _FLAGS else arg) if sep else True
        value = doc
    if not isinstance(value, Mapping):
        raise invalid(f"{FIELD} must be an object or its comma-separated string form",
                      hint="e.g. reviewed_by_other,written_by:human,signed_by:<key id>")
    for key in value:
        if key not in KEYS:
            raise invalid(f"{FIELD}: unknown key {str(key)[:40]!r}",
                          hint=f"allowed: {', '.join(KEYS)}")
    reviewed = value.get("reviewed_by_other", False)
    agents = value.get("unreviewed_agents", True)
    if not isinstance(reviewed, bool) or not isinstance(agents, bool):
        raise invalid(f"{FIELD}: reviewed_by_other and unreviewed_agents are true or false")
    written = value.get("written_by")
    if written is not None and written not in MEMBER_TYPES:
        raise invalid(f"{FIELD}: written_by is human or agent")
    signed = value.get("signed_by")
    if signed is not None and (not isinstance(signed, str) or not 0 < len(signed) <= 128):
        raise invalid(f"{FIELD}: signed_by is a key id or a public key")
    return TrustFilter(reviewed, written, signed, agents)


class Judge:
    """Decides, record by record, what one filter admits (cached per changeset)."""

    def __init__(self, core: Core, review_of: ReviewOf, wanted: TrustFilter) -> None:
        self._core = core
        self._review_of = review_of
        self.wanted = wanted
        self._reviews: dict[str, Wire | None] = {}
        self._keys: dict[str, set[str]] = {}

    def review(self, rec: RecordVersion) -> Wire | None:
        """The review that admitted the record's version, or ``None``."""
        cid = rec.changeset_id
        if cid not in self._reviews:
            cs = self._core.store.changeset(cid)
            self._reviews[cid] = self._review_of(rec.memory_id, cid) \
                if cs is not None and cs.ref_name != SHARED_MAIN else None
        return self._reviews[cid]

    def _signers(self, cid: str) -> set[str]:
        if cid not in self._keys:
            sigs = self._core.store.signatures([cid]).get(cid, [])
            self._keys[cid] = {s.key_id for s in sigs} | {s.public_key for s in sigs}
        return self._keys[cid]

    def admits(self, rec: RecordVersion) -> bool:
        """Whether the record's version has everything the filter names."""
        f = self.wanted
        writer = rec.written_by
        if f.written_by is not None and writer.type != f.written_by:
            return False
        if f.signed_by is not None and f.signed_by not in self._signers(rec.changeset_id):
            return False
        needs_review = f.reviewed_by_other or (not f.unreviewed_agents
                                               and writer.type == "agent")
        if needs_review:
            review = self.review(rec)
            if review is None:
                return False
            if f.reviewed_by_other and review.get("reviewer") == \
                    f"{writer.kind}:{writer.id}":
                return False
        return True


__all__ = ["FIELD", "KEYS", "Judge", "TrustFilter", "parse"]
