# ruff: noqa: E501 - seed tables read best one case per line
"""Fuzz target ``refnames``: remote advertisements, memory ref names and remote names.

Input: bytes as ``git ls-remote --refs`` prints them for a remote (``<oid> TAB <ref>`` lines):
a hostile remote chooses every ref name. They go to
:func:`palimpsest.hn.replication.transport.parse_advertisement`; every line's ref name also goes to
:func:`palimpsest.hn.store.parse_memory_ref` and its first path component to both remote-name
validators (``store.valid_remote_name`` and ``replication_selection.validate_remote``).

Expected refusals: ``Unavailable`` with code ``bad-advertisement`` (a line that is not
``<oid> TAB <ref>``); ``InvalidInput`` with ``malformed-memory-ref`` (a ref inside a memory
namespace that breaks the §8 grammar) or ``invalid-remote``. Anything else is a finding.

Oracle: the two parsers of the same grammar agree — a ref the advertisement accepts as a memory
stream is one ``parse_memory_ref`` parses to the same actor and stream, and the other way round
for every ``refs/hn/memory/`` ref; parsed refs rebuild to exactly their names
(``local_ref_name``, ``remote_ref_name``); the two remote-name validators agree; accepted
names are ASCII and hold no ``..``, control character or ``.lock`` component.
"""

from __future__ import annotations

from tests.fuzz.harness import Refused, Target, check, files, instrumented, refusals, texts

with instrumented():
    from palimpsest.errors import InvalidInput, Unavailable
    from palimpsest.hn.replication.selection import validate_remote
    from palimpsest.hn.replication.transport import MEMORY_PREFIX, parse_advertisement
    from palimpsest.hn.store import (
        local_ref_name,
        parse_memory_ref,
        remote_ref_name,
        valid_remote_name,
    )

ADVERTISEMENT_REFUSALS = refusals({Unavailable: {"bad-advertisement"}})
REF_REFUSALS = refusals({InvalidInput: {"malformed-memory-ref"}})
REMOTE_REFUSALS = refusals({InvalidInput: {"invalid-remote"}})


def _check_ref(name: str) -> None:
    parsed = REF_REFUSALS.attempt(parse_memory_ref, name, "0" * 40)
    if isinstance(parsed, Refused) or parsed is None:
        return
    check(name.isascii() and ".." not in name and not name.endswith(".lock"), "unsafe ref name")
    if parsed.remote is None:
        check(local_ref_name(parsed.actor, parsed.stream) == name, "local ref does not rebuild")
    else:
        check(remote_ref_name(parsed.remote, parsed.actor, parsed.stream) == name,
              "accepted ref does not rebuild")  # fmt: skip
        check(valid_remote_name(parsed.remote), "a ref with an invalid remote was accepted")


def _check_remote(name: str) -> None:
    strict = REMOTE_REFUSALS.attempt(validate_remote, name)
    check(valid_remote_name(name) != isinstance(strict, Refused), "remote validators disagree")
    if not isinstance(strict, Refused):
        check(name.isascii() and ".." not in name and not name.endswith((".", ".lock")),
              "unsafe remote name accepted")  # fmt: skip


def one_input(data: bytes) -> None:
    advertisement = ADVERTISEMENT_REFUSALS.attempt(parse_advertisement, data)
    lines = [raw.decode("utf-8", "surrogateescape") for raw in data.split(b"\n") if raw]
    names = [line.partition("\t")[2] for line in lines]
    for name in names:
        _check_ref(name)
        _check_remote(name.removeprefix("refs/hn/remotes/").partition("/")[0])
    if isinstance(advertisement, Refused):
        return
    accepted = {item.ref for item in advertisement.refs}
    for item in advertisement.refs:
        parsed = parse_memory_ref(item.ref)
        check(parsed is not None and parsed.remote is None, "advertised ref is not a memory ref")
        assert parsed is not None
        check((parsed.actor, parsed.stream) == (item.actor, item.stream), "parsers disagree")
        check(item.oid.isascii() and len(item.oid) in (40, 64), "a malformed object ID was kept")
    for raw in data.split(b"\n"):
        try:
            name = raw.decode("utf-8").partition("\t")[2]
        except UnicodeDecodeError:  # such a line is listed whole as malformed, never fetched
            check(raw.decode("utf-8", "replace") in advertisement.malformed, "line dropped")
            continue
        if name.startswith(MEMORY_PREFIX) and name not in accepted:
            refused = REF_REFUSALS.attempt(parse_memory_ref, name)
            dropped = isinstance(refused, Refused) and name in advertisement.malformed
            check(dropped, "a memory ref was dropped without being listed as malformed")
    refs = [item.ref for item in advertisement.refs]
    check(refs == sorted(refs, key=lambda r: (r.split("/")[4], r.split("/")[3])),
          "advertised refs are not in (stream, actor) order")  # fmt: skip


A, S = "a" * 64, "b" * 64
OID = "c" * 40


def seeds() -> list[tuple[str, bytes]]:
    good = f"{OID}\trefs/hn/memory/{A}/{S}\n"
    return [
        *files("fuzz/refnames"),
        *texts("refnames/literal", [
            good, good + f"{OID}\trefs/hn/memory/{S}/{A}\n", good.upper(),
            f"{OID}\trefs/hn/memory/{A}/{S}/extra\n", f"{OID}\trefs/hn/memory/{A}/{S}.lock\n",
            f"{OID}\trefs/heads/main\n{OID}\trefs/hn/actors/{A}\n", f"{OID} refs/hn/memory/{A}/{S}\n",
            f"{'d' * 64}\trefs/hn/memory/{A}/{S}\n", f"{OID}\trefs/hn/remotes/up.stream/memory/{A}/{S}\n",
            f"{OID}\trefs/hn/remotes/../memory/{A}/{S}\n", f"{OID}\trefs/hn/remotes/a.lock/memory/{A}/{S}\n",
            f"{OID}\trefs/hn/remotes/r/actors/{A}\n", f"{OID}\trefs/hn/memory/{A}/\udcff{S[1:]}\n",
            f"{OID}\trefs/hn/memory/{A}/{S}\x1b[2J\n", f"{OID}\t\n", "\n\n\t\n", "x" * 300 + "\n",
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="refnames",
    one_input=one_input,
    refusals=ADVERTISEMENT_REFUSALS,
    seeds=seeds,
    classes=("C14", "E20", "B7"),
    runs=10_000,
    summary="remote advertisement (ls-remote), memory ref grammar, remote names",
    dictionary=(b"refs/hn/memory/", b"refs/hn/remotes/", b"/memory/", b".lock", b"..", b"@{",
                A.encode(), S.encode(), OID.encode(), b"\t"),
)

if __name__ == "__main__":
    TARGET.fuzz()
