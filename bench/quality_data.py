"""Benchmark data for bench/quality.py: LoCoMo and LongMemEval_S loaders, split and metrics.

Pure functions over the files in ../shared/bench/ (read-only). No ranking happens here.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

KS = (1, 3, 5, 10)


def is_dev(question_id: str) -> bool:
    """The issue's split: last hex digit of sha256(id) even → development set."""
    return int(hashlib.sha256(question_id.encode()).hexdigest()[-1], 16) % 2 == 0


@dataclass(frozen=True, slots=True)
class Doc:
    """One unit an agent harness would store: a conversation turn."""

    key: str  # LoCoMo dia_id "D3:7"; LongMemEval "<session_id>_<1-based turn index>"
    session: str
    text: str  # the text the harness stores (and the BM25 baseline indexes)
    role: str  # user | assistant
    speaker: str | None
    when: str  # ISO 8601 UTC of the session


@dataclass(frozen=True, slots=True)
class Question:
    """One question with its gold evidence (turn keys and session ids)."""

    id: str
    text: str
    category: str
    gold_turns: frozenset[str]
    gold_sessions: frozenset[str]
    when: str | None = None
    extra: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Corpus:
    """One haystack (a LoCoMo conversation or a LongMemEval question's sessions)."""

    name: str
    docs: tuple[Doc, ...]
    questions: tuple[Question, ...]


# --- LoCoMo ------------------------------------------------------------------------------------
_LOCOMO_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m) on (\d{1,2}) (\w+),? (\d{4})", re.I)


def _locomo_when(text: str) -> str:
    m = _LOCOMO_DATE.search(text)
    if not m:
        return "2023-01-01T00:00:00Z"
    hour, minute, ampm, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    parsed = datetime.strptime(f"{day} {month} {year}", "%d %B %Y")
    return f"{parsed:%Y-%m-%d}T{h:02d}:{int(minute):02d}:00Z"


def _evidence_ids(raw: Iterable[str], known: set[str]) -> set[str]:
    out: set[str] = set()
    for item in raw:
        for part in re.split(r"[;,\s]+", item):
            m = re.fullmatch(r"D:?(\d+):0*(\d+)", part.strip())
            if m and f"D{m.group(1)}:{m.group(2)}" in known:
                out.add(f"D{m.group(1)}:{m.group(2)}")
    return out


def locomo(path: Path) -> list[Corpus]:
    """Ten conversations; each turn is ``"<speaker>: <text> [image: <caption>]"``."""
    corpora: list[Corpus] = []
    for conv in json.loads(path.read_text(encoding="utf-8")):
        c = conv["conversation"]
        docs: list[Doc] = []
        n = 1
        while f"session_{n}" in c:
            when = _locomo_when(c.get(f"session_{n}_date_time", ""))
            for turn in c[f"session_{n}"]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [image: {turn['blip_caption']}]"
                docs.append(Doc(turn["dia_id"], f"S{n}", text, "user", turn["speaker"], when))
            n += 1
        known = {d.key for d in docs}
        session_of = {d.key: d.session for d in docs}
        questions: list[Question] = []
        for index, qa in enumerate(conv["qa"]):
            gold = _evidence_ids(qa.get("evidence", []), known)
            if not gold:
                continue  # 4 category-3 questions have no usable evidence
            questions.append(
                Question(
                    id=f"{conv['sample_id']}#{index}",
                    text=qa["question"],
                    category=str(qa["category"]),
                    gold_turns=frozenset(gold),
                    gold_sessions=frozenset(session_of[g] for g in gold),
                )
            )
        corpora.append(Corpus(conv["sample_id"], tuple(docs), tuple(questions)))
    return corpora


# --- LongMemEval_S -----------------------------------------------------------------------------
def _lme_when(text: str) -> str:
    parsed = datetime.strptime(text[:10] + text[-6:], "%Y/%m/%d %H:%M")
    return f"{parsed:%Y-%m-%dT%H:%M}:00Z"


def lme_questions(folder: Path) -> list[dict[str, object]]:
    """The 498 question lines (no session text)."""
    lines = (folder / "longmemeval_s_cleaned.questions.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in lines.splitlines() if line.strip()]


def lme_sessions(folder: Path, wanted: set[str]) -> dict[str, list[dict[str, object]]]:
    """Turns of the wanted session ids (the whole file is 207 MB once decompressed)."""
    out: dict[str, list[dict[str, object]]] = {}
    with lzma.open(folder / "longmemeval_s_cleaned.sessions.jsonl.xz", "rt", encoding="utf-8") as f:
        for line in f:
            # {"session_id": "…", "turns": …}: read the id without parsing the turns.
            sid = line[len('{"session_id": "') : line.index('"', len('{"session_id": "'))]
            if sid in wanted:
                out[sid] = json.loads(line)["turns"]
    return out


def lme_corpora(folder: Path, questions: Sequence[dict[str, object]]) -> Iterator[Corpus]:
    """One corpus per question: its haystack's user and assistant turns, in time order."""
    wanted = {s for q in questions for s in q["haystack_session_ids"]}  # type: ignore[attr-defined]
    sessions = lme_sessions(folder, wanted)
    for q in questions:
        docs: list[Doc] = []
        gold_turns: set[str] = set()
        seen: set[str] = set()
        for sid, date in zip(q["haystack_session_ids"], q["haystack_dates"], strict=True):  # type: ignore[call-overload]
            if sid in seen:
                continue  # a few haystacks list a session twice
            seen.add(sid)
            when = _lme_when(date)
            for index, turn in enumerate(sessions[sid], start=1):
                key = f"{sid}_{index}"
                docs.append(Doc(key, sid, str(turn["content"]), str(turn["role"]), None, when))
                if turn.get("has_answer") and turn["role"] == "user":
                    gold_turns.add(key)
        qid = str(q["question_id"])
        official_sessions = frozenset(k.rsplit("_", 1)[0] for k in gold_turns)
        question = Question(
            id=qid,
            text=str(q["question"]),
            category=str(q["question_type"]),
            gold_turns=frozenset(gold_turns),
            gold_sessions=official_sessions,
            when=_lme_when(str(q["question_date"])),
            extra={"answer_sessions": frozenset(q["answer_session_ids"]),  # type: ignore[arg-type]
                   "abstention": qid.endswith("_abs")},
        )
        yield Corpus(qid, tuple(docs), (question,))


# --- metrics (the upstream LongMemEval definitions, reused for LoCoMo) --------------------------
def _dcg(relevances: Sequence[int], k: int) -> float:
    rel = list(relevances)[:k]
    if not rel:
        return 0.0
    return rel[0] + sum(r / math.log2(i) for i, r in enumerate(rel[1:], start=2))


def ndcg(ranking: Sequence[str], gold: frozenset[str], n_docs: int, k: int) -> float:
    """Binary nDCG@k as upstream ``eval_utils.ndcg`` (ideal = all gold first)."""
    ideal = _dcg([1] * min(len(gold), n_docs), k)
    if ideal == 0:
        return 0.0
    return _dcg([1 if d in gold else 0 for d in ranking[:k]], k) / ideal


def scores(ranking: Sequence[str], gold: frozenset[str], n_docs: int) -> dict[str, float]:
    """recall_any@k, recall_all@k, ndcg_any@k for k in :data:`KS` and 30, 50."""
    out: dict[str, float] = {}
    for k in (*KS, 30, 50):
        top = set(ranking[:k])
        out[f"recall_any@{k}"] = float(any(g in top for g in gold))
        out[f"recall_all@{k}"] = float(all(g in top for g in gold))
        out[f"ndcg_any@{k}"] = ndcg(ranking, gold, n_docs, k)
    return out


def sessions_of(turn_ranking: Sequence[str], session_of: dict[str, str]) -> list[str]:
    """Session ranking from a turn ranking: distinct sessions in first-seen order.

    Equivalent to upstream's "widen k until k distinct sessions are covered".
    """
    seen: dict[str, None] = {}
    for key in turn_ranking:
        seen.setdefault(session_of[key], None)
    return list(seen)


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean, 0.0 for nothing."""
    items = list(values)
    return sum(items) / len(items) if items else 0.0


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]
