"""The one error tree: stable codes, messages with hints, class split by fault."""

from __future__ import annotations

import pytest

from palimpsest.errors import Conflict, Forbidden, InvalidInput, NotFound, PalError, Unavailable


@pytest.mark.parametrize(
    ("cls", "code"),
    [
        (InvalidInput, "invalid-input"), (NotFound, "not-found"), (Forbidden, "forbidden"),
        (Conflict, "conflict"), (Unavailable, "unavailable"),
    ],
)  # fmt: skip
def test_default_codes(cls: type[PalError], code: str) -> None:
    err = cls("something failed")
    assert isinstance(err, PalError) and err.code == code
    assert str(err) == "something failed" == err.diagnostics()


def test_code_and_hint() -> None:
    err = InvalidInput("bad key", code="weak-key", hint="make a new one")
    assert err.code == "weak-key"
    assert err.diagnostics() == "bad key; make a new one"
    with pytest.raises(PalError):
        raise err
