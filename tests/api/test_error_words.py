"""Refusals in the project's own words, against a real server: the field path as the client
wrote it, the branch that applies, what to send instead — never pydantic's internals; the
413 of an upload that cannot send the client to itself; ``Allow`` on every 405."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.server import Server, err, ok

# What pydantic says of itself: branch labels, Python types, its own phrasing.
INTERNALS = re.compile(r"constrained-|union\[|list\[|TextPart|FilePart|ExtensionPart|"
                       r"Input should|String should|Field required|Extra inputs|dictionary or "
                       r"instance|function-")


@pytest.fixture(scope="module")
def owner(server: Server, members: dict[str, Any]) -> Iterator[httpx.Client]:
    with server.client(members["owner"].token) as client:
        yield client


@pytest.fixture(scope="module")
def memory(owner: httpx.Client) -> str:
    return str(ok(owner.post("/v1/memories", json={"name": "words"}))["id"])


CASES = [
    # (body of a remember, param, words the message must hold)
    ({"content": "x" * 70_000}, "content",
     ["content is longer than 65536 characters", "split it", "POST /v1/files"]),
    ({"content": [{"type": "text", "text": 5}]}, "content[0].text",
     ["content[0].text must be a string"]),
    ({"content": [{"type": "text", "text": "x" * 70_000}]}, "content[0].text",
     ["content[0].text is longer than 65536 characters", "split it"]),
    ({"content": [{"type": "file"}]}, "content[0].file",
     ["content[0].file is required"]),
    ({"content": [{"type": "picture"}]}, "content[0].type",
     ["content[0].type must be 'text', 'file' or a value matching"]),
    ({"content": 5}, "content", ["content must be a string or a list"]),
    ({"content": "a", "colour": "red"}, "colour",
     ["colour is not a field of this request; remove it"]),
    ({"content": "a", "references": [{"rel": ""}]}, "references[0].",
     ["references[0]."]),
    ({"content": "a", "time": {"valid_from": 5}}, "time.valid_from",
     ["time.valid_from must be a string"]),
]


@pytest.mark.parametrize(("body", "param", "words"), CASES,
                         ids=[c[1] + "-" + str(i) for i, c in enumerate(CASES)])
def test_a_refused_body_names_the_field_and_the_fix(owner: httpx.Client, memory: str,
                                                    body: dict[str, Any], param: str,
                                                    words: list[str]) -> None:
    error = err(owner.post(f"/v1/memories/{memory}/records", json=body), 422, "memory_invalid")
    text = json.dumps(error)
    assert not INTERNALS.search(text), text
    assert error["param"].startswith(param), error
    for w in words:
        assert w in error["message"], error
    assert all(d["param"] and d["message"] for d in error["detail"]), error
    # the first problem is the one the message names
    assert error["detail"][0]["param"] == error["param"]


def test_query_and_bounds_in_the_same_words(owner: httpx.Client, memory: str) -> None:
    recall = err(owner.post(f"/v1/memories/{memory}/recall", json={"query": "x", "limit": 10**6}),
                 422, "memory_invalid")
    assert recall["message"] == "limit must be at most 100", recall
    listing = err(owner.get(f"/v1/memories/{memory}/records", params={"limit": "many"}),
                  422, "memory_invalid")
    assert listing["message"] == "limit must be an integer", listing
    episodes = err(owner.post(f"/v1/memories/{memory}/observe", json={"episodes": []}),
                   422, "memory_invalid")
    assert episodes["message"] == "episodes must have at least 1 item", episodes
    several = err(owner.post("/v1/memories", json={"name": "", "colour": 1}), 422,
                  "memory_invalid")
    assert several["message"] == ("name must not be empty (and 1 more problem, listed in "
                                  "detail)"), several
    assert [d["param"] for d in several["detail"]] == ["name", "colour"]


def test_an_unknown_field_is_named_inertly(owner: httpx.Client) -> None:
    error = err(owner.post("/v1/memories", json={"name": "n", "bad\x1b[31m" + "k" * 100: 1}),
                422, "memory_invalid")
    assert "\x1b" not in json.dumps(error)
    assert len(error["param"]) <= 64


def test_an_oversized_upload_says_what_to_do(server: Server, members: dict[str, Any]) -> None:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Authorization: Bearer {members['owner'].token}\r\n".encode()
            + b"Content-Type: application/pdf\r\nContent-Length: 31457280\r\n\r\n%PDF")
        answer = b""
        while b"}}" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.decode("latin-1").partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 413"), head
    message = json.loads(body)["error"]["message"]
    assert "POST /v1/files" not in message
    assert "the file is larger than 26214400 bytes (25 MiB)" in message
    assert "split it into smaller files" in message


def _fill(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", path)


def test_every_405_says_what_the_route_allows(server: Server, owner: httpx.Client) -> None:
    doc = ok(owner.get("/openapi.json"))
    checked = 0
    for path, item in doc["paths"].items():
        documented = {m.upper() for m in item if m in {"get", "put", "post", "delete", "patch"}}
        for method in sorted({"GET", "PUT", "POST", "DELETE", "PATCH"} - documented):
            response = owner.request(method, _fill(path))
            if response.status_code != 405:
                # another route with a literal segment takes this path (e.g. …/x1 vs …/search)
                continue
            allowed = {m.strip() for m in response.headers["allow"].split(",")}
            assert documented <= allowed, (method, path, allowed)
            assert method not in allowed
            checked += 1
    assert checked > 100  # every route of /v1 and /api/memory was tried
    put = owner.put("/v1/memories")
    assert put.status_code == 405
    assert put.headers["allow"] == "GET, POST"
    assert "it takes GET, POST" in put.json()["error"]["message"]
