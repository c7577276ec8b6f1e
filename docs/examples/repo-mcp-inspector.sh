#!/usr/bin/env bash
# The MCP Inspector's CLI against `pal mcp` in a repository with an identity and no service:
# the tool list without and with --allow-repo-writes, a write refused without the flag, Alice
# records and leaves a handoff, Bob's session recalls and primes it, and the prime tool's text
# equals `pal memory prime`. Run it in an empty directory:
#   npm install @modelcontextprotocol/inspector   # once, anywhere
#   INSPECTOR=/path/to/node_modules/.bin/mcp-inspector-cli bash repo-mcp-inspector.sh
set -euo pipefail
P=${PAL:-pal}; I=${INSPECTOR:-mcp-inspector-cli}
rm -rf demo && git init -q demo && cd demo && git commit -q --allow-empty -m base
ALICE=$($P id init --name "Alice Agent" --json | python3 -c 'import json,sys;print(json.load(sys.stdin)["actor"])')
$P id export > ../alice.json
BOB=$($P id init --name "Bob Agent" --json | python3 -c 'import json,sys;print(json.load(sys.stdin)["actor"])')
$P id export > ../bob.json
$P memory policy trust --actor "$ALICE" --actor "$BOB" --kind all >/dev/null; git add .hn && git commit -q -m policy
HEAD=$(git rev-parse HEAD)
$P id import ../alice.json >/dev/null
echo "== tools/list (no --allow-repo-writes)"
$I --cli $P mcp --method tools/list | python3 -c 'import json,sys;print([t["name"] for t in json.load(sys.stdin)["tools"]])'
echo "== repo_memory_record without the flag"
$I --cli $P mcp --method tools/call --tool-name repo_memory_record --tool-arg 'request={}' | python3 -c 'import json,sys;d=json.load(sys.stdin);print(d.get("isError"), d["content"][0]["text"])'
echo "== tools/list with --allow-repo-writes"
$I --cli $P mcp --allow-repo-writes --method tools/list | python3 -c 'import json,sys;print([t["name"] for t in json.load(sys.stdin)["tools"]])'
echo "== record, then handoff (Alice)"
REQ="{\"version\":0,\"kind\":\"decision\",\"content\":\"Dates are ISO 8601 only\",\"anchor\":{\"commit\":\"$HEAD\"},\"applicability\":{\"mode\":\"descendants\"},\"topics\":[\"parser\"],\"evidence\":[]}"
$I --cli $P mcp --allow-repo-writes --method tools/call --tool-name repo_memory_record --tool-arg "request=$REQ" | python3 -c 'import json,sys;d=json.load(sys.stdin);print(d.get("isError"), d["content"][0]["text"].split("\n")[2])'
HO='{"version":0,"kind":"handoff","content":"Parser half done","topics":["parser"],"evidence":[],"handoff":{"completed":["lexer"],"assumptions":["UTF-8 only"],"blockers":[],"nextActions":["write the date rule"]}}'
$I --cli $P mcp --allow-repo-writes --method tools/call --tool-name repo_memory_handoff --tool-arg "request=$HO" --tool-arg at=HEAD --tool-arg applies=descendants | python3 -c 'import json,sys;d=json.load(sys.stdin);print(d.get("isError"), d["content"][0]["text"].split("\n")[2])'
$P id import ../bob.json >/dev/null
echo "== Bob's session: recall and prime"
$I --cli $P mcp --method tools/call --tool-name repo_memory_recall --tool-arg 'kind=["handoff"]' | python3 -c 'import json,sys;d=json.load(sys.stdin);e=json.loads(d["content"][0]["text"].split("\n")[2]);print([(m["kind"],m["actor"][:12],m["data"]["content"]) for m in e["memories"]])'
$I --cli $P mcp --method tools/call --tool-name repo_memory_prime --tool-arg budget=3000 | python3 -c 'import json,sys;d=json.load(sys.stdin);t=d["content"][0]["text"];open("../prime-tool.txt","w").write(t+"\n");e=json.loads(t.split("\n")[2]);print([(s["label"],[m["data"]["content"] for m in s["memories"]]) for s in e["sections"]])'
$P memory prime --budget 3000 > ../prime-cli.txt
cmp ../prime-tool.txt ../prime-cli.txt && echo "prime: tool text == pal memory prime, byte for byte"
