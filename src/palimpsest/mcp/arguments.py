"""Tool arguments checked against the tool's own input schema before its handler runs.

HTTP refuses a body with an unknown field or a value out of bounds; a tool call is refused the
same way, by the schema the agent was shown (:mod:`palimpsest.mcp.tools`): an argument the
schema does not name, a value of the wrong type, outside ``minimum``/``maximum``, longer than
``maxLength``, with more than ``maxItems`` items or not in its ``enum``. Nothing is clamped or
ignored. Every refusal is ``memory_invalid``, names the argument and says what to send.

Only the JSON Schema keywords the tool schemas use are read (``type``, ``properties``,
``required``, ``additionalProperties``, ``items``, ``enum``, ``minimum``, ``maximum``,
``maxLength``, ``maxItems``); a schema that used any other would be a mistake in ``tools``,
which the tests catch. Error texts never echo the value sent, only where it was.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from palimpsest.errors import InvalidInput

KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items",
                      "enum", "minimum", "maximum", "maxLength", "maxItems", "description",
                      "default"})
"""The JSON Schema keywords the checker understands (``description`` and ``default`` only
inform)."""

_NAMES = {"string": "a string", "integer": "an integer", "boolean": "true or false",
          "object": "an object", "array": "a list", "number": "a number"}


def _invalid(message: str, hint: str | None = None) -> InvalidInput:
    return InvalidInput(message, code="memory_invalid", hint=hint)


def _is(kind: str, value: Any) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, {"string": str, "boolean": bool, "object": dict,
                              "array": list}[kind])


def _bounds(schema: Mapping[str, Any]) -> str:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if lo is not None and hi is not None:
        return f" from {lo} to {hi}"
    if lo is not None:
        return f" of at least {lo}"
    return f" of at most {hi}" if hi is not None else ""


def check_value(schema: Mapping[str, Any], value: Any, where: str) -> None:
    """Refuse ``value`` unless it satisfies ``schema``; ``where`` names it in the refusal."""
    kind = schema.get("type")
    if isinstance(kind, list):  # one of several types: the handler reads which
        if not any(_is(k, value) for k in kind):
            raise _invalid(f"`{where}` must be " + " or ".join(_NAMES[k] for k in kind))
        return
    if kind is not None and not _is(kind, value):
        items = schema.get("items", {}).get("type") if kind == "array" else None
        named = f"a list of {_NAMES[items].removeprefix('a ').removeprefix('an ')}s" \
            if items in ("string", "object", "integer") else _NAMES[kind]
        raise _invalid(f"`{where}` must be {named}{_bounds(schema)}")
    if "enum" in schema and value not in schema["enum"]:
        raise _invalid(f"`{where}` must be one of " + ", ".join(map(str, schema["enum"])))
    if kind in ("integer", "number"):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise _invalid(f"`{where}` must be {_NAMES[kind]}{_bounds(schema)}")
    if kind == "string" and "maxLength" in schema and len(value) > schema["maxLength"]:
        raise _invalid(f"`{where}` must be at most {schema['maxLength']} characters")
    if kind == "array":
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise _invalid(f"`{where}` must have at most {schema['maxItems']} items")
        items = schema.get("items")
        if items is not None:
            for i, item in enumerate(value):
                check_value(items, item, f"{where}[{i}]")
    if kind == "object" and "properties" in schema:
        check_object(schema, value, where, f"`{where}`")


def check_object(schema: Mapping[str, Any], value: Mapping[str, Any], where: str,
                 owner: str) -> None:
    """An object's members against ``properties``/``required``/``additionalProperties``;
    ``owner`` names the object in a refusal (the tool, or the argument it is)."""
    props: Mapping[str, Any] = schema.get("properties", {})
    prefix = f"{where}." if where else ""
    if schema.get("additionalProperties") is False:
        for key in value:
            if key not in props:
                shown = "".join(c if c.isascii() and c.isprintable() else "?" for c in key[:64])
                raise _invalid(f"`{prefix}{shown}` is not an argument of {owner}",
                               hint="send only " + (", ".join(props) or "no arguments"))
    for key in schema.get("required", ()):
        if value.get(key) is None:
            raise _invalid(f"`{prefix}{key}` is required")
    for key, member in value.items():
        # null stands for "not given", as the handlers read it
        if member is not None and key in props:
            check_value(props[key], member, prefix + key)


def check(tool: str, schema: Mapping[str, Any], args: Mapping[str, Any]) -> None:
    """Refuse a call of ``tool`` whose arguments its ``inputSchema`` does not allow."""
    check_object(schema, args, "", tool)


__all__ = ["KEYWORDS", "check", "check_object", "check_value"]
