"""The HTTP face itself, over real sockets: authentication on every route, Host/Origin checks,
size caps (413) and strict JSON, the error envelope, idempotency, and the routes beyond the
conformance checks (observe and jobs, queries, consolidations, harness settings, grants)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.server import Server, err, ok

Members = dict[str, Any]


@pytest.fixture(scope="module")
def owner(server: Server, members: Members) -> Iterator[httpx.Client]:
    with server.client(members["owner"].token) as client:
        yield client


def _operations(doc: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if operation.get("security") == []:
                continue  # a public operation (tests/api/test_telemetry.py)
            concrete = path.replace("{index}", "0")
            for name in ("memory_id", "record_id", "grant_id", "job_id", "run_id", "harness_id"):
                concrete = concrete.replace("{" + name + "}", "some-id")
            out.append((method.upper(), concrete.replace("{name}", "q")))
    return out


def test_every_route_refuses_a_missing_or_bad_credential(server: Server,
                                                         owner: httpx.Client) -> None:
    doc = ok(owner.get("/openapi.json"))
    operations = _operations(doc)
    assert len(operations) >= 35
    with server.client(None) as anonymous, server.client("pal_not-a-real-credential") as wrong:
        for method, path in [*operations, ("GET", "/nowhere")]:
            for client in (anonymous, wrong):
                response = client.request(method, path, json={} if method != "GET" else None)
                if path.startswith("/api/memory/"):  # Memory Git's own error face
                    assert response.status_code == 401, (path, response.text)
                    assert response.json()["error"] == "invalid-credential"
                    assert set(response.json()) == {"error", "message"}
                else:
                    error = err(response, 401, "invalid_credential")
                    assert error["type"] == "authentication_error"
                # a bearer challenge, and nothing that starts an OAuth flow (no resource_metadata)
                assert response.headers["www-authenticate"] == (
                    'Bearer realm="palimpsest"' if client is anonymous
                    else 'Bearer realm="palimpsest", error="invalid_token"')
    with server.client(None, Authorization="Basic b3duZXI6cHc=") as basic:
        err(basic.get("/v1/uhp"), 401, "invalid_credential")


def test_revoked_credential_is_refused(tmp_path_factory: pytest.TempPathFactory) -> None:
    from palimpsest.service.memories import MemoryService
    from tests.api.server import provision, start

    data_dir = tmp_path_factory.mktemp("revoke") / "data"
    made = provision(data_dir, [("dora", "agent")])
    with MemoryService(data_dir) as svc:
        cred = next(iter(svc.list_credentials(made["dora"].id)))
        svc.revoke_credential(cred.id)
    server = start(data_dir)
    try:
        with server.client(made["dora"].token) as dora:
            err(dora.get("/v1/memories"), 401, "invalid_credential")
        with server.client(made["owner"].token) as owner:
            ok(owner.get("/v1/memories"))
    finally:
        server.stop()


def test_foreign_host_and_origin_are_refused(server: Server, members: Members) -> None:
    token = members["owner"].token
    with server.client(token, Host="evil.example") as rebinding:
        err(rebinding.get("/v1/uhp"), 421, "x.pal.host_not_allowed")
    with server.client(token, Origin="https://evil.example") as cross:
        err(cross.get("/v1/uhp"), 403, "x.pal.origin_not_allowed")
    with server.client(token, Origin="http://localhost:3000") as local:
        ok(local.get("/v1/uhp"))


def test_declared_oversized_body_is_refused_before_reading(server: Server,
                                                           members: Members) -> None:
    """A Content-Length over the cap gets 413 without the server waiting for the body."""
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/memories HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Authorization: Bearer {members['owner'].token}\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 104857600\r\n\r\n{"
        )
        answer = b""
        while b"request_too_large" not in answer:  # the body may come in a second segment
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    text = answer.decode("latin-1")
    assert text.startswith("HTTP/1.1 413"), text
    assert "x.pal.request_too_large" in text


def test_streamed_oversized_body_is_refused(owner: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"name": "big", "description": "'
        for _ in range(40):
            yield b"a" * 65536
        yield b'"}'

    response = owner.post("/v1/memories", content=chunks(),
                          headers={"content-type": "application/json"})
    err(response, 413, "x.pal.request_too_large")
    big = owner.post("/v1/memories", json={"name": "big", "description": "a" * (2 << 20)})
    err(big, 413, "x.pal.request_too_large")


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"name": "a", "name": "b"}', "duplicate key"),
        (b'{"name": NaN}', "NaN"),
        (b'{"name": "\\ud800"}', "lone surrogate"),
        (b'\xef\xbb\xbf{"name": "a"}', "BOM"),
        (b'{"name": "a"} {}', "trailing data"),
        (b'{"name": "a"', "truncated"),
        (b'\xff\xfe', "invalid UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "deep nesting"),
        (b'{"name": 1e400}', "infinite number"),
    ],
)
def test_malformed_json_is_refused(owner: httpx.Client, body: bytes, why: str) -> None:
    before = ok(owner.get("/v1/memories", params={"limit": 200}))
    response = owner.post("/v1/memories", content=body,
                          headers={"content-type": "application/json"})
    error = err(response, 422, "memory_invalid")
    assert error["type"] == "invalid_request_error", why
    assert ok(owner.get("/v1/memories", params={"limit": 200})) == before


def test_non_json_body_is_refused(owner: httpx.Client) -> None:
    response = owner.post("/v1/memories", content=b"name=x",
                          headers={"content-type": "application/x-www-form-urlencoded"})
    err(response, 415, "x.pal.unsupported_media_type")


def test_unknown_route_and_method_use_the_envelope(owner: httpx.Client) -> None:
    err(owner.get("/v2/anything"), 404, "x.pal.route_not_found")
    err(owner.patch("/v1/memories", json={}), 405, "x.pal.method_not_allowed")


def test_discovery_and_openapi(owner: httpx.Client) -> None:
    discovery = ok(owner.get("/v1/uhp"))
    assert discovery["capabilities"]["memories"] is True
    assert discovery["version"] == "2026-10-04"
    doc = ok(owner.get("/openapi.json"))
    assert doc["security"] == [{"bearer": []}]
    paths = doc["paths"]
    for path, method in [
        ("/v1/uhp", "get"), ("/v1/files", "post"), ("/v1/memories", "post"),
        ("/v1/memories", "get"), ("/v1/memories/{memory_id}", "put"),
        ("/v1/memories/{memory_id}", "delete"), ("/v1/memories/{memory_id}/grants", "post"),
        ("/v1/memories/{memory_id}/grants/{grant_id}", "delete"),
        ("/v1/memories/{memory_id}/observe", "post"),
        ("/v1/memories/{memory_id}/jobs/{job_id}", "get"),
        ("/v1/memories/{memory_id}/records", "post"),
        ("/v1/memories/{memory_id}/records/{record_id}", "patch"),
        ("/v1/memories/{memory_id}/records/{record_id}/history", "get"),
        ("/v1/memories/{memory_id}/records/{record_id}/content/{index}", "get"),
        ("/v1/memories/{memory_id}/erase", "post"), ("/v1/memories/{memory_id}/recall", "post"),
        ("/v1/memories/{memory_id}/graph", "post"), ("/v1/memories/{memory_id}/prime", "get"),
        ("/v1/memories/{memory_id}/queries/{name}", "put"),
        ("/v1/memories/{memory_id}/query", "post"), ("/v1/memories/types", "get"),
        ("/v1/memories/{memory_id}/records/{record_id}/operations/{name}", "post"),
        ("/v1/memories/{memory_id}/snapshots", "post"),
        ("/v1/memories/{memory_id}/consolidations/{run_id}/revert", "post"),
        ("/v1/memories/providers", "get"), ("/v1/harnesses/{harness_id}/memories", "put"),
    ]:
        assert method in paths[path], (path, method)
        responses = paths[path][method]["responses"]
        assert responses["422"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Error"}
    writes = [(p, m) for p, item in paths.items() if p.startswith("/v1/")
              for m in item if m in ("post", "put", "patch", "delete")]
    for path, method in writes:
        names = {prm["name"] for prm in paths[path][method].get("parameters", [])}
        if path.endswith(("/recall", "/graph", "/query")) or (
                path.endswith("/queries/{name}") and method == "post") or "/operations/" in path:
            continue  # reads that use POST for their body
        assert "Idempotency-Key" in names, (path, method)


def test_idempotency_key_replays_and_refuses_a_changed_body(owner: httpx.Client) -> None:
    mid = ok(owner.post("/v1/memories", json={"name": "Idem"}))["id"]
    headers = {"Idempotency-Key": "remember-once-1"}
    first = ok(owner.post(f"/v1/memories/{mid}/records", json={"content": "once"},
                          headers=headers))
    again = ok(owner.post(f"/v1/memories/{mid}/records", json={"content": "once"},
                          headers=headers))
    assert again == first
    records = ok(owner.get(f"/v1/memories/{mid}/records"))["data"]
    assert [r["id"] for r in records] == [first["id"]]
    changed = owner.post(f"/v1/memories/{mid}/records", json={"content": "twice"},
                         headers=headers)
    err(changed, 409, "x.pal.idempotency_mismatch")
    assert len(ok(owner.get(f"/v1/memories/{mid}/records"))["data"]) == 1
    bad = owner.post(f"/v1/memories/{mid}/records", json={"content": "x"},
                     headers={"Idempotency-Key": "has space"})
    err(bad, 422, "memory_invalid")


def test_observe_and_job(owner: httpx.Client) -> None:
    mid = ok(owner.post("/v1/memories", json={"name": "Observed"}))["id"]
    response = owner.post(f"/v1/memories/{mid}/observe", json={"episodes": [
        {"content": "user: I prefer email"}, {"content": "assistant: noted"}]})
    assert response.status_code in (200, 202), response.text
    body = response.json()
    assert body["object"] == "list"
    if response.status_code == 200:
        assert [r["type"] for r in body["data"]] == ["episode", "episode"]
    job = body.get("job")
    if job is not None:
        polled = ok(owner.get(f"/v1/memories/{mid}/jobs/{job['id']}"))
        assert polled["object"] == "memory.job" and polled["status"] in (
            "pending", "completed")
    err(owner.post(f"/v1/memories/{mid}/observe", json={"episodes": []}), 422, "memory_invalid")
    # an episode carries the moment it was said (as the Hermes provider sends it) and a title
    said = owner.post(f"/v1/memories/{mid}/observe", json={"episodes": [
        {"content": "my flight is on Friday", "title": "travel",
         "attributes": {"session_id": "s-1"}, "time": {"valid_from": "2023-05-05T19:00:00Z"}}]})
    assert said.status_code in (200, 202), said.text
    listed = ok(owner.get(f"/v1/memories/{mid}/records", params={"type": "episode"}))["data"]
    timed = [r for r in listed if r["title"] == "travel"]
    assert [r["time"]["valid_from"] for r in timed] == ["2023-05-05T19:00:00.000000Z"]
    err(owner.post(f"/v1/memories/{mid}/observe", json={"episodes": [
        {"content": "x", "time": {"valid_from": "not a time"}}]}), 422, "memory_invalid")
    err(owner.post(f"/v1/memories/{mid}/observe", json={"episodes": [
        {"content": "x", "when": "2023-05-05T19:00:00Z"}]}), 422, "memory_invalid")


def test_named_query_round_trip(owner: httpx.Client) -> None:
    mid = ok(owner.post("/v1/memories", json={"name": "Queries"}))["id"]
    ok(owner.post(f"/v1/memories/{mid}/records", json={"content": "walrus tusks are teeth"}))
    defined = ok(owner.put(f"/v1/memories/{mid}/queries/by_word", json={
        "description": "records with a word", "params": {"type": "object"},
        "requires": "read", "language": "recall", "body": {"text": "$word"}}))
    assert defined["name"] == "by_word"
    listed = ok(owner.get(f"/v1/memories/{mid}/queries"))["data"]
    assert [q["name"] for q in listed] == ["by_word"]
    answer = ok(owner.post(f"/v1/memories/{mid}/queries/by_word",
                           json={"params": {"word": "walrus"}}))
    assert len(answer["results"]) == 1
    err(owner.put(f"/v1/memories/{mid}/queries/bad-name!", json={
        "language": "recall", "body": {"text": "x"}}), 422, "memory_invalid")


def test_consolidation_run_and_revert(owner: httpx.Client) -> None:
    mid = ok(owner.post("/v1/memories", json={"name": "Consolidate"}))["id"]
    for _ in range(2):
        ok(owner.post(f"/v1/memories/{mid}/records", json={"content": "duplicate fact"}))
    run = ok(owner.post(f"/v1/memories/{mid}/consolidations", json={}))
    assert run["object"] == "memory.consolidation" and run["memory_id"] == mid
    assert [r["id"] for r in ok(owner.get(f"/v1/memories/{mid}/consolidations"))["data"]] == [
        run["id"]]
    ok(owner.get(f"/v1/memories/{mid}/consolidations/{run['id']}"))
    ok(owner.get(f"/v1/memories/{mid}/consolidations/{run['id']}/changes"))
    active = ok(owner.get(f"/v1/memories/{mid}/records"))["data"]
    assert len(active) == 1
    ok(owner.post(f"/v1/memories/{mid}/consolidations/{run['id']}/revert"))
    assert len(ok(owner.get(f"/v1/memories/{mid}/records"))["data"]) == 2


def test_types_operations_and_harness(server: Server, members: Members,
                                      owner: httpx.Client) -> None:
    mid = ok(owner.post("/v1/memories", json={"name": "Harnessed"}))["id"]
    record = ok(owner.post(f"/v1/memories/{mid}/records", json={"content": "x"}))
    err(owner.post(f"/v1/memories/{mid}/records/{record['id']}/operations/close", json={}),
        422, "memory_unsupported")
    bob = members["bob"]
    ok(owner.post(f"/v1/memories/{mid}/grants", json={"principal": f"member:{bob.id}",
                                                       "privileges": ["read", "write"]}))
    with server.client(bob.token) as agent:
        settings = ok(agent.put(f"/v1/harnesses/{bob.id}/memories",
                                json={"default_memory_id": mid, "observe": True}))
        assert settings["object"] == "harness.memories"
        assert settings["default_memory_id"] == mid
        got = ok(agent.get(f"/v1/harnesses/{bob.id}/memories"))
        assert mid in [m["id"] for m in got["data"]]
    read_only = ok(owner.post("/v1/memories", json={"name": "ReadOnly"}))["id"]
    ok(owner.post(f"/v1/memories/{read_only}/grants", json={"principal": f"member:{bob.id}",
                                                             "privileges": ["read"]}))
    with server.client(bob.token) as agent:
        err(agent.put(f"/v1/harnesses/{bob.id}/memories", json={"default_memory_id": read_only}),
            422, "memory_invalid")
