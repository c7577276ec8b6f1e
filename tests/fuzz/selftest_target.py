"""A deliberately broken fuzz target: proves that a finding fails the bounded run.

``tests/fuzz/test_fuzz.py`` runs it through the same runner as the real targets; its seed
``crash`` raises an exception that is not a listed refusal, so the run must fail, write the
input as an artifact and show the traceback. Not in :mod:`tests.fuzz.targets` (never fuzzed
for real).
"""

from __future__ import annotations

from tests.fuzz.harness import Refused, Target, instrumented, refusals, texts

with instrumented():
    from palimpsest.canonical import decode
    from palimpsest.errors import InvalidInput

REFUSALS = refusals({InvalidInput: {"invalid-json"}})


def one_input(data: bytes) -> None:
    value = REFUSALS.attempt(decode, data)
    if not isinstance(value, Refused) and value == "crash":
        raise KeyError("an unexpected exception the target does not list")


TARGET = Target(
    name="selftest",
    one_input=one_input,
    refusals=REFUSALS,
    seeds=lambda: list(texts("selftest", ['"fine"', "not json", '"crash"'])),
    classes=(),
    runs=50,
    module="tests.fuzz.selftest_target",
)

if __name__ == "__main__":
    TARGET.fuzz()
