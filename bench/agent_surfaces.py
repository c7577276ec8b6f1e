"""Latency of the agent surfaces against a baseline measured in the same run.

    .venv/bin/python bench/agent_surfaces.py [--records N] [--rounds N] [--write-docs]

Against a real `pal serve` on a fresh data directory holding N records:

- Hermes provider: `prefetch()` consuming a warmed result (what Hermes waits for at the start
  of a turn) versus the baseline, one synchronous recall round trip to the server (what a
  provider that recalled inside `prefetch` would make Hermes wait for); and `prefetch()` on a
  session's first turn, where nothing was warmed: it recalls its own question and waits at
  most `PALIMPSEST_HERMES_PREFETCH_WAIT` (0.3 s by default) — how long that takes, and in how
  many first turns memory arrived within the deadline.
- MCP: one `memory_recall` tool call through `pal mcp` over stdio with the official client
  versus the baseline, the same recall made directly on the service facade in-process.

Prints one JSON document; `--write-docs` rewrites this section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.mcp.live import pal_serve  # noqa: E402
from tests.mcp.world import PAL, build_world  # noqa: E402

from palimpsest.hermes import transport  # noqa: E402
from palimpsest.hermes.provider import PalimpsestMemoryProvider  # noqa: E402
from palimpsest.hermes.settings import load_direct  # noqa: E402
from palimpsest.service.memories import MemoryService  # noqa: E402

WORDS = [
    "acme", "globex", "initech", "umbrella", "renewal", "invoice", "contract", "office",
    "pricing", "support", "roadmap", "launch", "migration", "audit", "hiring", "budget",
]
DOCS = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- agent-surfaces:begin -->", "<!-- agent-surfaces:end -->"


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(p95 * 1000, 3),
        "n": len(ordered),
    }


def _fill(world: Any, count: int) -> None:
    with world.service() as svc:
        owner = svc.authenticate(world.owner_secret)
        for i in range(count):
            words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(6))
            svc.remember(owner, world.memory_id, {"type": "note", "content": f"{words} #{i}"})


def bench_hermes(url: str, world: Any, rounds: int, home: Path) -> dict[str, Any]:
    env = {
        "PALIMPSEST_HERMES_URL": url,
        "PALIMPSEST_HERMES_MEMORY": world.memory_id,
        "PALIMPSEST_HERMES_TOKEN": world.agents["agent"].secret,
    }
    settings = load_direct(env)
    baseline, consume, first = [], [], []
    answered = 0
    wait = settings.prefetch_wait
    for i in range(rounds):
        query = f"{WORDS[i % len(WORDS)]} {WORDS[(i + 3) % len(WORDS)]}"
        start = time.perf_counter()
        transport.recall(settings, query, settings.limit)
        baseline.append(time.perf_counter() - start)
        provider = PalimpsestMemoryProvider(plugin_dir=home, env=env)
        provider.initialize(f"s{i}", hermes_home=str(home), platform="cli")
        provider.queue_prefetch(query)
        provider.wait_idle()
        start = time.perf_counter()
        text = provider.prefetch(query)
        consume.append(time.perf_counter() - start)
        assert text, "the warmed recall found nothing"
        fresh = PalimpsestMemoryProvider(plugin_dir=home, env=env)
        fresh.initialize(f"first{i}", hermes_home=str(home), platform="cli")
        start = time.perf_counter()
        text = fresh.prefetch(query)  # nothing warmed: the session's first turn
        first.append(time.perf_counter() - start)
        answered += bool(text)
        fresh.wait_idle()
    return {
        "prefetch_first_turn": _ms(first),
        "first_turns_answered": answered,
        "prefetch_wait_s": wait,
        "prefetch_consume": _ms(consume),
        "baseline_sync_recall": _ms(baseline),
        "speedup_p50": round(statistics.median(baseline) / statistics.median(consume), 1),
    }


def bench_mcp(world: Any, rounds: int) -> dict[str, Any]:
    agent = world.agents["agent"]
    direct: list[float] = []
    with MemoryService(world.data_dir) as svc:
        caller = svc.authenticate(agent.secret)
        for i in range(rounds):
            body = {"text": f"{WORDS[i % len(WORDS)]} {WORDS[(i + 5) % len(WORDS)]}"}
            start = time.perf_counter()
            svc.recall(caller, world.memory_id, body)
            direct.append(time.perf_counter() - start)
    via_mcp: list[float] = []

    async def run() -> None:
        params = StdioServerParameters(
            command=PAL,
            args=[
                "mcp",
                "--data-dir",
                str(world.data_dir),
                "--credential-file",
                str(agent.credential_file),
            ],
            env={
                "HOME": os.environ.get("HOME", str(Path.home())),
                "PATH": os.environ.get("PATH", ""),
            },
        )
        async with Client(params) as client:
            await client.list_tools()
            for i in range(rounds):
                args = {
                    "memory": world.memory_id,
                    "text": f"{WORDS[i % len(WORDS)]} {WORDS[(i + 5) % len(WORDS)]}",
                }
                start = time.perf_counter()
                result = await client.call_tool("memory_recall", args)
                via_mcp.append(time.perf_counter() - start)
                assert result.is_error is False

    anyio.run(run)
    return {
        "mcp_stdio_recall": _ms(via_mcp),
        "baseline_facade_recall": _ms(direct),
        "overhead_p50_ms": round(
            (statistics.median(via_mcp) - statistics.median(direct)) * 1000, 3
        ),
    }


def write_docs(result: dict[str, Any]) -> None:
    h, m = result["hermes"], result["mcp"]
    section = "\n".join(
        [
            BEGIN,
            "## Agent integrations (bench/agent_surfaces.py)",
            "",
            f"{result['records']} records, {result['rounds']} rounds, one loaded 2-core machine; "
            "baselines measured in the same run.",
            "",
            "| measurement | p50 ms | p95 ms |",
            "|---|---|---|",
            f"| Hermes `prefetch()` consuming a warmed result | {h['prefetch_consume']['p50_ms']} "
            f"| {h['prefetch_consume']['p95_ms']} |",
            f"| Hermes `prefetch()` on a session's first turn (recalls its own question, waits "
            f"≤ {h['prefetch_wait_s']} s) | {h['prefetch_first_turn']['p50_ms']} "
            f"| {h['prefetch_first_turn']['p95_ms']} |",
            f"| baseline: synchronous recall round trip to `pal serve` "
            f"| {h['baseline_sync_recall']['p50_ms']} | {h['baseline_sync_recall']['p95_ms']} |",
            f"| MCP `memory_recall` over stdio (`pal mcp`) | {m['mcp_stdio_recall']['p50_ms']} "
            f"| {m['mcp_stdio_recall']['p95_ms']} |",
            f"| baseline: the same recall on the facade in-process "
            f"| {m['baseline_facade_recall']['p50_ms']} "
            f"| {m['baseline_facade_recall']['p95_ms']} |",
            "",
            f"`prefetch` is {h['speedup_p50']}× faster at the median than recalling inside it; MCP "
            f"adds {m['overhead_p50_ms']} ms at the median over the facade call. On a session's "
            f"first turn memory arrived within the {h['prefetch_wait_s']} s deadline in "
            f"{h['first_turns_answered']} of {result['rounds']} turns.",
            f"Run {result['machine']}.",
            END,
        ]
    )
    text = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    if BEGIN in text:
        text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), section, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOCS.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--write-docs", action="store_true")
    opts = parser.parse_args()
    started, load = time.strftime("%Y-%m-%d %H:%M", time.gmtime()), os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        world = build_world(root, {"agent": ["read"]})
        _fill(world, opts.records)
        with pal_serve(world.data_dir) as url:
            hermes = bench_hermes(url, world, opts.rounds, root / "hermes")
        result = {
            "records": opts.records + 2,
            "rounds": opts.rounds,
            "hermes": hermes,
            "mcp": bench_mcp(world, opts.rounds),
        }
    result["machine"] = (f"{started}–{time.strftime('%H:%M', time.gmtime())} UTC, load average "
                         f"{load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, "
                         f"{os.cpu_count()} cores")
    print(json.dumps(result, indent=2))
    if opts.write_docs:
        write_docs(result)


if __name__ == "__main__":
    main()
