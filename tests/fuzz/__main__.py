"""``python -m tests.fuzz``: list, run and replay the fuzz targets (see docs/security.md).

    python -m tests.fuzz list
    python -m tests.fuzz run --seconds 600 canonical      # one target, ten minutes
    python -m tests.fuzz run --seconds 300 --all          # every target in turn (make fuzz)
    python -m tests.fuzz run --runs 200000 gitstream      # a fixed number of iterations
    python -m tests.fuzz replay canonical crash-1234…     # re-run inputs in-process, with a
                                                          # plain Python traceback

A long run keeps its corpus and findings under ``.fuzz/<target>/`` (git-ignored), so the next
run starts where the last one stopped. A finding is fixed at the right depth, and its input is
added to the target's seed folder under ``tests/adversarial/fuzz/`` as a regression case.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.fuzz import targets
from tests.fuzz.harness import REPO_ROOT, replay, run

WORK = REPO_ROOT / ".fuzz"


def _list() -> int:
    for target in targets.load_all():
        print(f"{target.name:18} {target.runs:>8} runs  {','.join(target.classes):24} "
              f"{target.summary}")  # fmt: skip
        print(f"{'':18} refusals: {target.refusals.describe()}")
    return 0


def _run(args: argparse.Namespace) -> int:
    chosen = targets.names() if args.all else args.targets
    if not chosen:
        print("name a target or pass --all (python -m tests.fuzz list)", file=sys.stderr)
        return 2
    failed = []
    for name in chosen:
        target = targets.load(name)
        workdir = WORK / name
        budget = f"{args.seconds} s" if args.seconds else f"{args.runs or target.runs} runs"
        print(f"== {name}: {budget}", flush=True)
        result = run(
            target, workdir, runs=args.runs, seconds=args.seconds, seed=args.seed,
            timeout=args.timeout, corpus=workdir / "corpus", echo=args.verbose,
        )  # fmt: skip
        if not args.verbose:
            stats = [line for line in result.output.splitlines() if line.startswith(("#", "Done"))]
            print("\n".join(stats[-2:]), flush=True)
        if not result.ok:
            failed.append(name)
            if not args.verbose:
                print(result.tail(), file=sys.stderr)
            for artifact in result.artifacts:
                print(f"finding: {artifact}", file=sys.stderr)
    if failed:
        print(f"findings in: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _replay(args: argparse.Namespace) -> int:
    target = targets.load(args.target)
    inputs = [(str(path), Path(path).read_bytes()) for path in args.inputs]
    outcomes = replay(target, inputs)
    for key, count in sorted(outcomes.items()):
        print(f"{count:6}  {key}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fuzz",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="name every target, its budget, classes and refusals")
    go = sub.add_parser("run", help="fuzz targets in subprocesses")
    go.add_argument("targets", nargs="*")
    go.add_argument("--all", action="store_true", help="every target, one after another")
    budget = go.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=int, help="fuzz each target this long")
    budget.add_argument("--runs", type=int, help="iterations per target (default: its budget)")
    go.add_argument("--seed", type=int, default=1, help="libFuzzer's random seed")
    go.add_argument("--timeout", type=int, default=5, help="seconds one input may take")
    go.add_argument("-v", "--verbose", action="store_true", help="show libFuzzer's output live")
    again = sub.add_parser("replay", help="run inputs through a target in this process")
    again.add_argument("target")
    again.add_argument("inputs", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "list":
        return _list()
    if args.command == "run":
        return _run(args)
    return _replay(args)


if __name__ == "__main__":
    sys.exit(main())
