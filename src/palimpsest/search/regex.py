"""RE2 regular expressions for the explicit ``grep`` fallback, with hard limits.

Patterns are untrusted data (security-tests.md E21).  They never reach Python's backtracking
``re``: they are compiled by RE2 (``google-re2``), which runs in linear time.  Before RE2 sees a
pattern it must pass, in this order (hn-memory-v0.md §23):

1. valid UTF-8 and at most :data:`MAX_PATTERN_BYTES` bytes;
2. a conservative instruction estimate computed on our own syntax tree **before any counted
   repetition is expanded**, including a fixed program overhead, at most
   :data:`MAX_INSTRUCTIONS`;
3. RE2 compilation (syntax errors, unsupported constructs) with a small memory budget;
4. the compiled program size, at most :data:`MAX_INSTRUCTIONS`.

The estimate models Go's ``regexp/syntax`` instruction count (one instruction per literal rune,
class, ``.`` and empty-width assertion; two per capture; one per ``*``/``+``/``?``/``|``;
``x{n,m}`` costs ``n·|x| + (m−n)·(|x|+1)``) plus :data:`FIXED_OVERHEAD` for the fail, the
whole-match capture pair and the match instruction.  The compiled count is RE2's real program
size: RE2 compiles UTF-8 byte automata, so a large Unicode class costs more than Go's single
instruction (``\\p{L}`` is about 1,200) — the compiled check is therefore stricter than Go for
such classes, never looser.

Go ``regexp`` semantics and how RE2 is configured to match them (checked by tests):

- ``^``/``$`` anchor the whole field, ``(?m)`` makes them line anchors; ``$`` never matches
  before a final newline (both engines);
- ``.`` excludes ``\\n`` unless ``(?s)``;
- ``-i`` is RE2's ``case_sensitive=False``: Unicode simple case folding, the same orbits as Go
  (``k``/``K``/U+212A, ``s``/``S``/U+017F, ``ß``/U+1E9E; no full folding such as ``ß``→``ss``);
- lookaround and back-references are errors in both;
- ``\\C`` (any byte) is accepted by RE2 but not by Go: it is refused here, because it can split a
  UTF-8 sequence;
- ``\\Z`` is an error in both; ``\\z`` is end of text.

This module does no I/O and knows nothing about memories.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import re2

from palimpsest.errors import InvalidInput
from palimpsest.text import safe_line

MAX_PATTERN_BYTES = 4096
MAX_INSTRUCTIONS = 4096
WORK_LIMIT = 67_108_864
FIXED_OVERHEAD = 4  # fail + capture 0 start + capture 0 end + match
MAX_REPEAT = 1000  # Go and RE2 both refuse counted repetitions above 1000
MAX_NESTING = 1000  # Go's nesting limit
_RE2_MAX_MEM = 8 << 20  # bounds compilation of classes whose byte automata are large
_MAX_REASON_CHARS = 200  # of RE2's message, which quotes the pattern

_CAP = MAX_INSTRUCTIONS + 1  # sizes saturate here: we only need to know "too big"


def _sat(value: int) -> int:
    return value if value < _CAP else _CAP


@dataclass(slots=True)
class _Frame:
    capture: bool
    branches: list[int] = field(default_factory=list)
    concat: int = 0
    last: int | None = None  # size of the last atom (a repetition applies to it)

    def atom(self, size: int) -> None:
        self.concat = _sat(self.concat + size)
        self.last = size

    def repeat(self, new_size: int) -> None:
        if self.last is None:
            raise _invalid("missing argument to repetition operator")
        self.concat = _sat(self.concat - self.last + new_size)
        self.last = new_size

    def bar(self) -> None:
        self.branches.append(max(self.concat, 1))  # an empty branch still costs a no-op
        self.concat, self.last = 0, None

    def total(self) -> int:
        if not self.branches:
            return self.concat
        parts = [*self.branches, max(self.concat, 1)]
        return _sat(sum(parts) + len(parts) - 1)  # one alt instruction per '|'


def _invalid(reason: str) -> InvalidInput:
    return InvalidInput(
        f"invalid regex: {reason}",
        code="regex-invalid",
        hint="use Go/RE2 syntax; quote the pattern and put '--' before one starting with '-'",
    )


def _repeat_size(sub: int, low: int, high: int | None) -> int:
    if high is None:  # x{n,}: n copies, the last one under a plus (or a star when n == 0)
        return _sat(sub + 1) if low == 0 else _sat(low * sub + 1)
    if high == 0:
        return 1  # empty match
    return _sat(low * sub + (high - low) * (sub + 1))


def _parse_counted(text: str, start: int) -> tuple[int, int | None, int] | None:
    """Parse ``{n}``, ``{n,}`` or ``{n,m}`` at ``start``; None when it is a literal ``{``."""
    end = text.find("}", start)
    if end < 0:
        return None
    body = text[start + 1 : end]
    low_text, comma, high_text = body.partition(",")
    if not low_text.isascii() or not low_text.isdigit():
        return None
    if high_text and (not high_text.isascii() or not high_text.isdigit()):
        return None
    if _leading_zero(low_text) or _leading_zero(high_text):
        return None  # Go and RE2 read "{01}" as literal text, not a count
    # Over-long digit strings are refused before int() converts them.
    if len(low_text) > 4 or len(high_text) > 4:
        raise _invalid("invalid repeat count")
    low = int(low_text)
    high: int | None = low if not comma else (int(high_text) if high_text else None)
    if low > MAX_REPEAT or (high is not None and (high > MAX_REPEAT or high < low)):
        raise _invalid("invalid repeat count")
    return low, high, end + 1


def _leading_zero(digits: str) -> bool:
    return len(digits) > 1 and digits[0] == "0"


def _skip_class(text: str, start: int) -> int:
    """Return the index after the ``]`` closing the bracket expression opened at ``start``."""
    i = start + 1
    if i < len(text) and text[i] == "^":
        i += 1
    if i < len(text) and text[i] == "]":
        i += 1  # a leading ']' is a literal
    while i < len(text):
        char = text[i]
        if char == "]":
            return i + 1
        if char == "\\":
            i += 2
            continue
        if text.startswith("[:", i):
            close = text.find(":]", i + 2)
            if close >= 0:
                i = close + 2
                continue
        i += 1
    raise _invalid("missing closing ]")


def _skip_escape(text: str, start: int, frame: _Frame) -> int:
    """Account for the escape at ``start`` (a backslash) and return the index after it."""
    if start + 1 >= len(text):
        raise _invalid("trailing backslash at end of expression")
    kind = text[start + 1]
    i = start + 2
    if kind == "C":
        raise InvalidInput(
            "unsupported regex: \\C (any byte) is not part of Go regexp syntax",
            code="regex-unsupported",
        )
    if kind == "Q":
        end = text.find("\\E", i)
        literal = text[i:] if end < 0 else text[i:end]
        for _ in literal:
            frame.atom(1)
        return len(text) if end < 0 else end + 2
    if kind in "pPx" and i < len(text) and text[i] == "{":
        close = text.find("}", i)
        if close < 0:
            raise _invalid("missing closing } in escape")
        i = close + 1
    elif kind in "pP":
        i += 1
    elif kind == "x":
        i += 2
    frame.atom(1)
    return i


def estimate_instructions(pattern: str) -> int:
    """Conservative Go-style instruction estimate, computed before repetitions are expanded.

    The result saturates at ``MAX_INSTRUCTIONS + 1``.

    Raises:
        InvalidInput: ``regex-invalid`` for structural errors found while estimating
            (unbalanced parentheses, bad repeat counts, nesting deeper than Go allows);
            ``regex-unsupported`` for ``\\C``.
    """
    stack = [_Frame(capture=False)]
    i, n = 0, len(pattern)
    while i < n:
        frame = stack[-1]
        char = pattern[i]
        if char == "(":
            if len(stack) > MAX_NESTING:
                raise _invalid("expression nests too deeply")
            if pattern.startswith("(?", i):
                if pattern.startswith("(?P<", i) or (
                    pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in ("=", "!")
                ):
                    close = pattern.find(">", i)
                    if close < 0:
                        raise _invalid("invalid named capture")
                    stack.append(_Frame(capture=True))
                    i = close + 1
                    continue
                j = i + 2
                while j < n and pattern[j] not in ":)":
                    j += 1
                if j >= n:
                    raise _invalid("missing closing )")
                if pattern[j] == ")":  # flags only, e.g. (?i): no instruction
                    i = j + 1
                    continue
                stack.append(_Frame(capture=False))
                i = j + 1
                continue
            stack.append(_Frame(capture=True))
            i += 1
        elif char == ")":
            if len(stack) == 1:
                raise _invalid("unexpected )")
            done = stack.pop()
            stack[-1].atom(_sat(done.total() + (2 if done.capture else 0)))
            i += 1
        elif char == "|":
            frame.bar()
            i += 1
        elif char in "*+?":
            frame.repeat(_sat((frame.last or 0) + 1))
            i += 1
            if i < n and pattern[i] == "?":
                i += 1  # non-greedy marker
        elif char == "{" and (counted := _parse_counted(pattern, i)) is not None:
            low, high, i = counted
            frame.repeat(_repeat_size(frame.last or 0, low, high))
            if i < n and pattern[i] == "?":
                i += 1
        elif char == "[":
            i = _skip_class(pattern, i)
            frame.atom(1)
        elif char == "\\":
            i = _skip_escape(pattern, i, frame)
        else:
            frame.atom(1)
            i += 1
    if len(stack) != 1:
        raise _invalid("missing closing )")
    return _sat(stack[0].total() + FIXED_OVERHEAD)


def decode_pattern(raw: bytes) -> str:
    """Check a pattern's bytes (UTF-8, length) and return it as text.

    Raises:
        InvalidInput: ``regex-invalid-utf8`` or ``regex-too-long``.
    """
    if len(raw) > MAX_PATTERN_BYTES:
        raise InvalidInput(
            f"regex pattern is {len(raw)} bytes; the limit is {MAX_PATTERN_BYTES}",
            code="regex-too-long",
            hint="shorten the pattern",
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("regex pattern is not valid UTF-8", code="regex-invalid-utf8") from exc


@dataclass(frozen=True, slots=True)
class CompiledPattern:
    """A pattern that passed every limit, ready to match UTF-8 fields."""

    pattern: bytes
    ignore_case: bool
    estimate: int
    instructions: int
    regex: Any = field(repr=False, compare=False)

    def matches(self, value: bytes) -> bool:
        """True when the pattern matches anywhere in one UTF-8 field."""
        return self.regex.search(value) is not None


def _too_complex(what: str, count: int | None) -> InvalidInput:
    size = f"more than {MAX_INSTRUCTIONS}" if count is None else str(count)
    return InvalidInput(
        f"regex {what} has {size} instructions; the limit is {MAX_INSTRUCTIONS}",
        code="regex-too-complex",
        hint="simplify the pattern (fewer counted repetitions or smaller classes)",
    )


def compile_pattern(raw: bytes, *, ignore_case: bool = False) -> CompiledPattern:
    """Apply every pattern limit in order and compile with RE2.

    Raises:
        InvalidInput: ``regex-invalid-utf8``, ``regex-too-long``, ``regex-too-complex``,
            ``regex-invalid`` or ``regex-unsupported``.
    """
    text = decode_pattern(raw)
    estimate = estimate_instructions(text)
    if estimate > MAX_INSTRUCTIONS:
        raise _too_complex("expansion estimate", None)
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _RE2_MAX_MEM
    options.case_sensitive = not ignore_case
    try:
        compiled = re2.compile(raw, options)
    except re2.error as exc:
        message = exc.args[0] if exc.args else b""
        reason = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
        # RE2 quotes the offending part of the pattern: keep it readable, on one line, inert.
        reason = safe_line(reason)[:_MAX_REASON_CHARS]
        if "too large" in reason:
            raise _too_complex("compiled program", None) from exc
        raise _invalid(reason) from exc
    size = int(compiled.programsize)
    if size > MAX_INSTRUCTIONS:
        raise _too_complex("compiled program", size)
    return CompiledPattern(raw, ignore_case, estimate, size, compiled)


def work_units(instructions: int, field_sizes: Iterable[int]) -> int:
    """``instructions × Σ(fieldUTF8Bytes + 1)`` over every searchable field."""
    return instructions * sum(size + 1 for size in field_sizes)


def check_work(instructions: int, total_field_units: int) -> None:
    """Refuse a scan whose work exceeds :data:`WORK_LIMIT`.

    ``total_field_units`` is ``Σ(fieldUTF8Bytes + 1)`` over the whole eligible selection.

    Raises:
        InvalidInput: ``grep-work-limit``.
    """
    units = instructions * total_field_units
    if units > WORK_LIMIT:
        raise InvalidInput(
            f"grep work {units} units exceeds the limit of {WORK_LIMIT} "
            f"({instructions} instructions x {total_field_units} field bytes)",
            code="grep-work-limit",
            hint="narrow the filters (--topic, --kind, --actor, --path) or simplify the pattern",
        )


__all__ = [
    "FIXED_OVERHEAD",
    "MAX_INSTRUCTIONS",
    "MAX_PATTERN_BYTES",
    "WORK_LIMIT",
    "CompiledPattern",
    "check_work",
    "compile_pattern",
    "decode_pattern",
    "estimate_instructions",
    "work_units",
]
