"""Hostile changeset requests from tests/adversarial/memory_git/: each is refused with its
expected code and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from palimpsest import canonical
from palimpsest.errors import Forbidden, InvalidInput
from tests.memory_git.helpers import make_flow

CORPUS = Path(__file__).resolve().parents[1] / "adversarial" / "memory_git"
EXPECTED: dict[str, str] = json.loads((CORPUS / "expected.json").read_text())
ALICE = "member:alice"


def test_every_case_is_listed() -> None:
    assert sorted(p.name for p in CORPUS.glob("*_fail.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hostile_request_is_refused(tmp_path: Path, name: str) -> None:
    flow, access, _ = make_flow(tmp_path)
    access.allow(ALICE, "hmem_adv", "read", "write")
    root = flow.git.init(ALICE, "hmem_adv")["ref"]["head_changeset_id"]
    flow.git.create_branch(ALICE, "hmem_adv", {"ref_name": "refs/agents/alice/main",
                                               "head_changeset_id": root})
    raw = (CORPUS / name).read_bytes().replace(b"$HEAD", root.encode())
    with pytest.raises((InvalidInput, Forbidden)) as err:
        body = canonical.decode(raw, allow_floats=True, trailing_whitespace=True)
        flow.git.create_changeset(ALICE, body)
    assert err.value.code == EXPECTED[name]
    assert flow.git.get_ref(ALICE, "hmem_adv", "refs/agents/alice/main")[
        "head_changeset_id"] == root
    assert flow.git.log(ALICE, "hmem_adv", "refs/agents/alice/main")["changesets"][0][
        "changeset_id"] == root
