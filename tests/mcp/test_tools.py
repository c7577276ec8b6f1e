"""Tool schemas and offering rules exactly as uhp-memories.md §13 states them."""

from __future__ import annotations

import pytest

from palimpsest.mcp import arguments, tools
from palimpsest.mcp.tools import Offers, find, offered

MEMORY = {
    "type": "string",
    "description": "A memory id (hmem_…): one attached to you, or one a previous answer named "
    "as a parent or child.",
}


def _names(offers: Offers) -> list[str]:
    return [t.name for t in offered(offers)]


def test_default_order_with_writes() -> None:
    assert _names(Offers(writes=True)) == [
        "memory_list",
        "memory_recall",
        "memory_graph",
        "memory_get",
        "memory_remember",
        "memory_revise",
        "memory_forget",
    ]


def test_write_tools_dropped_when_the_agent_may_write_nowhere() -> None:
    assert _names(Offers(writes=False)) == [
        "memory_list",
        "memory_recall",
        "memory_graph",
        "memory_get",
    ]
    assert find(Offers(writes=False), "memory_remember") is None


def test_query_operate_and_free_query_only_where_offered() -> None:
    assert _names(Offers(writes=False, queries=True, operations=True, languages=("cypher",)))[
        4:
    ] == ["memory_run_query", "memory_operate", "memory_query"]
    free = find(Offers(languages=("cypher", "sql")), "memory_query")
    assert free is not None and free.description.endswith("cypher, sql.")
    for name in ("memory_run_query", "memory_operate", "memory_query"):
        assert find(Offers(writes=True), name) is None


def test_erase_is_never_a_tool() -> None:
    every = Offers(writes=True, queries=True, operations=True, languages=("x",), git=True)
    assert not [t for t in offered(every) if "erase" in t.name]
    assert find(every, "memory_erase") is None


def test_every_schema_uses_the_shared_memory_property() -> None:
    every = Offers(writes=True, queries=True, operations=True, languages=("x",))
    for spec in offered(every):
        schema = spec.input_schema()
        assert schema["type"] == "object"
        assert schema["properties"]["memory"] == MEMORY


@pytest.mark.parametrize(
    ("name", "properties", "required"),
    [
        ("memory_list", ["memory"], []),
        (
            "memory_recall",
            ["memory", "query", "text", "filters", "types", "depth", "limit", "include",
             "provenance"],
            ["memory"],
        ),
        ("memory_graph", ["memory", "record", "hops", "types", "include"], ["memory"]),
        ("memory_get", ["memory", "record", "history", "include"], ["memory", "record"]),
        ("memory_remember", ["memory", "type", "title", "content", "attributes", "references"], []),
        (
            "memory_revise",
            ["memory", "record", "title", "content", "attributes", "reason"],
            ["memory", "record", "reason"],
        ),
        ("memory_forget", ["memory", "record"], ["memory", "record"]),
        ("memory_run_query", ["memory", "name", "params"], ["memory", "name"]),
        (
            "memory_operate",
            ["memory", "record", "operation", "input"],
            ["memory", "record", "operation"],
        ),
        ("memory_query", ["memory", "language", "statement", "params"], ["memory", "statement"]),
    ],
)
def test_exact_input_schemas(name: str, properties: list[str], required: list[str]) -> None:
    every = Offers(writes=True, queries=True, operations=True, languages=("cypher",))
    spec = find(every, name)
    assert spec is not None
    schema = spec.input_schema()
    assert list(schema["properties"]) == properties
    assert schema["required"] == required


def test_property_types() -> None:
    spec = find(Offers(writes=True), "memory_recall")
    assert spec is not None
    props = spec.input_schema()["properties"]
    # the bounds HTTP applies to the same fields; the tool's limit is the reference's 1-50
    assert props["types"] == {"type": "array", "items": {"type": "string"}, "maxItems": 32}
    assert props["depth"] == {"type": "integer", "minimum": 0, "maximum": 1000}
    assert props["limit"] == {"type": "integer", "minimum": 1, "maximum": 50, "default": 8}
    assert props["text"] == props["query"] == {"type": "string", "maxLength": 4000}
    remember = find(Offers(writes=True), "memory_remember")
    assert remember is not None
    rprops = remember.input_schema()["properties"]
    assert rprops["type"]["default"] == "fact"
    assert rprops["type"]["enum"] == ["fact", "note", "procedure", "link", "entity"]
    assert rprops["references"]["items"]["required"] == ["rel", "record_id"]
    assert "file" not in rprops  # files are not kept by this server's tools


def test_read_only_hint_follows_writes() -> None:
    every = Offers(writes=True, queries=True, operations=True, languages=("x",))
    writes = {t.name for t in offered(every) if t.writes}
    assert writes == {"memory_remember", "memory_revise", "memory_forget"}


@pytest.mark.parametrize(
    "name", ["memory list", "memory_list\n", "mémoire", "", "a" * 129, "../memory_list"]
)
def test_hostile_tool_names_are_not_found(name: str) -> None:
    assert find(Offers(writes=True), name) is None


def test_git_group_is_offered_only_when_enabled() -> None:
    assert not [t for t in offered(Offers(writes=True)) if t.group == "git"]
    read_only = [t.name for t in offered(Offers(git=True)) if t.group == "git"]
    assert read_only == [
        "memory_status",
        "memory_ref_list",
        "memory_log",
        "memory_show",
        "memory_diff",
        "memory_context_at",
    ]
    assert len([t for t in offered(Offers(git=True, writes=True)) if t.group == "git"]) == 12


REPO_NAMES = ["repo_memory_recall", "repo_memory_grep", "repo_memory_show", "repo_memory_prime"]
REPO_WRITES = ["repo_memory_record", "repo_memory_handoff", "repo_memory_supersede",
               "repo_memory_retract", "repo_memory_challenge"]


def test_repo_group_is_read_only_and_offered_only_with_a_repository() -> None:
    assert not [t for t in offered(Offers(writes=True, git=True)) if t.group == "repo"]
    repo = [t for t in offered(Offers(repo=True)) if t.group == "repo"]
    assert [t.name for t in repo] == REPO_NAMES
    # service write grants never open the repository's write tools: only the flag does
    assert [t.name for t in offered(Offers(repo=True, writes=True))
            if t.group.startswith("repo")] == REPO_NAMES
    assert not any(t.writes for t in repo)
    assert find(Offers(), "repo_memory_recall") is None
    assert find(Offers(repo_writes=True), "repo_memory_record") is None  # no repository


def test_repo_write_tools_only_with_the_flag_and_say_what_they_store() -> None:
    written = [t for t in offered(Offers(repo=True, repo_writes=True)) if t.group == "repo-write"]
    assert [t.name for t in written] == REPO_WRITES
    for spec in written:
        assert spec.writes
        assert "signed under this repository's active identity" in spec.description
        assert "untrusted data" in spec.description
        assert "nothing is read from the environment, the conversation or files" in (
            spec.description)
        assert spec.input_schema()["properties"]["request"]["type"] == ["object", "string"]


def test_repo_recall_schema_mirrors_recall_request_v0() -> None:
    recall, grep, show = tools.REPO_TOOLS
    schema = recall.input_schema()
    # RecallRequestV0 keys (hn-memory-v0.md §16.1); atCommit optional with default HEAD
    assert set(schema["properties"]) == {
        "version", "atCommit", "subject", "path", "topic", "kind", "actor", "lifecycle",
        "trust", "query", "maxRecords", "maxContentBytes", "cursor", "includeUntrusted",
    }
    assert schema["required"] == []
    assert schema["properties"]["atCommit"]["default"] == "HEAD"
    assert schema["properties"]["maxRecords"] == {"type": "integer", "minimum": 1, "default": 20}
    assert schema["properties"]["maxContentBytes"]["default"] == 65536
    grep_props = set(grep.input_schema()["properties"])
    assert grep_props == (set(schema["properties"]) - {"query"}) | {"pattern", "ignore_case"}
    assert grep.input_schema()["required"] == ["pattern"]
    assert show.input_schema()["required"] == ["memory"]


def test_every_schema_refuses_unknown_arguments_and_uses_only_checked_keywords() -> None:
    every = Offers(writes=True, queries=True, operations=True, languages=("x",), git=True,
                   repo=True)

    def keywords(schema: dict[str, object]) -> set[str]:
        found = set(schema)
        for key in ("items",):
            if isinstance(schema.get(key), dict):
                found |= keywords(schema[key])  # type: ignore[arg-type]
        for member in (schema.get("properties") or {}).values():  # type: ignore[attr-defined]
            found |= keywords(member)
        return found

    for spec in offered(every):
        schema = spec.input_schema()
        assert schema["additionalProperties"] is False, spec.name
        assert keywords(schema) <= arguments.KEYWORDS, spec.name
    # the repository recall and grep are checked by the library's strict RecallRequestV0 rules
    assert [s.name for s in offered(every) if not s.checked] == ["repo_memory_recall",
                                                                 "repo_memory_grep"]
