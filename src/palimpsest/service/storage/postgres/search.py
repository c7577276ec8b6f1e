"""Search on PostgreSQL with the embedded store's answers.

The index row of a record keeps the analyser's own terms (``record_fts.terms``: its text and
context split on the spaces :func:`palimpsest.search.fts.document_text` put between them), so
both backends tokenise identically; a GIN index over them finds the candidates (``&&``: any
query term), and BM25 is the project's (:func:`palimpsest.search.bm25.scores`) — equal to
FTS5's ``bm25()`` given the statistics FTS5 uses: records of the whole index, their total
length, and how many hold each term. Those are kept by triggers in the writing transaction
(``record_terms``, ``fts_terms``, per memory, so writers of two memories never meet on a row), and
summed here.

A query term with a space is a phrase (a CJK run: its characters in order), matched in one
column as FTS5 matches a quoted phrase; its document count is counted from the records that
hold all its characters (FTS5 counts phrase matches too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from palimpsest.search import bm25
from palimpsest.search.fts import MAX_QUERY_TERMS
from palimpsest.service.storage.rows import Hit
from palimpsest.service.storage.tree import SqlRows


def _terms(terms: Sequence[str]) -> list[str]:
    """The query terms FTS5 would be given (see :func:`palimpsest.search.fts.match_terms`)."""
    out: list[str] = []
    for term in terms:
        kept = term.replace("\x00", "")
        if not kept:
            continue
        out.append(kept)
        if len(out) >= MAX_QUERY_TERMS:
            break
    return out


def _has_phrase(tokens: Sequence[str], parts: Sequence[str]) -> bool:
    n = len(parts)
    return any(list(tokens[i:i + n]) == list(parts) for i in range(len(tokens) - n + 1))


def _holds(term: str, text: str, context: str) -> bool:
    """Whether a record's columns hold ``term`` (a phrase within one column)."""
    if " " not in term:
        return term in text.split() or term in context.split()
    parts = term.split()
    return _has_phrase(text.split(), parts) or _has_phrase(context.split(), parts)


class SearchRows(SqlRows):
    """Candidates, statistics and BM25 over ``record_fts`` (see the module docs)."""

    _record_key = staticmethod(str)
    _record_id = staticmethod(str)

    def statistics(self, terms: Sequence[str], memory_ids: Sequence[str] | None = None
                   ) -> bm25.Statistics:
        """Records, total analysed length and per-term document counts of the index (of
        ``memory_ids`` only, when given)."""
        mems = None if memory_ids is None else self._mems(memory_ids)
        where, args = ("", []) if mems is None else (" WHERE mem = ANY(?)", [mems])
        row = self._one(f"SELECT COALESCE(SUM(docs), 0) AS d, COALESCE(SUM(length), 0) AS t "  # noqa: S608 — placeholders only
                        f"FROM record_terms{where}", args)
        df = self._df(terms, mems)
        return bm25.Statistics(int(row["d"]), int(row["t"]), df)

    def _df(self, terms: Sequence[str], mems: list[int] | None) -> dict[str, int]:
        words = [t for t in dict.fromkeys(terms) if " " not in t]
        out = dict.fromkeys(dict.fromkeys(terms), 0)
        if words:
            where = "" if mems is None else " AND mem = ANY(?)"
            args: list[Any] = [words] if mems is None else [words, mems]
            for r in self._q(f"SELECT term, SUM(docs) AS d FROM fts_terms "  # noqa: S608 — placeholders only
                             f"WHERE term = ANY(?){where} GROUP BY term", args):
                out[r["term"]] = int(r["d"])
        for phrase in (t for t in out if " " in t):
            where = "" if mems is None else " AND mem = ANY(?)"
            args = [phrase.split()] if mems is None else [phrase.split(), mems]
            rows = self._q(f"SELECT text, context FROM record_fts WHERE terms @> ?::text[]"  # noqa: S608 — placeholders only
                           f"{where}", args)
            out[phrase] = sum(1 for r in rows if _holds(phrase, r["text"], r["context"]))
        return out

    def search(self, terms: Sequence[str], memory_ids: Sequence[str],  # noqa: PLR0917 — the protocol's signature
               statuses: Sequence[str], types: Sequence[str] | None, limit: int,
               offset: int = 0, bound: int | None = None) -> list[Hit]:
        """Records of ``memory_ids`` holding any of the analysed ``terms`` (status in
        ``statuses``, type in ``types``), scored by BM25 over the whole index as FTS5 scores
        them, best first (ties: the older record first). With ``bound``, only the newest
        ``bound`` matches are scored."""
        wanted = _terms(terms)
        mems = self._mems(memory_ids) if wanted and memory_ids else []
        if not mems:
            return []
        tokens = list(dict.fromkeys(p for t in wanted for p in t.split()))
        where = "f.terms && ?::text[] AND r.mem = ANY(?) AND r.status = ANY(?)"
        args: list[Any] = [tokens, mems, list(statuses)]
        if types:
            where += " AND r.type = ANY(?)"
            args.append(list(types))
        sql = (f"SELECT f.rowid AS n, f.text, f.context FROM record_fts f "  # noqa: S608 — placeholders only
               f"JOIN records r ON r.n = f.rowid WHERE {where}")
        if bound is not None:
            sql += " ORDER BY f.rowid DESC LIMIT ?"
            args.append(bound)
        rows = [r for r in self._q(sql, args)
                if any(_holds(t, r["text"], r["context"]) for t in wanted)]
        if not rows:
            return []
        stats = self.statistics(wanted)
        scores = bm25.scores(dict.fromkeys(wanted, 1.0),
                             [bm25.Document(r["text"], r["context"]) for r in rows], stats)
        ranked = sorted(zip(rows, scores, strict=True), key=lambda rs: (-rs[1], rs[0]["n"]))
        chosen = ranked if bound is not None else ranked[offset:]
        chosen = chosen[:limit]
        if not chosen:
            return []
        more = {r["n"]: r for r in self._q(
            "SELECT r.n, r.thread, COALESCE(r.when_at, r.written_at) AS when_at, "
            "p.n AS follows FROM records r LEFT JOIN records p ON p.id = r.context_src "
            "WHERE r.n = ANY(?)", [[r["n"] for r, _ in chosen]])}
        out = []
        for r, score in chosen:
            m = more.get(r["n"])
            out.append(Hit(int(r["n"]), float(score), r["text"],
                           m["thread"] if m else None, m["when_at"] if m else None,
                           m["follows"] if m else None, r["context"]))
        return out

    def term_docs(self, terms: Sequence[str],
                  memory_ids: Sequence[str] | None = None) -> dict[str, int]:
        """How many indexed records of ``memory_ids`` (``None``: of the store) hold each term
        (a term of several words — a phrase — is not one the vocabulary holds: 0, as FTS5's
        vocabulary says)."""
        mems = None if memory_ids is None else self._mems(memory_ids)
        words = [t for t in dict.fromkeys(terms) if " " not in t]
        out = dict.fromkeys(dict.fromkeys(terms), 0)
        if mems == [] or not words:
            return out
        out.update({t: n for t, n in self._df(words, mems).items()})
        return out


__all__ = ["SearchRows"]
