"""Hostile record texts (tests/adversarial/agent_surfaces) stay data in the Hermes block."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from palimpsest.hermes import render

CORPUS = json.loads(
    (Path(__file__).parents[1] / "adversarial" / "agent_surfaces" / "records.json").read_text()
)
RAW_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def _result(text: str) -> dict[str, object]:
    return {
        "record": {
            "id": "hrec_1",
            "type": "note",
            "title": text[:40],
            "content": [{"type": "text", "text": text}],
            "written_by": {"kind": "member", "id": "hmbr_mallory", "type": "agent"},
        },
        "memory": {"id": "hmem_a", "name": text[:20]},
    }


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_hostile_text_cannot_leave_its_record(case: str) -> None:
    text, shown = render.render(render.unique_items([_result(CORPUS[case])]), 16000)
    assert [item.record_id for item in shown] == ["hrec_1"]
    assert text.startswith(render.HEADER + "\n\n")
    assert text.count("<palimpsest-record ") == 1 and text.count("</palimpsest-record>") == 1
    assert text.endswith("</palimpsest-record>")
    assert (
        '<palimpsest-record id="hrec_1" memory="hmem_a" type="note" '
        'writer="member:hmbr_mallory">\n' in text
    )
    body = text.split('writer="member:hmbr_mallory">\n', 1)[1].rsplit("\n</palimpsest-record>")[0]
    assert "<" not in body and ">" not in body and '"' not in body
    assert not RAW_UNSAFE.search(text)
    assert "memory-context>" not in text.replace("memory-context&gt;", "")


def test_escaping_is_reversible_for_readable_text() -> None:
    import html

    text, _ = render.render(render.unique_items([_result(CORPUS["html-entities"])]), 16000)
    body = text.split('">\n', 1)[1].rsplit("\n</palimpsest-record>")[0]
    assert html.unescape(body.split("\n", 1)[1]) == CORPUS["html-entities"]


def test_captured_user_text_drops_injected_blocks() -> None:
    injected, _ = render.render(render.unique_items([_result(CORPUS["fence-close-hermes"])]), 16000)
    user = f"my question<memory-context>\n{injected}\n</memory-context> tail"
    assert render.strip_injected(user) == "my question tail"
