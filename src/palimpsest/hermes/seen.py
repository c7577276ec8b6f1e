"""Per-session record of which recalled record ids were injected (ids only, never content).

Hermes keeps injected context in later history, so a record injected once in a session is not
injected again. The set is persisted under ``$HERMES_HOME/.palimpsest/hermes-seen.json`` so it
survives a restart; it is re-read before each use and written atomically (0600), so two Hermes
processes sharing a home merge rather than overwrite. A damaged file is treated as empty: the
worst outcome is a record shown twice, never a crash.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

FILE_VERSION = 1
MAX_SESSIONS = 512
MAX_IDS_PER_SESSION = 4096
MAX_FILE_BYTES = 8 * 1024 * 1024


def seen_path(hermes_home: Path) -> Path:
    """Where the injected-id sets live inside one Hermes home."""
    return hermes_home / ".palimpsest" / "hermes-seen.json"


class SeenStore:
    """The injected record ids of each Hermes session, persisted as JSON."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _load(self) -> dict[str, list[str]]:
        try:
            with self.path.open("rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
            if len(data) > MAX_FILE_BYTES:
                return {}
            doc: Any = json.loads(data.decode("utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(doc, dict) or doc.get("version") != FILE_VERSION:
            return {}
        sessions = doc.get("sessions")
        if not isinstance(sessions, dict):
            return {}
        result: dict[str, list[str]] = {}
        for key, ids in sessions.items():
            if isinstance(key, str) and isinstance(ids, list):
                result[key] = [item for item in ids if isinstance(item, str)]
        return result

    def _save(self, sessions: dict[str, list[str]]) -> None:
        directory = self.path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        body = json.dumps({"version": FILE_VERSION, "sessions": sessions}, separators=(",", ":"))
        handle, temp = tempfile.mkstemp(dir=directory, prefix=".seen-", suffix=".tmp")
        try:
            # no fsync: prefetch must stay fast, and a set lost in a crash only means a
            # record may be shown twice (a damaged file reads as empty)
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(body)
            os.chmod(temp, 0o600)
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def seen(self, session_id: str) -> set[str]:
        """The ids already injected in this session."""
        with self._lock:
            return set(self._load().get(session_id, []))

    def add(self, session_id: str, ids: list[str]) -> None:
        """Record ids as injected in this session (bounded; the oldest sessions and ids drop)."""
        if not ids:
            return
        with self._lock:
            sessions = self._load()
            current = sessions.pop(session_id, [])
            known = set(current)
            current.extend(item for item in ids if item not in known)
            sessions[session_id] = current[-MAX_IDS_PER_SESSION:]
            while len(sessions) > MAX_SESSIONS:
                sessions.pop(next(iter(sessions)))
            self._save(sessions)

    def clear(self, session_id: str) -> None:
        """Forget what was injected in this session (reset or rewind)."""
        with self._lock:
            sessions = self._load()
            if session_id in sessions:
                del sessions[session_id]
                self._save(sessions)
