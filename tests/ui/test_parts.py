"""The review desk's pure parts, without a browser: CSRF comparison, the word diff, inert
rendering, and the rules the package keeps (no ``|safe`` in a template, every service call in
``ui/facade.py``, nothing from ``api`` or storage). Sessions are the service's
(tests/service/test_sessions.py)."""

from __future__ import annotations

import ast
import asyncio
import itertools
import json
from importlib import resources
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.api.guard import Guard, GuardConfig
from palimpsest.ui.render import environment, href
from palimpsest.ui.sessions import same_token
from palimpsest.ui.worddiff import field_diff, word_diff, words

UI = Path(resources.files("palimpsest.ui"))  # type: ignore[arg-type]


def test_csrf_tokens_compare_exactly() -> None:
    assert same_token("abc", "abc")
    assert not same_token("abd", "abc") and not same_token("", "abc")
    assert not same_token(None, "abc") and not same_token("abc", "")
    assert not same_token("ab\u00e9", "abc")  # non-ASCII never matches, never raises


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.text(max_size=80), st.text(max_size=80))
def test_word_diff_rebuilds_both_sides(before: str, after: str) -> None:
    pieces = word_diff(before, after)
    assert "".join(p.text for p in pieces if p.kind != "ins") == before
    assert "".join(p.text for p in pieces if p.kind != "del") == after
    assert all(p.text for p in pieces)
    assert all(a.kind != b.kind for a, b in itertools.pairwise(pieces))


def test_word_diff_marks_whole_words() -> None:
    pieces = word_diff("notice period of 30 days", "notice period of 60 days")
    assert [(p.kind, p.text) for p in pieces] == [
        ("same", "notice period of "), ("del", "30 "), ("ins", "60 "), ("same", "days")]
    assert words("a  b\nc") == ["a  ", "b\n", "c"]
    changed = field_diff("tags", ["a"], ["a", "b"])
    assert changed.before == '["a"]' and changed.after == '["a","b"]' and changed.changed
    assert not field_diff("x", "same", "same").changed


def test_rendering_makes_author_text_inert() -> None:
    env = environment()
    page = env.from_string("<p>{{ t }}</p><p>{{ t|line }}</p>").render(
        t="<script>x</script>\u202eabc\u0007\nnext")
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "\u202e" not in page and "&lt;U+202E&gt;" in page
    assert "\u0007" not in page and "\ufffd" in page
    assert "abc\ufffd\\nnext" in page  # the one-line form escapes the break


def test_links_are_built_from_encoded_ids_under_the_desk() -> None:
    assert href("memories", "javascript:alert(1)") == "/ui/memories/javascript%3Aalert%281%29"
    assert href("memories", "../../x", "records") == "/ui/memories/..%2F..%2Fx/records"
    assert href("memories", "m", "prime", budget=10, proposal=None) == (
        "/ui/memories/m/prime?budget=10")


def test_templates_never_mark_text_safe() -> None:
    for template in (UI / "templates").glob("*.html"):
        text = template.read_text(encoding="utf-8")
        for banned in ("|safe", "| safe", "Markup", "autoescape false", "|tojson", "<script",
                       "style=", " on"):
            if banned == " on":  # no inline event handler attribute
                assert not [w for w in text.split() if w.startswith("on") and "=" in w], template
                continue
            assert banned not in text, (template.name, banned)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_desk_reaches_the_service_through_one_module() -> None:
    types_only = {"palimpsest.service.model", "palimpsest.service.memories",
                  "palimpsest.service.memorygit.flow"}
    for module in UI.glob("*.py"):
        found = _imports(module)
        assert not [n for n in found if n.startswith(("palimpsest.api", "palimpsest.mcp",
                                                      "palimpsest.cli", "sqlite3"))], module
        assert not [n for n in found if ".storage" in n], module
        if module.name != "facade.py":
            assert {n for n in found if n.startswith("palimpsest.service")} <= types_only, (
                module.name)


def test_the_guard_lets_desk_forms_through_with_a_cap() -> None:
    reached: list[bytes] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = await receive()
        reached.append(message["body"])

    async def no_bearer(token: str) -> str:
        raise AssertionError("the desk authenticates itself")

    guard = Guard(app, config=GuardConfig(), authenticate=no_bearer)

    def post(size: int, host: bytes = b"127.0.0.1") -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        body = b"a" * size

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/ui/sign-in",
                 "headers": [(b"host", host), (b"content-length", str(size).encode()),
                             (b"content-type", b"application/x-www-form-urlencoded")]}
        asyncio.run(guard(scope, receive, send))
        return sent

    assert post(100) == [] and reached == [b"a" * 100]  # no bearer, no JSON check
    too_big = post(64 * 1024 + 1)
    assert too_big[0]["status"] == 413
    assert json.loads(too_big[1]["body"])["error"]["code"] == "x.pal.request_too_large"
    assert post(10, host=b"evil.example")[0]["status"] == 421  # Host checked as for /mcp
