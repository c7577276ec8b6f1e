"""Bad input over HTTP: every malformed body, oversized content, bad filter, cycle on move and
second subject gets the right status and code — and leaves the store exactly as it was.

Cases are data (``tests/adversarial/api/cases.json``, with a README saying why each must fail);
``{root}``, ``{child}``, ``{record}``, ``{entity}``, ``{other_entity}`` are filled in from a
small tree built once per module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.server import Server, err, ok, state

CASES = json.loads(
    (Path(__file__).resolve().parents[1] / "adversarial" / "api" / "cases.json").read_text())


@pytest.fixture(scope="module")
def owner(server: Server, members: dict[str, Any]) -> Iterator[httpx.Client]:
    with server.client(members["owner"].token) as client:
        yield client


@pytest.fixture(scope="module")
def places(owner: httpx.Client) -> dict[str, str]:
    root = ok(owner.post("/v1/memories", json={"name": "Bad input root"}))["id"]
    child = ok(owner.post("/v1/memories", json={"name": "Child", "parent_id": root}))["id"]
    record = ok(owner.post(f"/v1/memories/{root}/records", json={"content": "a fact"}))["id"]
    entity = ok(owner.post(f"/v1/memories/{root}/records",
                           json={"type": "entity", "title": "Acme", "content": ""}))["id"]
    other = ok(owner.post(f"/v1/memories/{root}/records",
                          json={"type": "entity", "title": "Dana", "content": ""}))["id"]
    return {"root": root, "child": child, "record": record, "entity": entity,
            "other_entity": other}


def _fill(value: Any, places: dict[str, str]) -> Any:
    if isinstance(value, str):
        for key, real in places.items():
            value = value.replace("{" + key + "}", real)
        return value
    if isinstance(value, list):
        return [_fill(v, places) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, places) for k, v in value.items()}
    return value


def _expand(body: Any) -> Any:
    """``{"$repeat": [s, n]}`` builds an oversized string without storing it in the corpus."""
    if isinstance(body, dict):
        if set(body) == {"$repeat"}:
            text, count = body["$repeat"]
            return text * count
        if set(body) == {"$list"}:
            item, count = body["$list"]
            return [item] * count
        return {k: _expand(v) for k, v in body.items()}
    if isinstance(body, list):
        return [_expand(v) for v in body]
    return body


@pytest.fixture(scope="module")
def before(owner: httpx.Client, places: dict[str, str]) -> Any:
    """Everything readable once the tree is built: no refused request may change it."""
    return state(owner)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_input_is_refused_and_changes_nothing(owner: httpx.Client, places: dict[str, str],
                                                  before: Any, case: dict[str, Any]) -> None:
    path = _fill(case["path"], places)
    kwargs: dict[str, Any] = {}
    if "body" in case:
        kwargs["json"] = _expand(_fill(case["body"], places))
    if "params" in case:
        kwargs["params"] = _fill(case["params"], places)
    response = owner.request(case["method"], path, **kwargs)
    err(response, case["status"], case["code"])
    assert state(owner) == before


def test_an_unknown_field_is_named_inertly(owner: httpx.Client, places: dict[str, str]) -> None:
    # Regression case of the service_bodies fuzz target (control-character-in-unknown-field):
    # the 422 named the client's raw key, so ESC reached terminals and agents.
    seed = Path(__file__).resolve().parents[1] / "adversarial" / "fuzz" / "service_bodies"
    body = (seed / "control-character-in-unknown-field.json").read_bytes()
    response = owner.post(f"/v1/memories/{places['root']}/recall", content=body,
                          headers={"content-type": "application/json"})
    error = err(response, 422, "memory_invalid")
    text = json.dumps(error, ensure_ascii=False)
    assert "\x1b" not in text and "filt" in error["message"]
