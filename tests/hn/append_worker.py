"""A separate process that races to append to one stream (used by test_concurrency).

Usage: python append_worker.py REPO GO_FILE ATTEMPTS LABEL
Waits until GO_FILE exists, then tries ATTEMPTS appends without retrying, printing one JSON line
per attempt: {"landed": memory_id} or {"conflict": message}.
"""

from __future__ import annotations

import json
import os
import sys
import time

from palimpsest.errors import Conflict
from palimpsest.hn import store
from palimpsest.hn.author import append, build_record
from palimpsest.hn.envelope import Anchor
from palimpsest.identity import load_identity


def main() -> None:
    repo_path, go_file, attempts, label = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    repo = store.open_repository(repo_path)
    identity = load_identity(store.git_dir(repo))
    head = store.resolve_commit(repo, "HEAD")
    while not os.path.exists(go_file):
        time.sleep(0.001)
    for i in range(attempts):
        record = build_record(
            kind="observation", content=f"{label}-{i}", anchor=Anchor(head), applies="exact"
        )
        try:
            memory = append(repo, identity, operation="record", record=record)
        except Conflict as exc:
            print(json.dumps({"conflict": str(exc)}), flush=True)
        else:
            print(json.dumps({"landed": memory.memory_id}), flush=True)


if __name__ == "__main__":
    main()
