"""The fuzzing harness: precise oracles, seed corpora and a bounded atheris runner.

A target is one small module in :mod:`tests.fuzz.targets` that defines ``TARGET`` (a
:class:`Target`). Its ``one_input(data)`` calls the decoder under test through
:meth:`Refusals.attempt`, which swallows **only** the refusals the target lists (an exception
type and its exact reason codes) and lets everything else escape: an escaping exception is a
finding, and so is a :class:`Finding` raised by the target's own checks of what the decoder
accepted. There is no ``except Exception`` anywhere (style.md lesson 14).

Each target runs in its own process under atheris/libFuzzer (``python -m
tests.fuzz.targets.<name> <libFuzzer flags> <corpus> <seeds>``) so that its code under test is
imported inside :func:`instrumented` and coverage-guided; :func:`run` builds that command line.
The same ``one_input`` also runs in-process over every seed as a normal pytest
(``tests/fuzz/test_fuzz.py``), so a broken harness or a regression seed fails CI by itself.

This module imports nothing of ``palimpsest``: whatever it imported would escape instrumentation.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

REPO_ROOT = Path(__file__).resolve().parents[2]
ADVERSARIAL = REPO_ROOT / "tests" / "adversarial"
FUZZ_CORPUS = ADVERSARIAL / "fuzz"
VECTORS = REPO_ROOT / "tests" / "vectors"
INSTRUMENT_ENV = "PAL_FUZZ_INSTRUMENT"
SCRATCH_ENV = "PAL_FUZZ_SCRATCH"

T = TypeVar("T")
Seed = tuple[str, bytes]

# What every refusal and acceptance of the current process looked like (read by the seed replay
# test to prove both sides of each oracle ran; a Counter costs nothing while fuzzing).
OUTCOMES: Counter[str] = Counter()
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


class Finding(AssertionError):
    """A decoder broke its contract: it accepted something it must refuse, or its result fails
    an invariant the target checks."""


def check(condition: object, message: str) -> None:
    """Raise :class:`Finding` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise Finding(message)


@dataclass(frozen=True, slots=True)
class Refused:
    """The marker :meth:`Refusals.attempt` returns for an expected refusal."""

    error: BaseException

    @property
    def code(self) -> str | None:
        """The refusal's reason code (``None`` for error types without codes)."""
        return getattr(self.error, "code", None)


@dataclass(frozen=True)
class Refusals:
    """The exact exceptions a decoder may raise to refuse input: type → allowed codes.

    ``None`` as the code set means the type carries no code (e.g. the Hermes provider's
    ``ConfigError``, which is standard library only); an empty mapping means the code under
    test must never raise at all. A subclass of a listed type matches; a listed type with a code
    outside its set does not, and escapes as a finding.
    """

    allowed: Mapping[type[BaseException], frozenset[str] | None]

    def matches(self, error: BaseException) -> bool:
        """True when ``error`` is one of the expected refusals."""
        for kind, codes in self.allowed.items():
            if isinstance(error, kind):
                if codes is None:
                    return True
                return getattr(error, "code", None) in codes
        return False

    def attempt(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T | Refused:
        """Call ``fn``; return its result, or :class:`Refused` for an expected refusal.

        Anything else propagates unchanged (with its own traceback): that is the finding.
        """
        try:
            result = fn(*args, **kwargs)
        except BaseException as error:
            if not self.matches(error):
                raise
            OUTCOMES[f"refused:{type(error).__name__}:{getattr(error, 'code', '-')}"] += 1
            message = str(error)
            if not message or _CONTROL.search(message):
                raise Finding(
                    f"a refusal must name its reason on one line, free of control characters "
                    f"(it reaches terminals and agents): {message!r}"
                ) from error
            return Refused(error)
        OUTCOMES["accepted"] += 1
        return result

    def describe(self) -> str:
        """``InvalidInput(invalid-json, non-canonical)``-style text for docs and listings."""
        parts = []
        for kind, codes in self.allowed.items():
            listed = "" if codes is None else f"({', '.join(sorted(codes))})"
            parts.append(kind.__name__ + listed)
        return "; ".join(parts) or "none (nothing may raise)"


def refusals(spec: Mapping[type[BaseException], Iterable[str] | None]) -> Refusals:
    """Build :class:`Refusals` from ``{type: codes}`` (codes as any iterable, or ``None``)."""
    return Refusals({k: None if v is None else frozenset(v) for k, v in spec.items()})


NEVER_RAISES = Refusals({})


def instrumented() -> contextlib.AbstractContextManager[Any]:
    """Import the code under test inside this block (one place per target, easy to re-point).

    Under the fuzzer (``PAL_FUZZ_INSTRUMENT=1``, set by :func:`run`) it is atheris' import hook
    limited to ``palimpsest``; in pytest it does nothing, so targets import normally.
    """
    if os.environ.get(INSTRUMENT_ENV) != "1":
        return contextlib.nullcontext()
    import atheris

    return atheris.instrument_imports(include=["palimpsest"])


def scratch_dir() -> Path:
    """A private directory for a target's files (repositories, connection files).

    Under the fuzzer it is the run's ``scratch`` folder (libFuzzer exits without Python's
    clean-up, so :func:`run` removes it); in pytest a temporary directory removed at exit.
    """
    given = os.environ.get(SCRATCH_ENV)
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(dir=path))
    path = Path(tempfile.mkdtemp(prefix="pal-fuzz-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


# ------------------------------------------------------------------------- seeds


def files(*dirs: str, pattern: str = "*", root: Path = ADVERSARIAL) -> Iterator[Seed]:
    """Every file matching ``pattern`` under each corpus directory (relative to ``root``),
    sorted, README files excluded. A missing directory is an error: seeds never vanish quietly."""
    for name in dirs:
        directory = root / name
        if not directory.is_dir():
            raise FileNotFoundError(f"seed directory {directory} is missing")
        for path in sorted(directory.rglob(pattern)):
            if path.is_file() and path.name != "README.md" and "__pycache__" not in path.parts:
                yield str(path.relative_to(root)), path.read_bytes()


def texts(name: str, values: Iterable[str | bytes]) -> Iterator[Seed]:
    """Literal seeds: ``name/0``, ``name/1`` … (str is UTF-8, lone surrogates as the bytes
    ``surrogateescape`` maps them from)."""
    for index, value in enumerate(values):
        data = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
        yield f"{name}/{index}", data


# ------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """One fuzz target: the decoder it drives, its oracle and its budget."""

    name: str
    one_input: Callable[[bytes], None]
    refusals: Refusals
    seeds: Callable[[], Iterable[Seed]]
    classes: tuple[str, ...]  # security-tests.md classes the target covers (A1 … F25)
    runs: int  # iterations inside `make test` (libFuzzer -runs, seeds included)
    max_len: int = 4096
    summary: str = ""
    phase: int = 1
    dictionary: tuple[bytes, ...] = ()  # tokens libFuzzer splices into inputs (-dict)
    module: str = ""  # the module run as __main__; default tests.fuzz.targets.<name>

    @property
    def main_module(self) -> str:
        """The module the fuzzing process runs."""
        return self.module or f"tests.fuzz.targets.{self.name}"

    def fuzz(self, argv: list[str] | None = None) -> None:
        """Run under atheris (the ``__main__`` of a target module)."""
        import atheris

        atheris.Setup(sys.argv if argv is None else argv, self.one_input)
        atheris.Fuzz()


def write_dictionary(tokens: Iterable[bytes], path: Path) -> None:
    """A libFuzzer ``-dict`` file: one double-quoted token a line, every byte escaped."""
    path.write_text("".join('"' + "".join(f"\\x{b:02x}" for b in t) + '"\n' for t in tokens))


def seed_digest_name(name: str, data: bytes) -> str:
    """A file name for a seed inside a libFuzzer corpus directory (stable, no path parts)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name)[-80:]
    return f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}"


def write_seeds(target: Target, directory: Path) -> int:
    """Materialise ``target``'s seeds as files libFuzzer reads (never writes)."""
    directory.mkdir(parents=True, exist_ok=True)
    count = 0
    for name, data in target.seeds():
        (directory / seed_digest_name(name, data)).write_bytes(data)
        count += 1
    return count


@dataclass(frozen=True, slots=True)
class RunResult:
    """What one fuzzing process did."""

    target: str
    returncode: int
    output: str
    artifacts: tuple[Path, ...]

    @property
    def ok(self) -> bool:
        """No finding: libFuzzer finished its budget and wrote no crash, leak or timeout."""
        return self.returncode == 0 and not self.artifacts

    def tail(self, lines: int = 60) -> str:
        """The end of libFuzzer's output (the traceback and the crashing input's base64)."""
        return "\n".join(self.output.splitlines()[-lines:])


def fuzz_env(home: Path, scratch: Path) -> dict[str, str]:
    """The fuzzing process's environment: instrumented, deterministic hashing, no inherited
    Git configuration (pygit2 reads HOME's ``.gitconfig``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        {
            INSTRUMENT_ENV: "1",
            SCRATCH_ENV: str(scratch),
            "PYTHONHASHSEED": "0",
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
            "TZ": "UTC",
            "PAL_VERIFY_WORKERS": "0",
        }
    )
    return env


def run(
    target: Target,
    workdir: Path,
    *,
    runs: int | None = None,
    seconds: int | None = None,
    seed: int = 1,
    timeout: int = 10,
    corpus: Path | None = None,
    echo: bool = False,
) -> RunResult:
    """Fuzz ``target`` in a subprocess for ``runs`` iterations (default: its budget) or for
    ``seconds``; new inputs go to ``corpus`` (default a fresh directory in ``workdir``),
    crashes, timeouts and out-of-memory inputs to ``workdir/artifacts``."""
    workdir.mkdir(parents=True, exist_ok=True)
    seeds = workdir / "seeds"
    if seeds.exists():
        for old in seeds.iterdir():
            old.unlink()
    write_seeds(target, seeds)
    corpus = corpus or workdir / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts = workdir / "artifacts"
    artifacts.mkdir(exist_ok=True)
    before = set(artifacts.iterdir())
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    scratch = workdir / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    options = []
    if target.dictionary:
        write_dictionary(target.dictionary, workdir / "dictionary")
        options.append(f"-dict={workdir / 'dictionary'}")
    budget = [f"-max_total_time={seconds}"] if seconds is not None else [
        f"-runs={target.runs if runs is None else runs}"
    ]
    command = [
        sys.executable, "-m", target.main_module,
        *budget,
        f"-seed={seed}",
        f"-max_len={target.max_len}",
        f"-timeout={timeout}",
        "-rss_limit_mb=2048",
        "-print_final_stats=1",
        f"-artifact_prefix={artifacts}/",
        *options,
        str(corpus),
        str(seeds),
    ]  # fmt: skip
    env = fuzz_env(home, scratch)
    try:
        if echo:
            done = subprocess.run(command, cwd=REPO_ROOT, env=env, check=False)
            output = ""
        else:
            done = subprocess.run(
                command, cwd=REPO_ROOT, env=env, check=False,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
            )  # fmt: skip
            output = done.stdout
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    found = tuple(sorted(set(artifacts.iterdir()) - before))
    return RunResult(target.name, done.returncode, output, found)


def replay(target: Target, inputs: Iterable[Seed]) -> Counter[str]:
    """Run ``target.one_input`` in this process over ``inputs``; return the outcome counts.

    The first finding propagates with its input's name attached as a note.
    """
    OUTCOMES.clear()
    for name, data in inputs:
        try:
            target.one_input(data)
        except BaseException as error:
            error.add_note(f"fuzz target {target.name}, input {name} ({len(data)} bytes)")
            raise
    return Counter(OUTCOMES)


__all__ = [
    "ADVERSARIAL",
    "FUZZ_CORPUS",
    "NEVER_RAISES",
    "OUTCOMES",
    "REPO_ROOT",
    "VECTORS",
    "Finding",
    "Refusals",
    "Refused",
    "RunResult",
    "Seed",
    "Target",
    "check",
    "files",
    "instrumented",
    "refusals",
    "replay",
    "run",
    "texts",
    "write_seeds",
]
