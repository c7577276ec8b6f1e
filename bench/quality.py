r"""Recall quality on LoCoMo and LongMemEval_S, against a same-run BM25 baseline. No LLM, CPU only.

    .venv/bin/python bench/quality.py [--bench locomo|lme|all] [--limit N]
                                      [--split dev|held|both|all] [--out FILE]
                                      [--no-perturb] [--no-upstream]
    .venv/bin/python bench/quality.py --write-docs RESULT.json [RESULT.json ...]

- Ours: every benchmark user gets a fresh data directory; its turns are written as ``episode``
  records through :class:`palimpsest.service.memories.MemoryService` as an agent harness would
  (text, role, speaker, ``session_id`` as the Hermes provider writes it, and the session time)
  and every question is one ``recall`` call. There is no other index.
- Two baselines in the same run, both ``rank_bm25.BM25Okapi`` defaults over the same texts:
  ``bm25`` splits on single spaces (the upstream LongMemEval scripts), ``bm25_words`` takes
  lower-cased ``\w+`` words (the stronger simple baseline).
- LongMemEval's official protocol runs twice: as the bench stores a conversation (user and
  assistant turns written, user turns asked for with a filter) and exactly as upstream (only
  the user turns are written at all).
- Every question is also asked perturbed (bench/quality_perturb.py: lower-case, no
  punctuation, a filler preamble, one typo, all four) for the perturbation table.

Prints one JSON document; ``--write-docs`` also rewrites the quality section of
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from quality_data import (
    KS,
    Corpus,
    Doc,
    Question,
    is_dev,
    lme_corpora,
    lme_questions,
    locomo,
    mean,
    percentile,
    scores,
    sessions_of,
)
from quality_perturb import PERTURBATIONS

from palimpsest.errors import PalError

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PAL_SHARED", ROOT.parent / "shared")).resolve()
RESULTS = ROOT / "bench" / "results"
CHUNK = 12_000  # characters per episode: within the service's 64 KiB text part and op limits

# (query, question, role, unit) → keys best first; unit "session" returns session ids.
Searcher = Callable[[str, Question, str | None, str], list[str]]


def _sessions_from_turns(turns: Searcher, corpus: Corpus) -> Searcher:
    """Our engine ranks turns; a session ranking is the distinct sessions of that ranking."""
    session_of = {d.key: d.session for d in corpus.docs}
    last: dict[tuple[str, str | None], list[str]] = {}

    def search(query: str, question: Question, role: str | None, unit: str) -> list[str]:
        if unit == "limit10":
            return turns(query, question, role, unit)
        if unit == "turn" or (query, role) not in last:
            last.clear()
            last[(query, role)] = turns(query, question, role, "turn")
        ranking = last[(query, role)]
        return ranking if unit == "turn" else sessions_of(ranking, session_of)

    return search


def _clock_at(corpus: Corpus) -> Callable[[], int] | None:
    """The service clock of a corpus whose questions carry the moment they are asked
    (LongMemEval's ``question_date``): the service runs at that moment, as it would for the
    user then, so "two weeks ago" means two weeks before the question. ``None`` (the real
    clock) when the benchmark gives no such moment (LoCoMo)."""
    moments = {q.when for q in corpus.questions}
    if len(moments) != 1 or None in moments:
        return None
    at = datetime.fromisoformat(str(moments.pop()).replace("Z", "+00:00"))
    epoch_ms = int(at.timestamp() * 1000)
    return lambda: epoch_ms


# --- engines -----------------------------------------------------------------------------------
class BM25Engine:
    """A baseline: BM25Okapi defaults over ``text.split(" ")`` (``space``, upstream's
    protocol) or over lower-cased ``\\w+`` words (``words``)."""

    def __init__(self, split: str = "space") -> None:
        self.name = "bm25" if split == "space" else "bm25_words"
        words = re.compile(r"\w+")
        self.tokens: Callable[[str], list[str]] = (
            (lambda t: t.split(" ")) if split == "space" else (lambda t: words.findall(t.lower())))

    def open(self, corpus: Corpus) -> Searcher:
        from rank_bm25 import BM25Okapi

        tokens = self.tokens
        indexes: dict[tuple[str | None, str], tuple[BM25Okapi, list[str]]] = {}

        def index(role: str | None, unit: str) -> tuple[BM25Okapi, list[str]]:
            if (role, unit) not in indexes:
                docs = [d for d in corpus.docs if role is None or d.role == role]
                if unit == "session":
                    # Upstream session granularity: a session's turns joined with a space.
                    joined: dict[str, list[str]] = defaultdict(list)
                    for d in docs:
                        joined[d.session].append(d.text)
                    keys = list(joined)
                    texts = [" ".join(joined[k]) for k in keys]
                else:
                    keys, texts = [d.key for d in docs], [d.text for d in docs]
                indexes[(role, unit)] = (BM25Okapi([tokens(t) for t in texts]), keys)
            return indexes[(role, unit)]

        def search(query: str, question: Question, role: str | None, unit: str) -> list[str]:
            bm25, keys = index(role, "session" if unit == "session" else "turn")
            got = bm25.get_scores(tokens(query))
            order = sorted(range(len(keys)), key=lambda i: (-got[i], i))
            return [keys[i] for i in order[:100]]

        return search


class ServiceEngine:
    """The real write and recall paths of MemoryService, one data directory per corpus."""

    name = "service"

    def __init__(self, workdir: Path, database: str | None = None) -> None:
        self.workdir = workdir
        # --database: each corpus in a fresh PostgreSQL database beside this one's
        self.database = database
        self._db_name: str | None = None
        self._open: tuple[object, Path] | None = None
        self.refused: list[str] = []

    def close(self) -> None:
        """Close and delete the previous corpus's data directory (LongMemEval has 498)."""
        import shutil

        if self._open is not None:
            svc, data = self._open
            svc.close()  # type: ignore[attr-defined]
            shutil.rmtree(data, ignore_errors=True)
            self._open = None
        if self._db_name is not None and self.database is not None:
            import psycopg

            with psycopg.connect(self.database, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self._db_name}" WITH (FORCE)')
            self._db_name = None

    def _fresh_database(self) -> str | None:
        if self.database is None:
            return None
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        self._db_name = f"pal_quality_{os.getpid()}"
        with psycopg.connect(self.database, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self._db_name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self._db_name}"')
        info = conninfo_to_dict(self.database)
        made: str = make_conninfo(**{**info, "dbname": self._db_name})
        return "postgresql://{user}:{password}@{host}:{port}/{db}".format(
            user=info.get("user", ""), password=info.get("password", ""),
            host=info.get("host", "localhost"), port=info.get("port", 5432),
            db=self._db_name) if made else None

    def open(self, corpus: Corpus) -> Searcher:
        from palimpsest.service.memories import MemoryService

        self.close()
        data = self.workdir / corpus.name.replace("/", "_")
        svc = MemoryService(data, clock=_clock_at(corpus), database=self._fresh_database())
        self._open = (svc, data)
        made = svc.bootstrap_owner("bench")
        assert made is not None
        caller = svc.caller(made[0].id)
        memory = svc.create_memory(caller, {"name": f"user {corpus.name}",
                                            "description": "conversation history"})
        mid = memory["id"]
        by_session: dict[str, list[Doc]] = defaultdict(list)
        for doc in corpus.docs:
            by_session[doc.session].append(doc)
        for session, docs in by_session.items():
            # One observe call per session (≤ 100 episodes each), as a harness flushes a
            # conversation; a turn longer than one content part allows is written as several
            # consecutive episodes (a harness chunking a long message).
            episodes: list[dict[str, object]] = []
            for doc in docs:
                attributes: dict[str, object] = {"turn": doc.key, "session_id": session,
                                                 "role": doc.role}
                if doc.speaker:
                    attributes["speaker"] = doc.speaker
                for start in range(0, max(len(doc.text), 1), CHUNK):
                    episodes.append({
                        "content": [{"type": "text", "text": doc.text[start:start + CHUNK],
                                     "role": doc.role}],
                        "attributes": attributes,
                        "time": {"valid_from": doc.when},
                    })
            for start in range(0, len(episodes), 100):
                batch = episodes[start:start + 100]
                try:
                    svc.observe(caller, mid, {"episodes": batch})
                except PalError as exc:
                    self.refused.append(f"{corpus.name}: {exc.code}: {exc.message}")

        def search(query: str, question: Question, role: str | None, unit: str) -> list[str]:
            body: dict[str, object] = {"query": query, "limit": 10 if unit == "limit10" else 100}
            if role:
                body["filters"] = {"field": "attributes.role", "op": "eq", "value": role}
            answer = svc.recall(caller, mid, body)
            keys = [str(r["record"]["attributes"]["turn"]) for r in answer["results"]]
            return list(dict.fromkeys(keys))  # a chunked turn counts once, at its best rank

        return _sessions_from_turns(search, corpus)


# --- runs --------------------------------------------------------------------------------------
def _agg(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    keys = rows[0].keys() if rows else []
    return {k: round(mean(r[k] for r in rows), 4) for k in keys}


def _timed(search: Searcher, query: str, q: Question, role: str | None,
           lat: dict[str, list[float]]) -> list[str]:
    """The ranking of one recall (limit 100, what the metrics need), timed in wall and CPU
    time; then the same recall at limit 10 (what an agent asks), timed too."""
    wall, cpu = time.perf_counter(), time.process_time()
    ranking = search(query, q, role, "turn")
    lat["wall"].append((time.perf_counter() - wall) * 1000)
    lat["cpu"].append((time.process_time() - cpu) * 1000)
    wall, cpu = time.perf_counter(), time.process_time()
    search(query, q, role, "limit10")
    lat["wall_limit10"].append((time.perf_counter() - wall) * 1000)
    lat["cpu_limit10"].append((time.process_time() - cpu) * 1000)
    return ranking


def _user_only(corpus: Corpus) -> Corpus:
    """The corpus as upstream LongMemEval indexes it: the user turns alone."""
    return Corpus(corpus.name + "/user", tuple(d for d in corpus.docs if d.role == "user"),
                  corpus.questions)


def run_locomo(engine: object, corpora: Iterable[Corpus], split: str,
               perturb: bool = True) -> dict[str, object]:
    """Turn- and session-level metrics per category and overall (categories 1–4), and the
    turn-level metrics of the perturbed questions (categories 1–4)."""
    turn_rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    sess_rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    perturbed: dict[str, list[dict[str, float]]] = defaultdict(list)
    lat: dict[str, list[float]] = defaultdict(list)
    for corpus in corpora:
        qs = [q for q in corpus.questions if _in_split(q.id, split)]
        if not qs:
            continue
        search = engine.open(corpus)  # type: ignore[attr-defined]
        session_of = {d.key: d.session for d in corpus.docs}
        n_sessions = len(set(session_of.values()))
        for q in qs:
            ranking = _timed(search, q.text, q, None, lat)
            t = scores(ranking, q.gold_turns, len(corpus.docs))
            s = scores(search(q.text, q, None, "session"), q.gold_sessions, n_sessions)
            buckets = [f"category_{q.category}"] + (["overall_1_4"] if q.category != "5" else [])
            for bucket in buckets:
                turn_rows[bucket].append(t)
                sess_rows[bucket].append(s)
            if perturb and q.category != "5":
                perturbed["none"].append(t)
                for name, change in PERTURBATIONS.items():
                    asked = change(q.text, q.id)
                    perturbed[name].append(
                        scores(search(asked, q, None, "turn"), q.gold_turns, len(corpus.docs)))
    pick = [f"{m}@{k}" for m in ("recall_any", "recall_all", "ndcg_any") for k in KS]
    def cut(rows: list[dict[str, float]]) -> dict[str, float]:
        agg = _agg(rows)
        return {k: agg[k] for k in pick if k in agg} | {"n": len(rows)}
    out: dict[str, object] = {
        "turn": {b: cut(r) for b, r in sorted(turn_rows.items())},
        "session": {b: cut(r) for b, r in sorted(sess_rows.items())},
        "latency_ms": _latency(lat),
    }
    if perturbed:
        out["perturbed_turn_1_4"] = {name: cut(rows) for name, rows in perturbed.items()}
    return out


def run_lme(engine: object, corpora: Iterable[Corpus], split: str, perturb: bool = True,
            upstream: bool = True) -> dict[str, object]:
    """Official protocol (user turns; non-abstention with a user gold turn) as the bench
    stores a conversation and exactly as upstream (user turns only), the common variant, and
    the official session metrics of the perturbed questions."""
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    by_type: dict[str, list[dict[str, float]]] = defaultdict(list)
    perturbed: dict[str, list[dict[str, float]]] = defaultdict(list)
    lat: dict[str, list[float]] = defaultdict(list)
    for corpus in corpora:
        q = corpus.questions[0]
        if not _in_split(q.id, split) or q.extra["abstention"]:
            continue
        search = engine.open(corpus)  # type: ignore[attr-defined]
        session_of = {d.key: d.session for d in corpus.docs}
        user_docs = [d for d in corpus.docs if d.role == "user"]
        n_sessions = len(set(session_of.values()))
        if q.gold_turns:
            ranking = _timed(search, q.text, q, "user", lat)
            rows["official_turn"].append(scores(ranking, q.gold_turns, len(user_docs)))
            s = scores(search(q.text, q, "user", "session"), q.gold_sessions, n_sessions)
            rows["official_session"].append(s)
            by_type[q.category].append(s)
            if perturb:
                perturbed["none"].append(s)
                for name, change in PERTURBATIONS.items():
                    asked = change(q.text, q.id)
                    perturbed[name].append(scores(search(asked, q, "user", "session"),
                                                  q.gold_sessions, n_sessions))
        _timed(search, q.text, q, None, lat)
        gold = q.extra["answer_sessions"]
        rows["common_session_user_assistant"].append(
            scores(search(q.text, q, None, "session"), gold, n_sessions))  # type: ignore[arg-type]
        if upstream and q.gold_turns:
            alone = engine.open(_user_only(corpus))  # type: ignore[attr-defined]
            rows["upstream_turn"].append(
                scores(alone(q.text, q, None, "turn"), q.gold_turns, len(user_docs)))
            rows["upstream_session"].append(
                scores(alone(q.text, q, None, "session"), q.gold_sessions, n_sessions))
    pick = ("recall_any@5", "recall_all@5", "ndcg_any@5", "recall_all@10", "ndcg_any@10",
            "recall_any@1", "recall_all@1", "recall_all@3", "ndcg_any@3", "recall_any@10")
    def cut(rows: list[dict[str, float]]) -> dict[str, float]:
        agg = _agg(rows)
        return {k: agg[k] for k in pick if k in agg} | {"n": len(rows)}
    out: dict[str, object] = {key: cut(r) for key, r in rows.items()}
    out["official_session_by_type"] = {t: cut(r) for t, r in sorted(by_type.items())}
    out["latency_ms"] = _latency(lat)
    if perturbed:
        out["perturbed_official_session"] = {name: cut(r) for name, r in perturbed.items()}
    return out


def _latency(lat: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {kind: {"p50": round(percentile(v, 50), 2), "p99": round(percentile(v, 99), 2),
                   "n": len(v)} for kind, v in lat.items()}


def _in_split(qid: str, split: str) -> bool:
    return split == "all" or (split == "dev") == is_dev(qid)


PREFACE = """
What recall does (the engine every user gets; nothing here is benchmark-specific, except that
the analyser's filler lists hold the six preambles of the `filler` perturbation — see the
unseen-filler columns): text is analysed by `palimpsest.search.analyzer` (Unicode words, case
and Latin-accent folding, English stop words, a light suffix stemmer, CJK unigrams; greetings
and filler phrases are left out of query terms); a query word no record in the caller's reach
holds is also looked for as its nearest vocabulary terms in that reach (`search.spelling`,
weight 0.5, at most 3); SQLite FTS5 BM25 ranks the record's own words (weight 1.0) and, for an
episode, the words of the episode written just before it in the same conversation
(`fts.CONTEXT_WEIGHT` 0.5); `search.rank` fuses that BM25 order with a rarity-weighted
coverage of the question's terms and, when the question names dates ("June 2023", "the 5th of
May": `timeref.dates`, `DATE_WEIGHT` 2.0) or a relative moment ("two weeks ago":
`timeref.resolve`, `TIME_WEIGHT` 2.0), with the order of records whose time lies there
(reciprocal rank fusion, k = 60); episodes of one conversation support each other (two best
conversation-mates, `THREAD_WEIGHT` 0.3) and the turns just before and after a hit rise with
it (`NEIGHBOUR_WEIGHT` 0.2). No embeddings. The term counts that choose which terms are ranked
and which corrections exist are counted within the caller's reach; FTS5's own BM25 statistics
are still the SQLite file's (per-memory statistics arrive with the PostgreSQL branch; in this
benchmark every user has a store of their own, so the two are the same).

No LLM anywhere; CPU only; one shared, loaded 2-core machine. `service` = every benchmark user
gets a fresh data directory, each session's turns are written as `episode` records through
`MemoryService.observe` (one call per session; text, role, speaker, `session_id` and session
time; a turn over 12,000 characters is written as consecutive episodes, and counts once at its
best rank), and each question is one `MemoryService.recall` call (`{"query": question, "limit":
100}`, and again at limit 10 for the latency an agent sees). LongMemEval's official protocol
runs twice: as the bench stores a conversation (user and assistant turns written, the filter
`attributes.role eq user` at query time, so a user turn's context column holds the assistant
turn before it) and exactly as upstream (only the user turns written at all). A LongMemEval
user's service runs with its clock at the question's `question_date`; LoCoMo gives no question
date, so its service runs on the real clock. Two baselines in the same run, both
`rank_bm25.BM25Okapi` defaults over the same texts: `bm25` splits on single spaces (upstream
LongMemEval's scripts), `bm25_words` takes lower-cased `\\w+` words (the stronger simple
baseline); session-level baselines index a session's turns joined. Our session rankings are
the distinct sessions of the turn ranking in first-seen order (upstream's turn→session
mapping). Every question is also asked perturbed (`bench/quality_perturb.py`: lower-case, no
punctuation, a filler preamble, one typo, all four; and the filler and all four again with a
preamble the analyser's lists were not written for).
Split: a question is in the development set when the last hex digit of sha256(id) is even
(`id` = LongMemEval `question_id`, LoCoMo `<sample_id>#<index in qa>`); all tuning used the
development set only. LoCoMo `overall_1_4` is the headline (category 5, adversarial, apart);
4 questions without usable evidence are skipped. LongMemEval official averages skip `_abs`
questions and questions without a user-side `has_answer` turn; the common variant scores
`answer_session_ids` over all non-abstention questions. nDCG is upstream's binary
`eval_utils.ndcg`. Latency is one recall call in-process (service) or one `get_scores` (bm25),
including all Python work, in wall time and in this process's CPU time.
"""


NOTES = """
Reading the numbers:
- Runs (held-out halves only; code of the quality2 branch, store schema 3): LoCoMo
  2026-12-01 23:40–23:49 UTC, LongMemEval_S 23:27–23:46 UTC, side by side with each other and
  with other engineers' test runs on the two shared cores (load average 6–13 throughout), so
  wall time runs far above CPU time; quote CPU time for the engine. An earlier LoCoMo run of
  the same ranking code (23:27–23:39, without the unseen-filler columns) gave 0.683 turn
  recall_any@5 instead of 0.684 — one question of 773: LoCoMo's service runs on the real
  clock, and ties can fall differently between runs.
- Targets (issue 18, held-out): **most are not met.** LoCoMo turn recall_any@5 **0.684**
  (target ≥ 0.72; 0.652 in the previous round's table), with all four perturbations **0.661**
  (≥ 0.66: met by one question — but the `filler` preambles are ones the analyser's filler
  lists hold; with preambles they were not written for, all four give **0.639**, not met);
  LongMemEval_S official session recall_all@5 **0.876** in the bench's protocol (≥ 0.90; not
  met, unchanged from the previous round) and **0.871** exactly as upstream (≥ 0.88; not met);
  common-variant recall_any@5 **0.979** (≥ 0.98; not met: 233 of 238, one question short);
  recall CPU p50 at limit 10 **2.7 ms** (LoCoMo) and **5.4 ms** (LongMemEval_S) (≤ 10 ms: met;
  wall p50 14.5 / 33.4 ms on this loaded machine). Ahead of both same-run baselines on every
  headline metric, the stronger `bm25_words` included (LoCoMo 0.476, LongMemEval 0.824
  / 0.824 / 0.958).
- Development against held-out: the development halves give LoCoMo 0.731, LongMemEval_S
  0.885 / 0.861 / 0.987; the held-out LoCoMo number is 0.047 lower, so the phase-1 steps
  tuned there carried over only partly (held-out 0.652 → 0.684 against dev 0.695 → 0.731).
- Perturbations (held-out, LoCoMo turn recall_any@5): lower-case and no punctuation cost
  nothing (0.684 / 0.683), a typo 0.021 (0.664; 0.066 before phase 1, per the issue), a filler
  the analyser knows nothing, a filler it does not know 0.016 (0.669) — as much as it costs
  the lower-cased `\\w+` BM25 (0.476 → 0.461) — and all four with that filler 0.045 (0.639;
  that BM25 loses 0.084). LongMemEval_S official session recall_all@5 stays within two
  questions of unperturbed for every change (0.867–0.881; its run has no unseen-filler
  columns: they were added after it had started).
- Not built: an embedding signal (the issue allows one only if it pays; none was tried in this
  round). Tried on the development halves and left out this round: see the development section
  above (asymmetric neighbour support, `RRF_K`, `COVERAGE_WEIGHT`, `THREAD_K`, `THREAD_WEIGHT`).
"""


def write_docs(paths: list[Path]) -> int:
    """Merge result files and rewrite the recall-quality section of docs/benchmarks.md."""
    from quality_report import render, write

    merged: dict[str, object] = {}
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        for key, value in data.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key].update(value)  # type: ignore[union-attr]
            else:
                merged[key] = value
    write(ROOT / "docs" / "benchmarks.md", render(merged, PREFACE, NOTES))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; print JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", choices=["locomo", "lme", "all"], default="all")
    ap.add_argument("--limit", type=int, default=0, help="at most N corpora per benchmark")
    ap.add_argument("--split", choices=["dev", "held", "both", "all"], default="both")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--no-perturb", action="store_true", help="skip the perturbed questions")
    ap.add_argument("--no-upstream", action="store_true",
                    help="skip LongMemEval's user-turns-only run")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--database", default=None,
                    help="postgresql:// URL: our store on PostgreSQL (a fresh database per "
                    "corpus, created beside this one)")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    ap.add_argument("--write-docs", nargs="*", type=Path, default=None, metavar="JSON",
                    help="rewrite the docs/benchmarks.md section from these result files "
                         "(merged in order) instead of running")
    args = ap.parse_args(argv)
    if args.write_docs is not None:
        return write_docs(args.write_docs)
    import tempfile

    tmp = tempfile.TemporaryDirectory(prefix="pal-quality-")
    workdir = args.workdir or Path(tmp.name)
    ours = ServiceEngine(workdir, args.database)
    engines: list[object] = [ours] + (
        [] if args.no_baseline else [BM25Engine("space"), BM25Engine("words")])
    perturb = not args.no_perturb
    splits = ["dev", "held"] if args.split == "both" else [args.split]
    started = datetime.now(UTC)
    load_start = os.getloadavg()
    result: dict[str, object] = {"limit": args.limit or None}
    if args.bench in ("locomo", "all"):
        corpora = locomo(SHARED / "bench" / "locomo" / "locomo10.json")
        if args.limit:
            corpora = corpora[: args.limit]
        result["locomo"] = {
            split: {e.name: run_locomo(e, corpora, split, perturb)  # type: ignore[attr-defined]
                    for e in engines}
            for split in splits
        }
    if args.bench in ("lme", "all"):
        folder = SHARED / "bench" / "longmemeval"
        questions = lme_questions(folder)
        if args.limit:
            questions = [q for q in questions if not str(q["question_id"]).endswith("_abs")]
            questions = questions[:: max(1, len(questions) // args.limit)][: args.limit]
        corpora_l = list(lme_corpora(folder, questions))
        result["longmemeval_s"] = {
            split: {e.name: run_lme(e, corpora_l, split, perturb,  # type: ignore[attr-defined]
                                    not args.no_upstream) for e in engines}
            for split in splits
        }
    for engine in engines:
        if isinstance(engine, ServiceEngine):
            engine.close()
            result["refused_writes"] = engine.refused
    load_end = os.getloadavg()
    result["machine"] = {f"{args.bench} {args.split}": (
        f"{started:%Y-%m-%d %H:%M}–{datetime.now(UTC):%H:%M} UTC, "
        f"{os.cpu_count()} cores, load average (1/5/15 min) "
        f"{' / '.join(f'{x:.1f}' for x in load_start)} at the start, "
        f"{' / '.join(f'{x:.1f}' for x in load_end)} at the end")}
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main())
