"""Recall request normalisation, query digests and cursors against the interop fixture (§16)."""

from __future__ import annotations

import json

import pytest

from palimpsest.canonical import encode
from palimpsest.errors import InvalidInput
from palimpsest.hn.recall.request import (
    GrepSpec,
    RecallRequest,
    decode_cursor,
    encode_cursor,
    normalize_request,
    query_digest,
    request_from_json,
    request_wire,
)
from tests.conftest import INTEROP

HEAD = "cdb398ec5d97d79e14ff239cdfb235e0f0dca7ca"
SOURCE = "sha256:9bf830e40d6eea939ffd7396044b82e389d99cc1caf12346d8b05d35e21ce667"
POLICY = "sha256:4b2c12b933e1fc51cf4b95619f1dc181b50e8a4ef077a43d794b04737ad4dd67"
A7 = "sha256:1240835cabb30d5e3b2783d6fdaac18d7e1f5fc420d6f61965464870e76b5ee4"
A5 = "sha256:2fcfea77f70c05467553733c5fa5797340c04feb88cc0900139e433bb0379c97"

# (file, normalised request from CLI-like flags) — interop README §6.
CASES = [
    ("recall-default.json", {}),
    ("recall-query-stream-isolation.json", {"query": "Stream isolation"}),
    (
        "recall-topic-architecture-untrusted.json",
        {"topic": ["Architecture "], "include_untrusted": True},
    ),
    ("recall-include-untrusted-all.json", {"include_untrusted": True, "lifecycle": ["all"]}),
    (
        "recall-all-page1.json",
        {"include_untrusted": True, "lifecycle": ["all"], "max_records": 2},
    ),
]


def _expected(name: str) -> dict[str, object]:
    value = json.loads((INTEROP / name).read_bytes())
    assert isinstance(value, dict)
    return value


@pytest.mark.parametrize(("name", "flags"), CASES, ids=[c[0] for c in CASES])
def test_fixture_query_digests(name: str, flags: dict[str, object]) -> None:
    request = normalize_request(at_commit=HEAD, **flags)  # type: ignore[arg-type]
    assert query_digest(request, SOURCE, POLICY) == _expected(name)["queryDigest"]


def test_default_request_wire_bytes() -> None:
    request = normalize_request(at_commit=HEAD)
    assert encode(request_wire(request)) == (
        b'{"version":0,"atCommit":"' + HEAD.encode() + b'","lifecycle":["active"],'
        b'"trust":["qualified"],"maxRecords":20,"maxContentBytes":65536}'
    )


def test_fixture_cursors_round_trip() -> None:
    page1, page2 = _expected("recall-all-page1.json"), _expected("recall-all-page2.json")
    digest = str(page1["queryDigest"])
    assert page2["queryDigest"] == digest
    assert encode_cursor(digest, A7) == page1["nextCursor"]
    assert encode_cursor(digest, A5) == page2["nextCursor"]
    assert decode_cursor(str(page1["nextCursor"]), digest) == A7


def test_cursor_is_cleared_before_digesting() -> None:
    plain = normalize_request(at_commit=HEAD, max_records=2)
    with_cursor = normalize_request(at_commit=HEAD, max_records=2, cursor="x.y")
    assert query_digest(plain, SOURCE, POLICY) == query_digest(with_cursor, SOURCE, POLICY)


@pytest.mark.parametrize(
    "change",
    [
        {"max_records": 3},
        {"max_content_bytes": 100},
        {"topic": ["memory"]},
        {"query": "stream"},
        {"at_commit": "b" * 40},
    ],
)
def test_cursor_breaks_when_the_query_changes(change: dict[str, object]) -> None:
    base = dict(at_commit=HEAD, max_records=2)
    digest = query_digest(normalize_request(**base), SOURCE, POLICY)  # type: ignore[arg-type]
    cursor = encode_cursor(digest, A7)
    other = query_digest(normalize_request(**{**base, **change}), SOURCE, POLICY)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="does not match the normalized query"):
        decode_cursor(cursor, other)


def test_cursor_breaks_when_sources_or_policy_change() -> None:
    request = normalize_request(at_commit=HEAD)
    cursor = encode_cursor(query_digest(request, SOURCE, POLICY), A7)
    for source, policy in ((SOURCE[:-1] + "0", POLICY), (SOURCE, POLICY[:-1] + "0")):
        with pytest.raises(InvalidInput, match="does not match"):
            decode_cursor(cursor, query_digest(request, source, policy))


def test_tampered_cursor_fails_the_checksum() -> None:
    digest = query_digest(normalize_request(at_commit=HEAD), SOURCE, POLICY)
    cursor = encode_cursor(digest, A7)
    payload, _, checksum = cursor.partition(".")
    forged = encode_cursor(digest, A5).partition(".")[0] + "." + checksum
    with pytest.raises(InvalidInput, match="invalid recall cursor checksum"):
        decode_cursor(forged, digest)
    for broken in ("", "nodot", payload + ".", "!!!." + checksum, payload + "=." + checksum):
        with pytest.raises(InvalidInput, match="recall cursor"):
            decode_cursor(broken, digest)


def test_grep_and_recall_cursors_are_isolated() -> None:
    request = normalize_request(at_commit=HEAD)
    recall_digest = query_digest(request, SOURCE, POLICY)
    grep_digest = query_digest(request, SOURCE, POLICY, GrepSpec("stream", False))
    assert grep_digest != recall_digest
    assert grep_digest != query_digest(request, SOURCE, POLICY, GrepSpec("stream", True))
    assert grep_digest != query_digest(request, SOURCE, POLICY, GrepSpec("stream.", False))
    recall_cursor = encode_cursor(recall_digest, A7)
    grep_cursor = encode_cursor(grep_digest, A7, grep=True)
    with pytest.raises(InvalidInput, match="invalid grep cursor checksum"):
        decode_cursor(recall_cursor, grep_digest, grep=True)
    with pytest.raises(InvalidInput, match="invalid recall cursor checksum"):
        decode_cursor(grep_cursor, recall_digest)
    other = query_digest(request, SOURCE, POLICY, GrepSpec("stream", True))
    with pytest.raises(InvalidInput, match="grep cursor does not match"):
        decode_cursor(grep_cursor, other, grep=True)
    assert decode_cursor(grep_cursor, grep_digest, grep=True) == A7


def test_normalisation() -> None:
    request = normalize_request(
        at_commit=HEAD,
        topic=[" Memory", "architecture", "MEMORY"],
        kind=["decision", "attempt", "decision"],
        trust=["kind-untrusted"],
    )
    assert request.topic == ("architecture", "memory")
    assert request.kind == ("attempt", "decision")
    assert request.trust == ("kind-untrusted",)  # explicit trust works without the flag
    assert request.lifecycle == ("active",)
    assert normalize_request(at_commit=HEAD, include_untrusted=True).trust == ()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"lifecycle": ["all", "active"]}, "invalid lifecycle filter"),
        ({"lifecycle": ["dormant"]}, "invalid lifecycle filter"),
        ({"trust": ["trusted"]}, "invalid trust filter"),
        ({"kind": ["note"]}, "invalid kind filter"),
        ({"actor": ["ABC"]}, "invalid actor filter"),
        ({"query": "... !!!"}, "no lexical terms"),
        ({"max_records": 0}, "maxRecords"),
        ({"max_content_bytes": -1}, "maxContentBytes"),
        ({"subject": "issue:1"}, "subject"),
        ({"path": "../etc"}, "path"),
        ({"topic": [" "]}, "invalid topic filter"),
        ({"at_commit": "HEAD"}, "atCommit"),
    ],
)
def test_invalid_requests(flags: dict[str, object], message: str) -> None:
    args = {"at_commit": HEAD, **flags}
    with pytest.raises(InvalidInput, match=message):
        normalize_request(**args)  # type: ignore[arg-type]


def test_strict_json_request() -> None:
    doc = {"version": 0, "atCommit": HEAD, "lifecycle": ["all"], "includeUntrusted": True}
    request = request_from_json(json.dumps(doc).encode() + b"\n")
    assert request == RecallRequest(at_commit=HEAD, lifecycle=(), trust=(), include_untrusted=True)


@pytest.mark.parametrize(
    "text",
    [
        b'{"atCommit":"' + HEAD.encode() + b'"}',  # no version
        b'{"version":1,"atCommit":"' + HEAD.encode() + b'"}',
        b'{"version":"0","atCommit":"' + HEAD.encode() + b'"}',
        b'{"version":0}',
        b'{"version":0,"atCommit":"' + HEAD.encode() + b'","maxRecords":0}',
        b'{"version":0,"atCommit":"' + HEAD.encode() + b'","maxRecords":null}',
        b'{"version":0,"atCommit":"' + HEAD.encode() + b'","maxRecords":1.5}',
        b'{"version":0,"atCommit":"' + HEAD.encode() + b'","extra":1}',
        b'{"version":0,"version":0,"atCommit":"' + HEAD.encode() + b'"}',
        b'{"version":0,"atCommit":"' + HEAD.encode() + b'"} {}',
        b"\xff",
    ],
)
def test_strict_json_request_refusals(text: bytes) -> None:
    with pytest.raises(InvalidInput):
        request_from_json(text)


@pytest.mark.parametrize(
    "flags",
    [{"topic": ["\udcff"]}, {"query": "ab\udcff"}, {"path": "src/\ud800.py"},
     {"subject": "issue:\ud800"}, {"cursor": "\udc80"}],
    ids=["topic", "query", "path", "subject", "cursor"],
)  # fmt: skip
def test_19_lone_surrogates_refused_naming_the_field(flags: dict[str, object]) -> None:
    # argv bytes that are not UTF-8 arrive as lone surrogates, and so does a JSON "\ud800"
    # through MCP; they were a UnicodeEncodeError (topic) or "invalid JSON" (query, path).
    with pytest.raises(InvalidInput) as caught:
        normalize_request(at_commit=HEAD, **flags)  # type: ignore[arg-type]
    assert caught.value.code == "invalid-recall-request"
    assert next(iter(flags)) in caught.value.message
