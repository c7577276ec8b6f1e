"""Hostile bodies from tests/adversarial/service/ are refused and leave the store unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from palimpsest.errors import InvalidInput
from palimpsest.service import MemoryService
from palimpsest.service.model import Caller
from tests.conftest import BOTH

BACKENDS = BOTH  # the store is what these tests exercise

CORPUS = Path(__file__).resolve().parents[1] / "adversarial" / "service"
RECORDS = json.loads((CORPUS / "records_fail.json").read_text("utf-8"))
RECALLS = json.loads((CORPUS / "recall_fail.json").read_text("utf-8"))


@pytest.mark.parametrize("case", sorted(RECORDS))
def test_hostile_record_body_refused(svc: MemoryService, owner: Caller, case: str) -> None:
    mid = svc.create_memory(owner, {"name": "target"})["id"]
    with pytest.raises(InvalidInput) as exc:
        svc.remember(owner, mid, RECORDS[case])
    assert exc.value.code == "memory_invalid"
    assert svc.list_records(owner, mid, include="all")["data"] == []
    assert svc.list_changesets(owner, mid)["data"] == []
    assert case not in exc.value.message  # errors name fields, never echo payloads


@pytest.mark.parametrize("case", sorted(RECALLS))
def test_hostile_recall_body_refused(svc: MemoryService, owner: Caller, case: str) -> None:
    mid = svc.create_memory(owner, {"name": "target"})["id"]
    svc.remember(owner, mid, {"content": "a fact"})
    with pytest.raises(InvalidInput) as exc:
        svc.recall(owner, mid, RECALLS[case])
    assert exc.value.code == "memory_invalid"


# Regression cases of the service_bodies fuzz target: NaN and infinities reach the service
# through the MCP SDK's JSON parser (pydantic_core), which accepts them.
FUZZ = Path(__file__).resolve().parents[1] / "adversarial" / "fuzz" / "service_bodies"


@pytest.mark.parametrize("name", ["nan-filter-value.json", "infinity-in-filter-list.json",
                                  "nan-attribute.json"])
def test_non_finite_numbers_are_refused_by_name(svc: MemoryService, owner: Caller,
                                                name: str) -> None:
    import pydantic_core

    body = pydantic_core.from_json((FUZZ / name).read_bytes())
    mid = svc.create_memory(owner, {"name": "target"})["id"]
    svc.remember(owner, mid, {"content": "a fact"})
    with pytest.raises(InvalidInput) as exc:
        if "filters" in body:
            svc.recall(owner, mid, body)
        else:
            svc.remember(owner, mid, body)
    assert exc.value.code == "memory_invalid"
    assert len(svc.list_records(owner, mid, include="all")["data"]) == 1
