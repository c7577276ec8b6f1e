# ruff: noqa: E501 - seed tables read best one case per line
"""Fuzz target ``selection``: the replication selection file (hn-memory-v0.md §20.1).

Input: the bytes of ``<git-dir>/hn/replication/selections/<remote>.json`` as a user, a tool or an
old version left them, parsed by :func:`palimpsest.hn.replication.selection.decode_selection`
for the remote ``origin`` and, again, for ``up.stream-1``.

Expected refusals: ``InvalidInput`` with code ``invalid-json``, ``bad-selection``,
``invalid-selector``, ``invalid-selection``, ``invalid-budget`` or ``invalid-remote``. Anything
else is a finding.

Oracle for an accepted selection: it names the remote it was read for; it re-encodes
(``Selection.encode``, Go ``MarshalIndent``) to bytes that decode to the same selection and are
a fixed point of encoding; selectors are full IDs, memories sorted and unique, ``all`` and exact
selectors exclusive, every budget a positive integer that fits Go's ``int64``; the file name
of the remote decodes back to it.
"""

from __future__ import annotations

import base64

from tests.fuzz.harness import Refused, Target, check, files, instrumented, refusals, texts

with instrumented():
    from palimpsest.errors import InvalidInput
    from palimpsest.hn.replication.selection import (
        Selection,
        build_selection,
        decode_selection,
        selection_file_name,
    )

REFUSALS = refusals(
    {InvalidInput: {"invalid-json", "bad-selection", "invalid-selector", "invalid-selection",
                    "invalid-budget", "invalid-remote"}}
)
REMOTES = ("origin", "up.stream-1")


def _check(selection: Selection, remote: str) -> None:
    check(selection.remote == remote, "a selection for another remote was accepted")
    data = selection.encode()
    again = decode_selection(data, remote=remote)
    check(again == selection, "the written selection reads back differently")
    check(again.encode() == data, "encoding is not a fixed point")
    check(list(selection.memories) == sorted(set(selection.memories)), "memories not sorted/unique")
    exact = bool(selection.actors or selection.proposals or selection.memories)
    check(selection.all != exact, "all and exact selectors are not exclusive")
    for name, value in selection.budgets.to_json().items():
        check(type(value) is int and 0 < value <= 2**63 - 1, f"budget {name} out of range")
    encoded = selection_file_name(remote).removesuffix(".json")
    check(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)) == remote.encode(),
          "the file name does not name the remote")  # fmt: skip


def one_input(data: bytes) -> None:
    for remote in REMOTES:
        selection = REFUSALS.attempt(decode_selection, data, remote=remote)
        if not isinstance(selection, Refused):
            _check(selection, remote)


def seeds() -> list[tuple[str, bytes]]:
    stream = "sha256:" + "a" * 64
    built = [
        build_selection("origin", memories=[stream, "sha256:" + "b" * 64], actors=["c" * 64]),
        build_selection("origin", all_streams=True),
        build_selection("up.stream-1", memories=[stream]),
    ]
    legacy = b'{"version":1,"remote":"origin","actors":["%s"],"proposals":null,"all":false,' \
             b'"budgets":{"maxEvents":3}}' % (b"c" * 64)  # fmt: skip
    return [
        *files("fuzz/selection"),
        *texts("selection/built", [s.encode() for s in built]),
        *texts("selection/literal", [
            legacy, legacy.replace(b"3}", b"0}"), legacy.replace(b"3}", b"true}"),
            legacy.replace(b"3}", b"99999999999999999999}"), legacy.replace(b"3}", b"9223372036854775808}"),
            legacy.replace(b'"all":false', b'"all":true'), legacy.replace(b"origin", b"other"),
            legacy.replace(b'"proposals":null', b'"proposals":["sha256:%s"]' % (b"d" * 64)),
            legacy.replace(b'"actors":["', b'"memories":["sha256:%s","sha256:%s"],"actors":["' % (b"b" * 64, b"a" * 64)),
            legacy.replace(b'"version":1', b'"version":1.0'), legacy + b"\n\n",
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="selection",
    one_input=one_input,
    refusals=REFUSALS,
    seeds=seeds,
    classes=("A1", "A2", "C15"),
    runs=20_000,
    summary="replication selection file: strict JSON, selectors, budgets",
    dictionary=(b'"maxEvents":', b'"maxObjects":', b'"maxObjectBytes":', b'"maxAttachmentBytes":',
                b'"maxTotalBytes":', b'"memories":["sha256:', b'"proposals":["', b'"all":true',
                b"9223372036854775807", b"9223372036854775808", b"18446744073709551616"),
)

if __name__ == "__main__":
    TARGET.fuzz()
