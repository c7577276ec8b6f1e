"""Operating the service, over real sockets: health and readiness without a credential,
Prometheus metrics that count the requests really made, the access log with request ids,
OpenTelemetry spans with the GenAI memory attributes, and the public API document and page."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.api.server import Server, err, ok, provision, start

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Any]]:
    data_dir = tmp_path_factory.mktemp("telemetry") / "data"
    members = provision(data_dir, (("ada", "agent"),))
    server = start(data_dir, "--log-level", "info", "--tracing", "console")
    try:
        yield server, members
    finally:
        server.stop()


@pytest.fixture(scope="module")
def owner(observed: tuple[Server, Any]) -> Iterator[httpx.Client]:
    server, members = observed
    with server.client(members["owner"].token) as client:
        yield client


def _samples(client: httpx.Client) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    out: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_health_and_readiness_need_no_credential_and_say_nothing(
        observed: tuple[Server, Any]) -> None:
    server, _ = observed
    for headers in ({}, {"Authorization": "Bearer pal_hcred_wrong_wrong"}):
        with httpx.Client(base_url=server.url, headers=headers) as anyone:
            health = anyone.get("/healthz")
            assert health.status_code == 200 and health.content == b'{"status":"ok"}'
            ready = anyone.get("/readyz")
            assert ready.status_code == 200 and ready.json() == {"status": "ready"}
            assert anyone.head("/healthz").status_code == 200
            err(anyone.post("/healthz", json={}), 401, "invalid_credential")  # GET only
    with httpx.Client(base_url=server.url, headers={"Host": "evil.example"}) as rebinding:
        err(rebinding.get("/healthz"), 421, "x.pal.host_not_allowed")  # Host check stays


def test_metrics_count_the_requests_made(observed: tuple[Server, Any],
                                         owner: httpx.Client) -> None:
    server = observed[0]
    memory = ok(owner.post("/v1/memories", json={"name": "Counted"}))["id"]
    before = _samples(owner)
    for i in range(3):
        ok(owner.post(f"/v1/memories/{memory}/records", json={"content": f"fact {i}"}))
    for _ in range(2):
        ok(owner.post(f"/v1/memories/{memory}/recall", json={"text": "fact"}))
    err(owner.get("/v1/memories/hmem_absent"), 404, "memory_not_found")
    with server.client(None) as anonymous:
        err(anonymous.get(f"/v1/memories/{memory}/records"), 401, "invalid_credential")
    after = _samples(owner)
    assert memory not in owner.get("/metrics").text  # no id ever becomes a label

    def delta(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    records = "/v1/memories/{memory_id}/records"
    assert delta("palimpsest_http_requests_total", method="POST", route=records,
                 status_class="2xx") == 3
    assert delta("palimpsest_http_requests_total", method="POST",
                 route="/v1/memories/{memory_id}/recall", status_class="2xx") == 2
    assert delta("palimpsest_http_requests_total", method="GET",
                 route="/v1/memories/{memory_id}", status_class="4xx") == 1
    # refused by the guard before any route: still counted under its template
    assert delta("palimpsest_http_requests_total", method="GET", route=records,
                 status_class="4xx") == 1
    assert delta("palimpsest_http_request_duration_seconds_count", method="POST",
                 route=records, status_class="2xx") == 3
    assert delta("palimpsest_writes_total", kind="remember") == 3
    assert delta("palimpsest_recalls_total", route="/v1/memories/{memory_id}/recall") == 2
    assert delta("palimpsest_credential_cache_total", result="hit") >= 5
    assert _value(after, "palimpsest_build_info", version="0.1.0") == 1


def test_group_commit_sizes_are_measured(observed: tuple[Server, Any],
                                         owner: httpx.Client) -> None:
    server, members = observed
    memory = ok(owner.post("/v1/memories", json={"name": "Grouped"}))["id"]
    before = _samples(owner)
    errors: list[str] = []

    def write(n: int) -> None:
        with server.client(members["owner"].token) as client:
            for i in range(4):
                got = client.post(f"/v1/memories/{memory}/records", json={"content": f"{n}.{i}"})
                if got.status_code != 200:
                    errors.append(got.text)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    after = _samples(owner)
    count = (_value(after, "palimpsest_group_commit_size_count")
             - _value(before, "palimpsest_group_commit_size_count"))
    total = (_value(after, "palimpsest_group_commit_size_sum")
             - _value(before, "palimpsest_group_commit_size_sum"))
    assert total == 32  # every remember was in exactly one group
    assert 1 <= count <= 32


def _log_lines(server: Server) -> list[dict[str, Any]]:
    lines = []
    for line in server.stderr().splitlines():
        if line.startswith("{") and '"request_id"' in line:
            lines.append(json.loads(line))
    return lines


def _wait_for(find: Any, seconds: float = 10) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = find()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("not logged in time")


def test_access_log_and_request_ids(observed: tuple[Server, Any], owner: httpx.Client) -> None:
    server, members = observed
    memory = ok(owner.post("/v1/memories", json={"name": "Logged"}))["id"]
    echoed = owner.get(f"/api/memory/{memory}/context", params={"query": "a secret question"},
                       headers={"X-Request-Id": "trace-me-42"})
    assert echoed.headers["x-request-id"] == "trace-me-42"
    replaced = owner.get("/v1/memories", headers={"X-Request-Id": "not; sane " + "x" * 200})
    fresh = replaced.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", fresh)
    with server.client(None) as anonymous:
        refused = anonymous.get("/v1/memories")
    assert re.fullmatch(r"[0-9a-f]{32}", refused.headers["x-request-id"])  # guard refusals too

    line = _wait_for(lambda: [x for x in _log_lines(server) if x["request_id"] == "trace-me-42"])
    entry = line[0]
    assert entry["method"] == "GET" and entry["route"] == "/api/memory/{project}/context"
    assert entry["path"] == f"/api/memory/{memory}/context"  # never the query string
    assert entry["status"] == echoed.status_code and entry["member"] == members["owner"].id
    assert entry["duration_ms"] >= 0 and entry["bytes"] == len(echoed.content)
    assert re.fullmatch(r"[0-9a-f]{32}", entry["trace_id"])
    assert "a secret question" not in server.stderr()
    assert _wait_for(lambda: [x for x in _log_lines(server) if x["request_id"] == fresh])


def _spans(server: Server) -> list[dict[str, Any]]:
    out = []
    for line in server.stderr().splitlines():
        if line.startswith("{") and '"span_id"' in line:
            out.append(json.loads(line))
    return out


def test_spans_carry_the_genai_memory_attributes(observed: tuple[Server, Any],
                                                 owner: httpx.Client) -> None:
    server, _ = observed
    memory = ok(owner.post("/v1/memories", json={"name": "Traced"}))["id"]
    record = ok(owner.post(f"/v1/memories/{memory}/records", json={"content": "traced fact"}))
    ok(owner.patch(f"/v1/memories/{memory}/records/{record['id']}", json={"content": "v2"}))
    ok(owner.post(f"/v1/memories/{memory}/recall", json={"text": "traced"}))

    def named(name: str) -> list[dict[str, Any]]:
        return [s for s in _spans(server) if s["name"] == name
                and s["attributes"].get("gen_ai.memory.store.id") == memory]

    recall = _wait_for(lambda: named("POST /v1/memories/{memory_id}/recall"))[0]
    assert recall["kind"] == "SpanKind.SERVER"
    assert recall["attributes"]["gen_ai.operation.name"] == "search_memory"
    assert recall["attributes"]["http.response.status_code"] == 200
    assert "gen_ai.memory.query.text" not in recall["attributes"]  # user text stays out
    wrote = _wait_for(lambda: named("POST /v1/memories/{memory_id}/records"))[0]
    assert wrote["attributes"]["gen_ai.operation.name"] == "create_memory"
    revised = _wait_for(lambda: named("PATCH /v1/memories/{memory_id}/records/{record_id}"))[0]
    assert revised["attributes"]["gen_ai.operation.name"] == "update_memory"
    assert revised["attributes"]["gen_ai.memory.record.id"] == record["id"]


def test_openapi_and_docs_page_are_public_and_self_contained(
        observed: tuple[Server, Any]) -> None:
    server, _ = observed
    with server.client(None) as anonymous:
        doc = ok(anonymous.get("/openapi.json"))
        assert doc["paths"]["/healthz"]["get"]["security"] == []
        assert doc["paths"]["/v1/memories"]["get"].get("security") is None  # bearer, global
        page = anonymous.get("/docs")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp
        for asset in ("/docs", "/docs/docs.js", "/docs/docs.css"):
            body = anonymous.get(asset)
            assert body.status_code == 200, asset
            # nothing from another host: no absolute or protocol-relative URL at all
            assert not re.search(r"https?://|(?:src|href)=[\"']//", body.text), asset


def test_docs_page_renders_in_a_browser(observed: tuple[Server, Any], tmp_path: Path) -> None:
    import shutil
    import subprocess

    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is installed by make test (Makefile: debian-packages)"
    server, _ = observed
    result = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=5000", "--dump-dom", f"{server.url}/docs"],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    operations = re.search(r'data-operations="(\d+)"', dom)
    assert operations and int(operations.group(1)) > 60, dom[:2000]
    assert "/v1/memories/{memory_id}/recall" in dom and "Palimpsest memory service" in dom
