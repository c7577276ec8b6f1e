"""Deliberate repository writes over MCP (`pal mcp --allow-repo-writes`) with the official MCP
client over stdio, in a repository with an identity and no service.

- every write is byte-identical to the same request made with the CLI's ``--input`` (the
  signed ``memory.json``, its ``signature`` and the command result), in two repositories built
  alike, with the signing clock fixed for both (tests/mcp/fixedclock);
- record → handoff → a second identity's session recalls and primes it;
- hostile requests (tests/adversarial/mcp_writes) are refused in the CLI's words before anything
  is appended, as the CLI refuses them; a raw invalid UTF-8 byte on the wire is refused too;
- a lost race answers "reload and retry".
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pygit2
import pytest

from mcp import Client, StdioServerParameters
from palimpsest.errors import Conflict
from palimpsest.hn import store
from palimpsest.hn.envelope import VerifiedMemory
from palimpsest.identity import Identity, export_document, identity_from_seed
from palimpsest.mcp import render
from palimpsest.mcp.handlers import HANDLERS, ToolEnv
from tests.hn.clirun import pal, refused
from tests.hn.recall_helpers import new_repo, remember

from .world import PAL

ALICE = identity_from_seed("Alice Agent", bytes(range(32)))
BOB = identity_from_seed("Bob Reviewer", bytes(range(32, 64)))
SIGNING_TIME = "2026-05-01T12:00:00Z"
FIXED_CLOCK = Path(__file__).with_name("fixedclock")
ADVERSARIAL = Path(__file__).parents[1] / "adversarial" / "mcp_writes"
READ_TOOLS = ["repo_memory_recall", "repo_memory_grep", "repo_memory_show", "repo_memory_prime"]
WRITE_TOOLS = ["repo_memory_record", "repo_memory_handoff", "repo_memory_supersede",
               "repo_memory_retract", "repo_memory_challenge"]


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(FIXED_CLOCK), os.environ.get("PYTHONPATH", "")) if p)
    return {"HOME": os.environ["HOME"], "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": path, "PAL_TEST_SIGNING_TIME": SIGNING_TIME}


def _activate(repo: Path, who: Identity, tmp: Path) -> None:
    document = tmp / f"{who.actor[:8]}.json"
    document.write_bytes(export_document(who))
    done = subprocess.run([PAL, "id", "--repo", str(repo), "import", str(document)],
                          capture_output=True, env=_env(), check=False, timeout=120)
    assert done.returncode == 0, done.stderr


def _repository(path: Path, tmp: Path) -> tuple[Path, str]:
    """A repository trusting Alice and Bob, with one signed decision of Bob's and Alice's
    identity active; built the same way twice, it is the same repository (commit IDs too)."""
    repo = new_repo(path, trusted=[ALICE, BOB])
    bobs = remember(repo, BOB, "Bob's decision", kind="decision",
                    timestamp="2026-04-01T00:00:00Z")
    _activate(path, ALICE, tmp)
    return path, bobs.memory_id


def _params(cwd: Path, *flags: str) -> StdioServerParameters:
    return StdioServerParameters(command=PAL, args=["mcp", *flags], env=_env(), cwd=str(cwd))


def _fenced(result: types.CallToolResult, blocks: int = 1) -> bytes:
    """The exact JSON of the first fenced block (recall and grep add a writers block)."""
    assert result.is_error is False, result.content
    assert len(result.content) == blocks
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    inner = block.text.split("<untrusted-data>\n", 1)[1].rsplit("\n</untrusted-data>", 1)[0]
    return inner.encode("utf-8") + b"\n"


def _error(result: types.CallToolResult) -> str:
    assert result.is_error is True, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def _cli(repo: Path, argv: list[str], document: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([PAL, "memory", "--repo", str(repo), *argv, "--input", "-", "--json"],
                          input=document, capture_output=True, env=_env(), check=False,
                          timeout=120)


def _snapshot(path: Path) -> tuple[dict[str, str], list[str]]:
    repo = pygit2.Repository(str(path))
    refs = {name: str(repo.references[name].target) for name in repo.references}
    objects = sorted(str(p.relative_to(path)) for p in (path / ".git" / "objects").rglob("*"))
    return refs, objects


def _stored(path: Path, memory_id: str) -> VerifiedMemory:
    (found,) = [m for m in store.collect(store.open_repository(path)) if m.memory_id == memory_id]
    return found


def _head(path: Path) -> str:
    return store.resolve_commit(store.open_repository(path), "HEAD")


def test_writes_are_byte_identical_to_the_cli(tmp_path: Path) -> None:
    by_cli, bobs = _repository(tmp_path / "cli", tmp_path)
    by_mcp, bobs_too = _repository(tmp_path / "mcp", tmp_path)
    head = _head(by_cli)
    assert (bobs, head) == (bobs_too, _head(by_mcp))
    decision = {"version": 0, "kind": "decision", "content": "Keep memory streams apart.",
                "anchor": {"commit": head}, "applicability": {"mode": "descendants"},
                "topics": ["Architecture"], "evidence": [f"git:{head}"]}
    handoff = json.dumps({"version": 0, "kind": "handoff", "content": "Parser half done",
                          "topics": [], "evidence": [],
                          "handoff": {"completed": ["lexer"], "assumptions": ["UTF-8 only"],
                                      "blockers": ["no grammar for dates"],
                                      "nextActions": ["write the date rule"]}})

    async def run() -> list[tuple[bytes, bytes]]:
        answers: list[tuple[bytes, bytes]] = []
        async with Client(_params(by_mcp, "--allow-repo-writes")) as client:
            assert client.instructions is not None
            assert "repository memory only" in client.instructions
            assert "Writes are on" in client.instructions
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == READ_TOOLS + WRITE_TOOLS

            async def both(tool: str, argv: list[str], args: dict[str, Any],
                           document: bytes) -> dict[str, Any]:
                mcp_out = _fenced(await client.call_tool(tool, args))
                cli = _cli(by_cli, argv, document)
                assert cli.returncode == 0, cli.stderr
                answers.append((mcp_out, cli.stdout))
                result: dict[str, Any] = json.loads(cli.stdout)
                return result

            first = await both("repo_memory_record", ["record"], {"request": decision},
                               json.dumps(decision).encode())
            await both("repo_memory_handoff",
                       ["handoff", "--at", "HEAD", "--applies", "descendants"],
                       {"request": handoff, "at": "HEAD", "applies": "descendants"},
                       handoff.encode())
            replacement = {**decision, "content": "Keep memory streams apart; never merge."}
            second = await both("repo_memory_supersede", ["supersede", first["memoryId"]],
                                {"target": first["memoryId"], "request": replacement},
                                json.dumps(replacement).encode())
            retraction = {"version": 0, "reason": " Incorrect "}
            await both("repo_memory_retract", ["retract", second["memoryId"]],
                       {"target": second["memoryId"], "request": retraction},
                       json.dumps(retraction).encode())
            challenge = {"version": 0, "reason": "evidence-mismatch",
                         "evidence": [f"git:{head}"]}
            await both("repo_memory_challenge", ["challenge", bobs],
                       {"target": bobs, "request": challenge}, json.dumps(challenge).encode())
        return answers

    answers = anyio.run(run)
    assert len(answers) == 5
    for mcp_out, cli_out in answers:
        assert mcp_out == cli_out  # the command result, byte for byte
        memory_id = json.loads(cli_out)["memoryId"]
        a, b = _stored(by_cli, memory_id), _stored(by_mcp, memory_id)
        assert a.payload == b.payload  # memory.json
        assert a.signature == b.signature  # signature
        assert a.envelope.actor == ALICE.actor
        assert a.envelope.timestamp == SIGNING_TIME
    operations = [_stored(by_mcp, json.loads(c)["memoryId"]).envelope.operation
                  for _, c in answers]
    assert operations == ["record", "record", "supersede", "retract", "challenge"]


def test_record_handoff_then_a_second_identity_recalls_and_primes_it(tmp_path: Path) -> None:
    path, _ = _repository(tmp_path / "repo", tmp_path)
    head = _head(path)
    handoff = {"version": 0, "kind": "handoff", "content": "Stopped halfway through the parser",
               "anchor": {"commit": head}, "applicability": {"mode": "descendants"},
               "topics": ["parser"], "evidence": [],
               "handoff": {"completed": ["lexer"], "assumptions": [], "blockers": [],
                           "nextActions": ["write the date rule"]}}
    decision = {**handoff, "kind": "decision", "content": "Dates are ISO 8601 only"}
    del decision["handoff"]

    async def alice() -> str:
        async with Client(_params(path, "--allow-repo-writes")) as client:
            _fenced(await client.call_tool("repo_memory_record", {"request": decision}))
            made = _fenced(await client.call_tool("repo_memory_handoff",
                                                  {"request": handoff, "at": "HEAD"}))
            memory_id: str = json.loads(made)["memoryId"]
            return memory_id

    made = anyio.run(alice)
    _activate(path, BOB, tmp_path)  # the next session is another agent's

    async def bob() -> tuple[bytes, str]:
        async with Client(_params(path)) as client:
            assert client.instructions is not None and "Writes are off" in client.instructions
            assert [t.name for t in (await client.list_tools()).tools] == READ_TOOLS
            found = json.loads(_fenced(await client.call_tool(
                "repo_memory_recall", {"kind": ["handoff"], "query": "parser"}), blocks=2))
            assert [m["id"] for m in found["memories"]] == [made]
            assert found["memories"][0]["actor"] == ALICE.actor
            primed = await client.call_tool("repo_memory_prime", {"budget": 4000})
            block = primed.content[0]
            assert isinstance(block, types.TextContent)
            return _fenced(primed), block.text

    document, text = anyio.run(bob)
    doc = json.loads(document)
    handoffs, decisions, _ = doc["sections"]
    assert [m["id"] for m in handoffs["memories"]] == [made]
    assert handoffs["memories"][0]["data"]["handoff"]["nextActions"] == ["write the date rule"]
    assert [m["data"]["content"] for m in decisions["memories"]] == [
        "Dates are ISO 8601 only", "Bob's decision"]
    cli = subprocess.run([PAL, "memory", "--repo", str(path), "prime", "--budget", "4000"],
                         capture_output=True, env=_env(), check=False, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout == (text + "\n").encode()  # the tool's text is the CLI's, byte for byte
    as_json = subprocess.run(
        [PAL, "memory", "--repo", str(path), "prime", "--budget", "4000", "--json"],
        capture_output=True, env=_env(), check=False, timeout=120)
    assert as_json.stdout == document


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((ADVERSARIAL / "cases.json").read_text("utf-8"))
    return cases


def _fill(value: Any, slots: dict[str, str]) -> Any:
    if isinstance(value, str):
        for key, text in slots.items():
            value = value.replace(key, text)
        return value
    if isinstance(value, list):
        return [_fill(v, slots) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, slots) for k, v in value.items()}
    return value


def test_hostile_requests_are_refused_before_anything_is_appended(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    path, bobs = _repository(tmp_path / "repo", tmp_path)
    mine = remember(store.open_repository(path), ALICE, "Alice's decision", kind="decision")
    head = _head(path)
    big = json.dumps({"version": 0, "kind": "decision", "content": "x" * (1 << 20),
                      "anchor": {"commit": head}, "applicability": {"mode": "exact"},
                      "topics": [], "evidence": []})
    slots = {"$HEAD": head, "$ALICE_MEMORY": mine.memory_id, "$BOB_MEMORY": bobs,
             "$BOB_ACTOR": BOB.actor, "$CONTENT_OVER_BOUND": "x" * 65537,
             "$INPUT_OVER_BOUND": big}
    cases = _fill(_cases(), slots)
    assert len(cases) >= 15
    before = _snapshot(path)

    async def run() -> list[str]:
        texts = []
        async with Client(_params(path, "--allow-repo-writes")) as client:
            for case in cases:
                texts.append(_error(await client.call_tool(case["tool"], case["arguments"])))
        return texts

    texts = anyio.run(run)
    for case, text in zip(cases, texts, strict=True):
        assert case["refusal"] in text, (case["name"], text)
        assert "Memory content" not in text  # a refusal never echoes the request
    assert _snapshot(path) == before
    for case in cases:  # the same documents through the CLI: refused in the same words
        if case["cli"] is None:
            continue
        request = case["arguments"]["request"]
        document = request.encode("utf-8", "surrogatepass") if isinstance(request, str) \
            else json.dumps(request).encode()
        # in-process (the refusal comes before any clock is read): `pal memory … --input -`
        done = pal(capsysbinary, "memory", "--repo", str(path), *case["cli"], "--input", "-",
                   "--json", stdin=document)
        assert case["refusal"] in refused(done), (case["name"], done.err)
    assert _snapshot(path) == before


def _rpc(proc: subprocess.Popen[bytes], line: bytes) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line)
    proc.stdin.flush()


def _answer(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert proc.stdout is not None
    answer: dict[str, Any] = json.loads(proc.stdout.readline())
    return answer


def test_raw_invalid_utf8_on_the_wire_is_refused_not_replaced(tmp_path: Path) -> None:
    path, _ = _repository(tmp_path / "repo", tmp_path)
    before = _snapshot(path)
    raw = (ADVERSARIAL / "raw-invalid-utf8.jsonl").read_bytes()
    raw = raw.replace(b"$HEAD", _head(path).encode())
    assert b"\xff" in raw
    proc = subprocess.Popen([PAL, "mcp", "--allow-repo-writes"], cwd=path, env=_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "raw", "version": "0"}}}
        _rpc(proc, json.dumps(hello).encode() + b"\n")
        assert _answer(proc)["id"] == 1
        _rpc(proc, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        _rpc(proc, raw)  # refused: no answer, nothing written
        _rpc(proc, b'{"jsonrpc":"2.0","id":8,"method":"tools/list"}\n')
        listed = _answer(proc)
        assert listed["id"] == 8  # the bad line got no answer; the server is still serving
        assert "repo_memory_record" in [t["name"] for t in listed["result"]["tools"]]
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(60)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert _snapshot(path) == before


def test_a_lost_race_answers_reload_and_retry(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = _repository(tmp_path / "repo", tmp_path)
    repo_dir = str(store.git_dir(store.open_repository(path)))
    real: Callable[..., Any] = store.append_memory

    def racing(repo: pygit2.Repository, *args: Any) -> Any:
        # another session of the same actor appends to the stream first
        monkeypatch.setattr(store, "append_memory", real)
        remember(repo, ALICE, "the other session won")
        return real(repo, *args)

    monkeypatch.setattr(store, "append_memory", racing)
    env = ToolEnv(None, None, repo=repo_dir, repo_writes=True)
    request = {"version": 0, "kind": "observation", "content": "mine",
               "anchor": {"commit": _head(path)}, "applicability": {"mode": "exact"},
               "topics": [], "evidence": []}
    with pytest.raises(Conflict) as lost:
        HANDLERS["repo_memory_record"](env, {"request": request})
    assert "reload and retry" in render.error_text(lost.value)
    contents = [m.envelope.record.content for m in store.collect(store.open_repository(path))
                if m.envelope.record is not None]
    assert "mine" not in contents and "the other session won" in contents
