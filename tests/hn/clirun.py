"""Run ``pal`` in-process (exit code, stdout bytes, stderr text) for CLI tests."""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass

import pytest

from palimpsest.cli.main import main


@dataclass
class Result:
    code: int
    out: bytes
    err: str

    @property
    def text(self) -> str:
        return self.out.decode("utf-8")


def pal(capsys: pytest.CaptureFixture[bytes], *args: str, stdin: bytes = b"") -> Result:
    """Invoke ``pal ARGS`` like the console script and capture its outcome."""
    capsys.readouterr()
    old_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.stdin = old_stdin
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err.decode("utf-8", "replace"))


def refused(result: Result) -> str:
    """Assert a refusal: exit 1, empty stdout, exactly one ``pal: `` line on stderr."""
    assert result.code == 1, (result.code, result.err)
    assert result.out == b""
    assert result.err.startswith("pal: ")
    assert result.err.count("\n") == 1 and result.err.endswith("\n")
    return result.err
