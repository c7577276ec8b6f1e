"""A refused request body, query or header in the project's own words (the 422 of ``/v1``,
Memory Git's 400).

FastAPI hands over pydantic's errors, which speak of the validator, not of the request: a
union reports every branch it tried (``content.constrained-str`` beside
``content.list[union[TextPart,FilePart,ExtensionPart]].0.FilePart.type``), and the messages
name Python types. This module turns them into what the client needs:

- the field path as the client wrote it (``content[0].text``), branch labels removed;
- only the branch that applies: a part whose ``type`` is ``"text"`` is judged as a text part,
  not also as a file part, and a string is not also told it is not a list;
- a message per rule that says what to send instead (``content is longer than 65536
  characters; split it …``), never the offending input;
- every problem in ``detail`` (at most 20), the first one in ``message``.

Pure: it sees only the error list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from palimpsest.api.errors import ApiError
from palimpsest.text import safe_line

MAX_DETAIL: Final = 20
_WHERE: Final = frozenset({"body", "query", "path", "header", "cookie"})
# How pydantic labels the branch of a union or the step of a validator chain: a type
# description (`constrained-str`, `list[...]`, `function-after[...]`) or a model class name
# (`TextPart`). The API's own field names are snake_case, so neither is ever one of them.
_LABEL: Final = re.compile(r"[\[\]\-]|^[A-Z][A-Za-z0-9]*$|^(?:str|int|float|bool|none|list|dict)$")
_MODEL: Final = re.compile(r"^[A-Z][A-Za-z0-9]*$")
# Type mismatches: "this branch wanted another kind of value".
_KINDS: Final = {
    "string_type": "a string", "list_type": "a list", "dict_type": "an object",
    "model_type": "an object", "model_attributes_type": "an object", "int_type": "an integer",
    "int_parsing": "an integer", "int_from_float": "an integer", "bool_type": "true or false",
    "bool_parsing": "true or false", "float_type": "a number", "float_parsing": "a number",
    "none_required": "null", "literal_error": None, "is_instance_of": None,
}
_TOO_LONG_HINT: Final = {
    "content": "split it into several records, or upload it (POST /v1/files) and name the "
               "file in a file part",
}


def shape(problems: Sequence[Mapping[str, Any]]) -> ApiError:
    """The envelope for pydantic's error list of one request."""
    kept = _prune([_Problem(p) for p in problems])
    if not kept:
        return ApiError("memory_invalid", "the request is malformed")
    detail: list[dict[str, Any]] = []
    for p in kept:
        line = {"param": p.param, "message": p.message()}
        if line not in detail:
            detail.append(line)
    first = detail[0]
    n = len(detail) - 1
    more = f" (and {n} more problem{'s' if n > 1 else ''}, listed in detail)" if n else ""
    return ApiError("memory_invalid", f"{first['message']}{more}", param=first["param"],
                    detail=detail[:MAX_DETAIL])


class _Problem:
    """One pydantic error, with its path split into what the client wrote and the branch."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.type: str = str(raw.get("type", ""))
        self.msg: str = str(raw.get("msg", "invalid value"))
        self.ctx: Mapping[str, Any] = raw.get("ctx") or {}
        loc = list(raw.get("loc", ()))
        self.where = str(loc.pop(0)) if loc and loc[0] in _WHERE else "body"
        # `(position, branch)` of every union branch on the way (model class names only)
        self.branches: list[tuple[tuple[Any, ...], str]] = []
        self.path: list[str | int] = []
        for i, part in enumerate(loc):
            last = i == len(loc) - 1
            if isinstance(part, str) and _LABEL.search(part) and not (
                    last and self.type == "extra_forbidden"):
                if _MODEL.match(part):
                    self.branches.append((tuple(loc[:i]), part))
                continue
            self.path.append(part if isinstance(part, int) else safe_line(str(part))[:64])
        self.merged: list[str] = []  # kinds of sibling branches folded into this one

    @property
    def param(self) -> str | None:
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        if self.where == "header" and out:
            return "-".join(w.capitalize() for w in out.split("-"))
        return out or None

    def is_kind_mismatch(self) -> bool:
        return self.type in _KINDS and self.type != "literal_error"

    def on_discriminator(self) -> bool:
        """This branch was refused on its ``type`` field: the value is of another kind."""
        return self.path[-1:] == ["type"] and self.type in {
            "literal_error", "string_pattern_mismatch"}

    def message(self) -> str:
        name = self.param
        subject = (f"the {name} header" if self.where == "header" else name) if name else \
            ("the body" if self.where == "body" else "the request")
        c = self.ctx
        if self.type == "missing":
            if name is None:
                return "the request needs a JSON body; send one"
            return f"{subject} is required; add it"
        if self.type == "extra_forbidden":
            return f"{subject} is not a field of this request; remove it (docs: /docs)"
        if self.type == "json_invalid":
            return f"the body is not valid JSON ({c.get('error', 'decode error')}); send JSON"
        if self.type == "string_too_long":
            hint = _TOO_LONG_HINT.get(str(self.path[0]) if self.path else "", "shorten it")
            return f"{subject} is longer than {c.get('max_length')} characters; {hint}"
        if self.type == "string_too_short":
            if c.get("min_length") == 1:
                return f"{subject} must not be empty"
            return f"{subject} must have at least {c.get('min_length')} characters"
        if self.type == "too_long":
            return f"{subject} has more than {c.get('max_length')} items; send fewer"
        if self.type == "too_short":
            n = c.get("min_length")
            return f"{subject} must have at least {n} item{'s' if n != 1 else ''}"
        if self.type in {"greater_than_equal", "greater_than", "less_than_equal", "less_than"}:
            bound = {"greater_than_equal": f"at least {c.get('ge')}",
                     "greater_than": f"more than {c.get('gt')}",
                     "less_than_equal": f"at most {c.get('le')}",
                     "less_than": f"less than {c.get('lt')}"}[self.type]
            return f"{subject} must be {bound}"
        if self.type == "literal_error" or self.merged:
            expected = [*self.merged, *_expected(self)]
            return f"{subject} must be {_either(expected)}"
        if self.type == "string_pattern_mismatch":
            return f"{subject} must match the pattern {c.get('pattern')}"
        if self.type in _KINDS:
            return f"{subject} must be {_KINDS[self.type]}"
        if self.type == "value_error":
            return f"{subject}: {self.msg.removeprefix('Value error, ')}"
        return f"{subject}: {self.msg[:1].lower()}{self.msg[1:]}"


def _expected(p: _Problem) -> list[str]:
    if p.type == "literal_error":
        return [str(p.ctx.get("expected", "")).replace(" or ", ", ")]
    if p.type == "string_pattern_mismatch":
        return [f"a value matching {p.ctx.get('pattern')}"]
    kind = _KINDS.get(p.type)
    return [kind] if kind else []


def _either(options: list[str]) -> str:
    options = list(dict.fromkeys(o for o in options if o))
    return options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]


def _prune(problems: list[_Problem]) -> list[_Problem]:
    """Keep the problems of the branches that apply, one per rule and place."""
    # 1. A union branch refused on its `type` field is not the value's kind: drop its other
    #    problems; when every branch at a position was refused so, say which types exist.
    refused: dict[tuple[Any, ...], set[str]] = {}
    tried: dict[tuple[Any, ...], set[str]] = {}
    for p in problems:
        for position, branch in p.branches:
            tried.setdefault(position, set()).add(branch)
            if p.on_discriminator() and (position, branch) == p.branches[-1]:
                refused.setdefault(position, set()).add(branch)
    out: list[_Problem] = []
    folded: dict[tuple[Any, ...], _Problem] = {}
    for p in problems:
        dead = [(pos, b) for pos, b in p.branches if b in refused.get(pos, set())]
        if not dead:
            out.append(p)
            continue
        position = dead[-1][0]
        if refused[position] != tried[position] or not p.on_discriminator():
            continue  # another branch applies, or this is not the type field itself
        if position in folded:
            folded[position].merged.extend(_expected(p))
        else:
            p.merged = _expected(p)
            folded[position] = p
            out.append(p)
    # 2. A kind mismatch at a place where another branch got further (a deeper problem, or
    #    another rule at the same place) is that other branch's business: drop it; kind
    #    mismatches alone at one place fold into one "must be a string or a list".
    final: list[_Problem] = []
    by_place: dict[tuple[str | int, ...], _Problem] = {}
    for p in out:
        place = tuple(p.path)
        if p.is_kind_mismatch():
            if any(q is not p and tuple(q.path[:len(place)]) == place
                   and not (q.is_kind_mismatch() and tuple(q.path) == place) for q in out):
                continue
            if place in by_place:
                by_place[place].merged.extend(_expected(p))
                continue
            p.merged = _expected(p) if any(
                q is not p and q.is_kind_mismatch() and tuple(q.path) == place
                for q in out) else []
            by_place[place] = p
        final.append(p)
    for p in final:
        if p.merged:
            p.merged = list(dict.fromkeys(p.merged))
    return final


__all__ = ["MAX_DETAIL", "shape"]
