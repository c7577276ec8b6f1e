"""Every fuzz target, inside ``make test``: its seeds replay in-process and a bounded atheris run
(``Target.runs`` iterations, fixed seed) finds nothing. A broken harness fails here too: the
selftest target's planted finding must fail its run, and each oracle must see both an accepted
and a refused input among its seeds.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from palimpsest.errors import InvalidInput, NotFound
from tests.fuzz import targets
from tests.fuzz.harness import (
    FUZZ_CORPUS,
    NEVER_RAISES,
    REPO_ROOT,
    Finding,
    Refused,
    Target,
    refusals,
    replay,
    run,
)
from tests.fuzz.selftest_target import TARGET as SELFTEST

TARGETS = targets.load_all()
IDS = [t.name for t in TARGETS]
SECURITY_DOC = REPO_ROOT / "docs" / "security.md"
CLASSES = {f"{letter}{n}" for letter, numbers in
           {"A": (1, 2, 3), "B": range(4, 9), "C": range(9, 17), "D": (17, 18),
            "E": (19, 20, 21), "F": range(22, 26)}.items() for n in numbers}  # fmt: skip


def test_every_target_is_discovered_and_named_by_its_file() -> None:
    assert len(TARGETS) >= 14
    for target in TARGETS:
        assert target.classes, target.name
        assert set(target.classes) <= CLASSES, target.name
        assert target.runs > 0


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_seeds_replay_without_finding_and_reach_both_outcomes(target: Target) -> None:
    outcomes = replay(target, target.seeds())
    assert outcomes["accepted"] > 0, "no seed is accepted: the acceptance oracle never runs"
    refused = sum(n for key, n in outcomes.items() if key.startswith("refused:"))
    if target.refusals is not NEVER_RAISES:
        assert refused > 0, "no seed is refused: the refusal list is never exercised"


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_bounded_fuzzing_finds_nothing(target: Target, tmp_path: Path) -> None:
    result = run(target, tmp_path, timeout=20)
    assert result.ok, f"fuzz target {target.name} found something:\n{result.tail()}"
    # libFuzzer stops at the first check after -runs is reached: now and then one run later
    done = re.search(r"^Done (\d+) runs", result.output, re.MULTILINE)
    assert done is not None and int(done.group(1)) >= target.runs, result.tail()


def test_a_finding_fails_the_bounded_run(tmp_path: Path) -> None:
    result = run(SELFTEST, tmp_path, timeout=20)
    assert not result.ok
    assert result.returncode != 0
    assert "KeyError" in result.output
    assert [p.read_bytes() for p in result.artifacts] == [b'"crash"']


def test_refusals_swallow_only_listed_codes() -> None:
    spec = refusals({InvalidInput: {"invalid-json"}})

    def fail(code: str, message: str = "bad input") -> None:
        raise InvalidInput(message, code=code)

    assert isinstance(spec.attempt(fail, "invalid-json"), Refused)
    with pytest.raises(InvalidInput):
        spec.attempt(fail, "invalid-memory")  # right type, unlisted code
    with pytest.raises(NotFound):
        spec.attempt(lambda: (_ for _ in ()).throw(NotFound("x")))  # unlisted type
    with pytest.raises(Finding):
        spec.attempt(fail, "invalid-json", "echoes \x1b[2J")  # a refusal must stay inert
    with pytest.raises(ZeroDivisionError):
        NEVER_RAISES.attempt(lambda: 1 // 0)
    assert spec.attempt(lambda: 7) == 7


def test_every_corpus_folder_has_a_readme_and_a_target() -> None:
    folders = {p.name for p in FUZZ_CORPUS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(IDS), "tests/adversarial/fuzz/<target>/ exists exactly per target"
    assert (FUZZ_CORPUS / "README.md").is_file()
    for name in folders:
        assert (FUZZ_CORPUS / name / "README.md").is_file(), name


def _doc_rows() -> dict[str, list[str]]:
    rows = {}
    for line in SECURITY_DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) >= 5:
            rows[cells[0].strip("`")] = cells
    return rows


def test_security_doc_lists_every_target_with_its_budget_and_classes() -> None:
    rows = _doc_rows()
    for target in TARGETS:
        assert target.name in rows, f"docs/security.md has no row for {target.name}"
        cells = rows[target.name]
        assert all(cells), f"empty cell in the row of {target.name}"
        assert f"{target.runs:,}" in cells, f"iterations of {target.name} differ from the doc"
        listed = set(re.findall(r"\b[A-F][0-9]{1,2}\b", " ".join(cells)))
        assert set(target.classes) <= listed, f"classes of {target.name} differ from the doc"


def test_security_doc_names_a_test_for_every_class() -> None:
    text = SECURITY_DOC.read_text()
    table = text.split("## Classes of hostile input", 1)[1].split("\n## ", 1)[0]
    for cls in sorted(CLASSES):
        row = next((line for line in table.splitlines() if line.startswith(f"| {cls} ")), None)
        assert row is not None, f"{cls} has no row in the class table"
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) >= 3 and all(cells), f"{cls}: empty cell"
        named = set(re.findall(r"`([a-z_]+)`", cells[1]))
        claiming = {t.name for t in TARGETS if cls in t.classes}
        assert named & set(IDS) == claiming, f"{cls}: fuzz targets differ from their classes"
        for path in re.findall(r"`(tests/[^`:]+?\.py)", row):
            assert (REPO_ROOT / path).is_file(), f"{cls} names a missing test file {path}"
