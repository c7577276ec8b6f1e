"""``pal memory prime``: the standing context of a repository at one commit, within a token budget.

What a coding agent should know when its session starts: the open handoffs (newest first, each
with its four lists), the active decisions and the latest verifications that apply at the
commit. Every memory comes from :func:`palimpsest.hn.recall.recall` with its defaults (active,
policy-qualified, applicable, evidence resolved), as the exact recall record JSON with its full
provenance; nothing here judges trust or lifecycle again.

The answer is one compact JSON document (Go escaping, one LF), labelled by section, with the
constant warning outside author data::

    {"version":0,"warning":…,"atCommit":…,"truncated":false,
     "sections":[{"label":"open handoffs","kind":"handoff","matched":2,"returned":2,
                  "memories":[…]},
                 {"label":"active decisions",…}, {"label":"latest verifications",…}]}

The budget covers the whole fenced text an agent receives (:func:`palimpsest.hn.show.fenced`:
the note, the ``<untrusted-data>`` fence and the JSON), counted as ⌈UTF-8 bytes / 4⌉ tokens.
Sections are filled in turns — the newest open handoff, the newest decision, the newest
verification, then the next of each — so a long list of one kind cannot crowd the others out;
a section stops at its first memory that does not fit (the rest of it is left out, the other
sections go on). Each section stays in recall order (newest first). The selection depends
only on the verified memories, the policy at the commit and the budget: the same inputs give
the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from palimpsest.canonical import encode
from palimpsest.errors import InvalidInput
from palimpsest.hn.recall.request import MAX_BOUND, request_from_value
from palimpsest.hn.show import WARNING, fenced

if TYPE_CHECKING:
    import pygit2

SECTIONS: tuple[tuple[str, str], ...] = (
    ("open handoffs", "handoff"),
    ("active decisions", "decision"),
    ("latest verifications", "verification"),
)
MAX_BUDGET = 1_000_000
PAGE_RECORDS = 64  # one recall page; the prime pages on until the section is full


def tokens(text: str) -> int:
    """The token estimate of a text: ⌈UTF-8 bytes / 4⌉ (bytes, not characters, so text
    outside ASCII is not under-counted)."""
    return math.ceil(len(text.encode("utf-8")) / 4)


@dataclass(slots=True)
class _Section:
    label: str
    kind: str
    matched: int = 0
    records: list[bytes] = field(default_factory=list)
    size: int = 0  # bytes of the records plus the commas between them

    def head(self) -> bytes:
        wire = {"label": self.label, "kind": self.kind, "matched": self.matched,
                "returned": len(self.records)}
        return encode(wire)[:-1] + b',"memories":['

    def length(self) -> int:
        return len(self.head()) + self.size + 2  # "]}"

    def render(self) -> bytes:
        return self.head() + b",".join(self.records) + b"]}"


def _head(at_commit: str, truncated: bool) -> bytes:
    wire = {"version": 0, "warning": WARNING, "atCommit": at_commit, "truncated": truncated}
    return encode(wire)[:-1] + b',"sections":['


def _json_length(at_commit: str, sections: list[_Section]) -> int:
    # the longest form ("truncated":false): the final text is never longer than what was fitted
    return (len(_head(at_commit, False)) + sum(s.length() for s in sections)
            + len(sections) - 1 + 3)  # commas, then "]}" and the LF


def _text_tokens(json_length: int) -> int:
    # fenced() adds a constant frame and drops the LF; the escape pass is a no-op on Go JSON
    frame = len(fenced(b"{}\n").encode("utf-8")) - 2
    return math.ceil((frame + json_length - 1) / 4)


def render(at_commit: str, sections: list[_Section], truncated: bool) -> bytes:
    """The prime document (compact JSON plus LF)."""
    return (_head(at_commit, truncated) + b",".join(s.render() for s in sections) + b"]}\n")


def check_budget(budget: object) -> int:
    """A budget is a whole number of tokens from 1 to 1,000,000.

    Raises:
        InvalidInput: ``invalid-budget``.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_BUDGET:
        raise InvalidInput(f"budget must be a whole number of tokens from 1 to {MAX_BUDGET}",
                           code="invalid-budget")
    return budget


def _feed(repo: pygit2.Repository, at_commit: str, section: _Section) -> Iterator[bytes]:
    """The section's memories in recall order, a page at a time (``matched`` from the first)."""
    from palimpsest.hn import recall  # noqa: PLC0415 - the recall machinery only when priming

    cursor = ""
    while True:
        value: dict[str, object] = {"version": 0, "atCommit": at_commit,
                                    "kind": [section.kind], "maxRecords": PAGE_RECORDS,
                                    "maxContentBytes": MAX_BOUND}
        if cursor:
            value["cursor"] = cursor
        page = recall.recall(repo, request_from_value(value))
        if not cursor:
            section.matched = page.matched
        yield from page.records
        cursor = page.next_cursor
        if not cursor:
            return


def prime(repo: pygit2.Repository, at_commit: str, budget: int) -> bytes:
    """The prime of the repository at ``at_commit`` (a full commit ID) within ``budget`` tokens.

    Raises:
        InvalidInput: ``invalid-budget``, ``budget-too-small`` (even the empty document does not
            fit), or a recall refusal (invalid policy, a commit that is not one).
        Unavailable: the index could not be made trustworthy.
    """
    check_budget(budget)
    sections = [_Section(label, kind) for label, kind in SECTIONS]
    need = _text_tokens(_json_length(at_commit, sections))
    if need > budget:
        raise InvalidInput(f"the prime needs at least {need} tokens for its empty document; "
                           "raise --budget", code="budget-too-small")
    feeds = {section.kind: _feed(repo, at_commit, section) for section in sections}
    open_sections = list(sections)
    while open_sections:  # in turns, so one long list cannot crowd the others out
        for section in list(open_sections):
            record = next(feeds[section.kind], None)
            if record is None:
                open_sections.remove(section)
                continue
            grown = len(record) + (1 if section.records else 0)
            section.records.append(record)
            section.size += grown
            if _text_tokens(_json_length(at_commit, sections)) > budget:
                section.records.pop()
                section.size -= grown
                open_sections.remove(section)  # a section stops at its first misfit
    truncated = any(len(s.records) < s.matched for s in sections)
    out = render(at_commit, sections, truncated)
    if tokens(fenced(out)) > budget:  # the arithmetic above is exact; never ship an overrun
        raise AssertionError("prime exceeded its budget")
    return out


__all__ = ["MAX_BUDGET", "SECTIONS", "check_budget", "prime", "tokens"]
