"""Benchmark stores of signed repository memory over a realistic code history.

``store_at(count, workdir)`` returns a repository with ``count`` memories by four actors (three
trusted by the policy), generated once and reused when ``--keep`` left a complete one there.

The code history is what an agent's repository looks like: a main line of one commit per
hundred memories (at least 20), each changing one of 50 files, and a side branch of 20 commits
off its middle that is never merged.  Memories are written as history advances, each anchored
at the commit of its time (3 % on the side branch, which HEAD never reaches): 92 % apply to
``descendants``, 4 % are ``exact`` and 4 % apply to a typed ``subject`` (one of eight; 6 % of
the descendants records also carry one), 30 % anchor one or two of the files present at their
commit with the exact blob, about 5 % supersede and 2 % retract one of their author's records.
Contents are 15–80 words of a Zipf-like 5,000-word vocabulary with 1–3 of 50 topics.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path
from typing import Any

import pygit2

from palimpsest.hn import store
from palimpsest.hn.envelope import (
    PROTOCOL,
    Anchor,
    Applicability,
    Envelope,
    Handoff,
    PathAnchor,
    Record,
    default_stream,
    encode_envelope,
    memory_id,
    sign_text,
)
from palimpsest.identity import Identity, identity_from_seed

GENERATOR = 2  # bump when the stores change shape (kept stores of another version are rebuilt)
ACTORS = [
    identity_from_seed(name, bytes(range(start, start + 32)))
    for name, start in (("Alice Agent", 0), ("Bob Agent", 32), ("Carol Agent", 64),
                        ("Dave Agent", 96))
]  # fmt: skip
KINDS = ["observation", "decision", "verification", "attempt", "handoff", "assumption"]
_REAL_WORDS = " ".join(
    (
        "stream isolation index recall verify signature policy anchor commit handoff decision",
        "memory replication quarantine cursor bound topic lexical regex grep evidence lifecycle",
        "supersede retract challenge trust qualified actor kind projection applicability",
        "descendant exact subject path blob tree ref promote fetch sync shallow budget token",
        "digest fingerprint deterministic inert warning escape unicode 東京 café résumé",
    )
).split(" ")
_SYLLABLES = [a + b for a in "kmnrstvpdzfbg" for b in "aeiou"][:20]
# A Zipf-like vocabulary of 5,000 words: synthetic words plus the real ones spread over ranks
# 40..2,000, so query terms are as selective as in real notes (not all in half the records).
WORDS = [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES][:5000]
for _rank, _word in enumerate(_REAL_WORDS):
    WORDS[40 + _rank * 37] = _word
WEIGHTS = [1.0 / (rank + 10) for rank in range(len(WORDS))]
TOPICS = [f"topic-{i:02d}" for i in range(50)]
FILES = [f"src/mod-{i:02d}.py" for i in range(50)]
SUBJECTS = [f"issue:sha256:{i:064x}" for i in range(1, 9)]
STORE_MARKER = "bench-store.json"  # written once a generated store is complete


def policy_bytes() -> bytes:
    """The policy on every commit: three of the four actors and every kind are trusted."""
    return json.dumps({
        "version": "hn.policy/0", "maintainers": [ACTORS[0].actor],
        "proposals": {"requiredApprovals": 0, "requiredAccepts": 1, "trustedReviewers": [],
                      "allowAuthorApproval": False},
        "pipelines": {},
        "memory": {"trustedActors": sorted(a.actor for a in ACTORS[:3]),
                   "trustedKinds": sorted(KINDS)},
    }).encode()  # fmt: skip


_WHO = pygit2.Signature("Bench", "bench@hn.invalid", 1_700_000_000, 0)


def code_commit(repo: pygit2.Repository, parent: str | None, files: dict[str, bytes]) -> str:
    """A commit with ``files`` changed on top of ``parent`` (no ref moves)."""
    index = pygit2.Index()
    if parent is not None:
        index.read_tree(repo[pygit2.Oid(hex=parent)].tree)  # type: ignore[attr-defined]
    for path, data in files.items():
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.enums.FileMode.BLOB))
    parents = [pygit2.Oid(hex=parent)] if parent is not None else []
    return str(repo.create_commit(None, _WHO, _WHO, "code", index.write_tree(repo), parents))


def advance(repo: pygit2.Repository, note: str) -> str:
    """One code commit on top of HEAD (``NOTES.md`` changed) with HEAD's branch moved to it, as
    an agent's commit does; returns its ID."""
    head = str(repo.head.target)
    commit = code_commit(repo, head, {"NOTES.md": note.encode()})
    repo.references.create(repo.head.name, pygit2.Oid(hex=commit), force=True)
    return commit


def main_line(repo: pygit2.Repository, head: str) -> list[str]:
    """The first-parent history of ``head``, oldest first."""
    out = []
    commit: Any = repo[pygit2.Oid(hex=head)]
    while True:
        out.append(str(commit.id))
        if not commit.parents:
            return out[::-1]
        commit = commit.parents[0]


class History:
    """The code history memories are anchored at: the main line (``main``, oldest first, its
    last commit is HEAD) and a side branch HEAD never reaches (``side``)."""

    def __init__(self, repo: pygit2.Repository, commits: int, rng: random.Random) -> None:
        self.repo = repo
        self.blobs: dict[str, dict[str, str]] = {}  # commit -> path -> blob
        files = {"README.md": b"bench\n", ".hn/policy.json": policy_bytes()}
        files.update({path: f"# {path} v0\n".encode() for path in FILES})
        self.main = [self._commit(None, files)]
        for n in range(1, commits):
            path = rng.choice(FILES)
            self.main.append(self._commit(self.main[-1], {path: f"# {path} v{n}\n".encode()}))
        self.side = [self.main[len(self.main) // 2]]
        for n in range(20):
            path = rng.choice(FILES)
            self.side.append(self._commit(self.side[-1], {path: f"# side {n}\n".encode()}))
        self.side = self.side[1:]
        repo.references.create("refs/heads/main", pygit2.Oid(hex=self.main[-1]), force=True)
        repo.references.create("refs/heads/side", pygit2.Oid(hex=self.side[-1]), force=True)
        repo.set_head("refs/heads/main")

    def _commit(self, parent: str | None, files: dict[str, bytes]) -> str:
        commit = code_commit(self.repo, parent, files)
        tree = self.repo[pygit2.Oid(hex=commit)].tree  # type: ignore[attr-defined]
        self.blobs[commit] = {p: str(tree[p].id) for p in FILES}
        return commit


class Writer:
    """Appends signed memories through the core writer, tracking stream heads in memory.

    In ``bulk`` mode the objects are written with ``store.write_memory_objects`` and each
    stream's ref is moved with one compare-and-swap per :meth:`flush` (generation speed only;
    the append rate is measured in the normal mode, one CAS per memory).
    """

    def __init__(self, repo: pygit2.Repository, history: History | None, head: str) -> None:
        self.repo = repo
        self.history = history
        self.head = head
        self.bulk = False
        self.flushed: dict[str, str | None] = {}
        self.heads: dict[str, store.StreamHead] = {}
        self.records: dict[str, list[str]] = {a.actor: [] for a in ACTORS}
        self.clock = 0

    def _anchor(self, position: float, rng: random.Random) -> tuple[Anchor, Applicability]:
        history = self.history
        if history is None:  # a store reused from an earlier run: anchor at HEAD
            return Anchor(self.head), Applicability("descendants")
        roll = rng.random()
        if roll < 0.03:
            commit = rng.choice(history.side)
        else:
            commit = history.main[min(len(history.main) - 1, int(position * len(history.main)))]
        subject = rng.choice(SUBJECTS) if rng.random() < 0.10 else ""
        mode = "descendants"
        if subject and rng.random() < 0.4:
            mode = "subject"
        elif rng.random() < 0.04:
            mode = "exact"
        paths: tuple[PathAnchor, ...] = ()
        if rng.random() < 0.3:
            blobs = history.blobs[commit]
            chosen = sorted(rng.sample(FILES, rng.randint(1, 2)))
            paths = tuple(PathAnchor(p, blobs[p]) for p in chosen)
        return Anchor(commit, paths, subject), Applicability(mode, subject if mode == "subject"
                                                             else "")  # fmt: skip

    def append(self, who: Identity, rng: random.Random, position: float = 1.0) -> str:
        """One memory by ``who`` at ``position`` (0..1) of the history."""
        self.clock += 1
        stamp = f"2026-09-{1 + self.clock // 86400:02d}T{self.clock // 3600 % 24:02d}:"
        stamp += f"{self.clock // 60 % 60:02d}:{self.clock % 60:02d}Z"
        stream = default_stream(who.actor)
        head = self.heads.get(who.actor) or store.stream_head(self.repo, who.actor, stream)
        own = self.records[who.actor]
        roll = rng.random()
        target, reason, operation, record = "", "", "record", None
        if own and roll < 0.02:
            operation, target, reason = "retract", own.pop(rng.randrange(len(own))), "incorrect"
        else:
            if own and roll < 0.07:
                operation, target = "supersede", own.pop(rng.randrange(len(own)))
            kind = rng.choice(KINDS)
            words = rng.choices(WORDS, weights=WEIGHTS, k=rng.randint(15, 80))
            anchor, applicability = self._anchor(position, rng)
            record = Record(
                kind=kind,
                content=" ".join(words),
                anchor=anchor,
                applicability=applicability,
                topics=tuple(sorted(set(rng.sample(TOPICS, rng.randint(1, 3))))),
                evidence=(f"git:{anchor.commit}",) if kind == "verification" else (),
                attempt_outcome="failed" if kind == "attempt" else "",
                handoff=Handoff(next_actions=(" ".join(words[:6]),)) if kind == "handoff" else None,
            )
        envelope = Envelope(
            protocol=PROTOCOL, operation=operation, actor=who.actor, actor_name=who.name,
            public_key=who.public_key_text, stream=stream, sequence=head.sequence,
            timestamp=stamp, previous=head.previous, record=record, target=target, reason=reason,
        )  # fmt: skip
        payload = encode_envelope(envelope)
        signature = who.sign(payload)
        if self.bulk:
            self.flushed.setdefault(head.ref, head.head)
            commit = store.write_memory_objects(
                self.repo, payload, sign_text(signature), author=who.name, actor=who.actor,
                timestamp=stamp, parent=head.head,
            )  # fmt: skip
        else:
            commit = store.append_memory(self.repo, payload, sign_text(signature), envelope, head)
        mid = memory_id(payload)
        self.heads[who.actor] = store.StreamHead(head.ref, commit, head.sequence + 1, mid)
        if record is not None:
            own.append(mid)
        return mid

    def flush(self) -> None:
        """Move every stream ref written in bulk mode to its newest commit (one CAS each)."""
        for ref, old in self.flushed.items():
            new = next(h.head for h in self.heads.values() if h.ref == ref)
            if new is not None:
                store.compare_and_swap(self.repo, ref, new, old)
        self.flushed = {}


def generate(count: int, path: Path) -> tuple[pygit2.Repository, Writer, dict[str, Any]]:
    """Generate a store of ``count`` memories at ``path``; return it and the generation stats."""
    rng = random.Random(count)
    repo = pygit2.init_repository(str(path), initial_head="main")
    start = time.perf_counter()
    history = History(repo, max(20, count // 100), rng)
    history_s = time.perf_counter() - start
    writer = Writer(repo, history, history.main[-1])
    measured = min(count, 1000)
    start = time.perf_counter()
    for i in range(measured):
        writer.append(ACTORS[rng.randrange(len(ACTORS))], rng, i / count)
    append_rate = measured / (time.perf_counter() - start)
    writer.bulk = True
    start = time.perf_counter()
    for i in range(measured, count):
        writer.append(ACTORS[rng.randrange(len(ACTORS))], rng, i / count)
        if i % 5000 == 4999:
            writer.flush()
    writer.flush()
    writer.bulk = False
    stats = {
        "generator": GENERATOR,
        "memories": count,
        "head": history.main[-1],
        "middle": history.main[len(history.main) // 2],
        "main_commits": len(history.main),
        "side_commits": len(history.side),
        "append_per_s": round(append_rate, 1),
        "append_measured_over": measured,
        "history_s": round(history_s, 1),
        "bulk_generation_s": round(time.perf_counter() - start, 1),
    }
    return repo, writer, stats


def store_at(count: int, workdir: Path) -> tuple[pygit2.Repository, Writer, dict[str, Any]]:
    """The store of ``count`` memories under ``workdir``: reused when a complete one of this
    generator is there (its append rate is the one measured when it was generated)."""
    path = workdir / f"store-{count}"
    marker = path / STORE_MARKER
    if marker.exists():
        stats = json.loads(marker.read_text())
        if stats.get("generator") == GENERATOR:
            repo = store.open_repository(path)
            return repo, Writer(repo, None, str(stats["head"])), {**stats, "reused": True}
    if path.exists():
        shutil.rmtree(path)  # an interrupted generation or another generator's store
    repo, writer, stats = generate(count, path)
    marker.write_text(json.dumps(stats) + "\n")
    return repo, writer, stats


__all__ = [
    "ACTORS", "FILES", "SUBJECTS", "TOPICS", "Writer", "advance", "code_commit", "main_line",
    "store_at",
]  # fmt: skip
