"""Fuzz target ``regex``: the grep pattern preflight (pattern → estimate → compile → work limit).

Input: the raw bytes of a ``pal memory grep`` pattern (the CLI passes ``os.fsencode(argv)``, the
MCP tool the UTF-8 of its argument), compiled by
:func:`palimpsest.search.regex.compile_pattern` case-sensitive and with ``-i``; an accepted
pattern is matched against sample fields and its scan is priced by :func:`check_work`.

Expected refusals: ``InvalidInput`` with code ``regex-too-long``, ``regex-invalid-utf8``,
``regex-too-complex``, ``regex-invalid`` or ``regex-unsupported`` from ``compile_pattern``,
``grep-work-limit`` from ``check_work``. Anything else is a finding, and so is an input that
takes longer than libFuzzer's per-input timeout (security-tests E21: linear time or refusal).

Oracle: an accepted pattern is valid UTF-8 of at most 4,096 bytes whose estimate and compiled
program are both at most 4,096 instructions (and the estimate is what ``estimate_instructions``
says); it never contains ``\\C`` as an escape; matching returns a boolean on every field,
including backtracking traps (2 kB here, 10 kB in the unit tests); ``check_work`` refuses
exactly the scans over the limit. A
pattern the estimator refuses as ``regex-invalid`` is one RE2 itself refuses (the estimator must
not invent syntax errors).
"""

from __future__ import annotations

import re as python_re  # only to *find* escapes in accepted patterns; never runs user patterns

from tests.fuzz.harness import Refused, Target, check, files, instrumented, refusals, texts

with instrumented():
    import re2

    from palimpsest.errors import InvalidInput
    from palimpsest.search.regex import (
        MAX_INSTRUCTIONS,
        MAX_PATTERN_BYTES,
        WORK_LIMIT,
        check_work,
        compile_pattern,
        estimate_instructions,
    )

COMPILE_REFUSALS = refusals(
    {InvalidInput: {"regex-too-long", "regex-invalid-utf8", "regex-too-complex", "regex-invalid",
                    "regex-unsupported"}}
)
WORK_REFUSALS = refusals({InvalidInput: {"grep-work-limit"}})
TRAPS = (b"", b"a" * 2_000 + b"b", b"x" * 1_000 + b"\n" + b"y" * 1_000, "é∂\u202e".encode() * 200)
# Matching costs up to instructions × bytes; past this many units the fuzzer would mostly wait
# (the linear-time traps at 10 kB run in tests/hn/test_grep_patterns.py).
_MATCH_BUDGET = 2_000_000
# An escape \C outside \Q…\E and outside a class: counted backslashes before it must be odd.
_ANY_BYTE = python_re.compile(rb"(?<!\\)(?:\\\\)*\\C")
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


def _re2_refuses(raw: bytes) -> bool:
    try:
        re2.compile(raw, _OPTIONS)
    except re2.error:
        return True
    return False


def _check_accepted(raw: bytes, compiled: object) -> None:
    check(len(raw) <= MAX_PATTERN_BYTES, "an over-long pattern was accepted")
    text = raw.decode("utf-8")  # a UnicodeDecodeError here is a finding too
    estimate = estimate_instructions(text)
    check(compiled.estimate == estimate <= MAX_INSTRUCTIONS, "estimate over the limit")  # type: ignore[attr-defined]
    check(compiled.instructions <= MAX_INSTRUCTIONS, "compiled program over the limit")  # type: ignore[attr-defined]
    if b"\\Q" not in raw and b"[" not in raw:
        check(not _ANY_BYTE.search(raw), "a pattern with \\C was accepted")
    fields = (*TRAPS, raw)
    units = sum(len(field) + 1 for field in fields)
    if compiled.instructions * units <= _MATCH_BUDGET:  # type: ignore[attr-defined]
        for field in fields:
            check(compiled.matches(field) in (True, False), "matches did not answer a boolean")  # type: ignore[attr-defined]
    work = WORK_REFUSALS.attempt(check_work, compiled.instructions, units)  # type: ignore[attr-defined]
    over = compiled.instructions * units > WORK_LIMIT  # type: ignore[attr-defined]
    check(isinstance(work, Refused) == over, "check_work disagrees with the work limit")


def one_input(data: bytes) -> None:
    for ignore_case in (False, True):
        compiled = COMPILE_REFUSALS.attempt(compile_pattern, data, ignore_case=ignore_case)
        if not isinstance(compiled, Refused):
            _check_accepted(data, compiled)
        elif compiled.code == "regex-invalid" and not ignore_case:
            message = str(compiled.error)
            if "repeat" not in message and "nests" not in message:
                check(_re2_refuses(data), f"the preflight invented a syntax error: {message}")


def seeds() -> list[tuple[str, bytes]]:
    return [
        *files("grep", "fuzz/regex"),
        *texts("regex/literal", [
            "memory", "(?i)Mem.ry", "^a$", "(?m)^x$", "(?s).", "[[:alpha:]]+", "\\pL\\p{Greek}",
            "\\x{263a}", "\\Qa.b\\E", "(?P<n>a)|(?<m>b)", "a{2,5}?", "a{,5}", "\\z", "\\b\\B",
            "[^\\]]", "(?:a|)", "x**", "\\C", "[\\C]", "\\\\C", "(?i:k)", "\u212a",
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="regex",
    one_input=one_input,
    refusals=COMPILE_REFUSALS,
    seeds=seeds,
    classes=("A2", "E21"),
    runs=1_500,
    summary="grep patterns: UTF-8, length, expansion estimate, RE2 compile, program size, work",
    dictionary=(b"{1000}", b"{999,1000}", b"{0,}", b"(?:", b"(?P<", b"(?<", b"\\p{L}", b"\\pN",
                b"[[:^alpha:]]", b"\\Q", b"\\E", b"\\x{", b"(?i)", b"(?s)", b"(?m)", b"\\C"),
)

if __name__ == "__main__":
    TARGET.fuzz()
