"""Pattern limits and Go-compatible semantics of the grep regex layer (hn-memory-v0.md §23)."""

from __future__ import annotations

from pathlib import Path

import pytest
import re2

from palimpsest.errors import InvalidInput
from palimpsest.search.regex import (
    FIXED_OVERHEAD,
    MAX_INSTRUCTIONS,
    MAX_PATTERN_BYTES,
    WORK_LIMIT,
    check_work,
    compile_pattern,
    estimate_instructions,
    work_units,
)

CORPUS = Path(__file__).resolve().parents[1] / "adversarial" / "grep"


def _refused(pattern: bytes, *, ignore_case: bool = False) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        compile_pattern(pattern, ignore_case=ignore_case)
    return info.value


def _matches(pattern: str, text: str, *, ignore_case: bool = False) -> bool:
    return compile_pattern(pattern.encode(), ignore_case=ignore_case).matches(text.encode())


# --- the corpus ---------------------------------------------------------------------------

_REFUSED = sorted(p for p in CORPUS.glob("*.pat") if ".linear." not in p.name)
_LINEAR = sorted(CORPUS.glob("*.linear.pat"))


def test_corpus_is_present() -> None:
    assert len(_REFUSED) >= 15 and len(_LINEAR) >= 4


@pytest.mark.timeout(20)
@pytest.mark.parametrize("path", _REFUSED, ids=lambda p: p.name)
def test_hostile_pattern_refused_with_its_code(path: Path) -> None:
    expected_code = path.name.split(".")[-2]
    assert _refused(path.read_bytes()).code == expected_code


@pytest.mark.timeout(20)
@pytest.mark.parametrize("path", _LINEAR, ids=lambda p: p.name)
def test_catastrophic_backtracking_pattern_runs_linearly(path: Path) -> None:
    compiled = compile_pattern(path.read_bytes())
    hostile = [b"a" * 10_000 + b"!", b"x" * 10_000, (b"a" * 50 + b"\n") * 200]
    assert [compiled.matches(text) for text in hostile] == [
        re2.search(path.read_bytes(), text) is not None for text in hostile
    ]


# --- byte limit ---------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "ok"), [(4095, True), (4096, True), (4097, False)])
def test_pattern_byte_limit(size: int, ok: bool) -> None:
    # A bracket expression keeps the instruction count tiny whatever its length.
    pattern = b"[" + b"a" * (size - 2) + b"]"
    assert len(pattern) == size
    if ok:
        assert compile_pattern(pattern).matches(b"xa")
    else:
        assert _refused(pattern).code == "regex-too-long"


def test_pattern_byte_limit_counts_utf8_bytes() -> None:
    exact = ("[" + "é" * 2047 + "]").encode()
    assert len(exact) == MAX_PATTERN_BYTES
    assert compile_pattern(exact).matches("é".encode())
    over = ("[" + "é" * 2047 + "a]").encode()
    assert _refused(over).code == "regex-too-long"


# --- the estimate, before expansion -------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "estimate"),
    [
        ("", FIXED_OVERHEAD),
        ("a", FIXED_OVERHEAD + 1),
        ("ab", FIXED_OVERHEAD + 2),
        ("a|b", FIXED_OVERHEAD + 3),
        ("(a)", FIXED_OVERHEAD + 3),
        ("(?:a)*", FIXED_OVERHEAD + 2),
        ("a{3}", FIXED_OVERHEAD + 3),
        ("a{2,5}", FIXED_OVERHEAD + 2 + 3 * 2),
        ("a{2,}", FIXED_OVERHEAD + 3),
        ("a{0}", FIXED_OVERHEAD + 1),
        ("(a{100}){10}", FIXED_OVERHEAD + 10 * 102),
        (r"\Qa.b\E", FIXED_OVERHEAD + 3),
        (r"[a-z]\p{Han}\x{263a}.", FIXED_OVERHEAD + 4),
        ("a{,2}", FIXED_OVERHEAD + 5),  # not a repeat in Go: five literal runes
        ("a{01}", FIXED_OVERHEAD + 5),  # leading zeros: literal text in Go and RE2
        ("a{1,05}", FIXED_OVERHEAD + 7),
    ],
)
def test_estimate_model(pattern: str, estimate: int) -> None:
    assert estimate_instructions(pattern) == estimate


def test_estimate_saturates_instead_of_expanding() -> None:
    # 10^12 expanded instructions: computed arithmetically, never built.
    assert estimate_instructions("((((a{1000}){1000}){1000}){1000})") == MAX_INSTRUCTIONS + 1


@pytest.mark.parametrize(("extra", "ok"), [(-1, True), (0, True), (1, False)])
def test_estimate_limit(extra: int, ok: bool) -> None:
    # 'a|b' estimates 3 but compiles to 1 RE2 instruction, so the estimate alone decides here.
    pattern = ("a|b" + "c" * (MAX_INSTRUCTIONS - FIXED_OVERHEAD - 3 + extra)).encode()
    assert estimate_instructions(pattern.decode()) == MAX_INSTRUCTIONS + extra
    if ok:
        assert compile_pattern(pattern).instructions < MAX_INSTRUCTIONS + extra
    else:
        error = _refused(pattern)
        assert error.code == "regex-too-complex" and "estimate" in error.message


def test_estimate_is_checked_before_counted_repetitions_expand() -> None:
    error = _refused(b"(?:abcdefghij){1000}")
    assert error.code == "regex-too-complex" and "estimate" in error.message


# --- the compiled program -----------------------------------------------------------------


def _program_size(pattern: bytes) -> int:
    options = re2.Options()
    options.log_errors = False
    return int(re2.compile(pattern, options).programsize)


@pytest.mark.parametrize(("extra", "ok"), [(-1, True), (0, True), (1, False)])
def test_compiled_program_limit(extra: int, ok: bool) -> None:
    # \p{L} is one Go instruction but about 1,200 RE2 instructions: the estimate passes and the
    # compiled program decides.
    base = rb"\p{L}\p{L}\p{L}"
    filler = MAX_INSTRUCTIONS - _program_size(base) + extra
    pattern = base + b"z" * filler
    assert _program_size(pattern) == MAX_INSTRUCTIONS + extra
    assert estimate_instructions(pattern.decode()) <= MAX_INSTRUCTIONS
    if ok:
        assert compile_pattern(pattern).instructions == MAX_INSTRUCTIONS + extra
    else:
        error = _refused(pattern)
        assert error.code == "regex-too-complex" and "compiled" in error.message


# --- work limit ---------------------------------------------------------------------------


def test_work_units_count_one_unit_per_field() -> None:
    assert work_units(5, [0, 3, 10]) == 5 * (1 + 4 + 11)


@pytest.mark.parametrize(("extra", "ok"), [(-1, True), (0, True), (1, False)])
def test_work_limit(extra: int, ok: bool) -> None:
    instructions = 8
    units = WORK_LIMIT // instructions  # 8 divides 2**26
    if ok:
        check_work(instructions, units + (extra if extra < 0 else 0))
        check_work(1, WORK_LIMIT + extra)
    else:
        with pytest.raises(InvalidInput) as info:
            check_work(1, WORK_LIMIT + extra)
        assert info.value.code == "grep-work-limit"
        with pytest.raises(InvalidInput):
            check_work(instructions, units + 1)


# --- Go semantics -------------------------------------------------------------------------


def test_empty_pattern_matches_everything() -> None:
    assert _matches("", "") and _matches("", "anything")


def test_anchors_cover_the_whole_field_by_default() -> None:
    assert not _matches("^b", "a\nb")
    assert _matches("(?m)^b", "a\nb")
    assert not _matches("a$", "a\nb")
    assert _matches("(?m)a$", "a\nb")
    assert not _matches("a$", "a\n")  # Go's $ is end of text, never before a final newline
    assert _matches(r"a\z", "a")


def test_dot_excludes_newline_unless_s_flag() -> None:
    assert not _matches("a.b", "a\nb")
    assert _matches("(?s)a.b", "a\nb")
    assert _matches("a.b", "a\u00e9b")  # one rune, two bytes


def test_case_sensitive_by_default() -> None:
    assert not _matches("decision", "Decision")
    assert _matches("(?i)decision", "DECISION")
    assert _matches("decision", "DECISION", ignore_case=True)


def test_scoped_flags() -> None:
    assert _matches("(?i:d)ecision", "Decision")
    assert not _matches("(?i:d)ecision", "DECISION")


@pytest.mark.parametrize(
    ("pattern", "text", "folds"),
    [
        ("k", "\u212a", True),  # KELVIN SIGN is in k's simple-fold orbit
        ("s", "\u017f", True),  # LONG S
        ("ß", "\u1e9e", True),  # CAPITAL SHARP S
        ("µ", "\u039c", True),  # MICRO SIGN ~ GREEK CAPITAL MU
        ("σ", "ς", True),
        ("é", "É", True),
        ("i", "\u0130", False),  # Turkish dotted I has no simple fold to i in Go
        ("i", "\u0131", False),
        ("ß", "ss", False),  # no full case folding
    ],
)
def test_ignore_case_is_unicode_simple_folding(pattern: str, text: str, folds: bool) -> None:
    assert _matches(pattern, text, ignore_case=True) is folds
    assert _matches("(?i)" + pattern, text) is folds


def test_unicode_classes() -> None:
    assert _matches(r"\p{Han}+", "東京")
    assert not _matches(r"\p{Han}", "tokyo")
    assert _matches(r"^\pL+$", "café")


def test_perl_classes_are_ascii_like_go() -> None:
    assert not _matches(r"\d", "٣")  # Arabic-Indic digit: \d is ASCII in Go
    assert _matches(r"\s", "\t")
    assert not _matches(r"\s", "\u00a0")
    assert not _matches(r"\bé", "é")  # \b is an ASCII word boundary


def test_19_counts_with_leading_zeros_are_literal_text() -> None:
    # Found by the regex fuzz target: the estimate read "{000,1000}" as a repeat of nothing and
    # refused a pattern Go and RE2 both accept as literal braces.
    assert _matches("(?i){000,1000}+$", "{000,1000}}")
    assert _matches("^a{02}$", "a{02}") and not _matches("^a{02}$", "aa")


def test_named_groups_in_both_spellings() -> None:
    assert _matches("(?P<a>x)(?<b>y)", "xy")


def test_any_byte_escape_refused_even_when_ignoring_case() -> None:
    assert _refused(rb"\C", ignore_case=True).code == "regex-unsupported"


def test_invalid_utf8_is_refused_before_length() -> None:
    error = _refused(b"\xff" * 10)
    assert error.code == "regex-invalid-utf8"


def test_19_syntax_error_message_is_one_inert_line() -> None:
    # Found by the regex fuzz target: RE2 quotes the bad part of the pattern, raw NUL and LF
    # included, and the refusal carried them to terminals and MCP clients.
    error = _refused(b"\\p{\n\x00\x1b[2J}")
    assert error.code == "regex-invalid"
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in error.message)
    assert "\\n" in error.message  # still says where it broke, as visible text
