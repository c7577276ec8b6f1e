"""Shared retrieval: text analysis, safe full-text query strings, and rank fusion.

The pieces here are pure: they take text and rankings and return strings and rankings. The
service's storage layer is the only code that sends the strings to SQLite FTS5; nothing in
this package opens a database, reads files or touches the network.

- :mod:`palimpsest.search.analyzer` turns text into index terms (tokens, case folding, stop
  words, a light English stemmer, CJK unigrams) and a question into query terms (without its
  conversational padding).
- :mod:`palimpsest.search.spelling` matches a misspelled query word to the nearest terms the
  memories searched hold, through a vocabulary lookup the caller passes.
- :mod:`palimpsest.search.timeref` reads the dates ("June 2023", "the 5th of May") and the
  relative periods ("two weeks ago") a question names.
- :mod:`palimpsest.search.fts` builds the analysed text stored in an FTS5 column and a MATCH
  expression from user text that is literal by default and can never inject FTS5 syntax.
- :mod:`palimpsest.search.fusion` fuses several ranked signals (weighted reciprocal rank
  fusion with deterministic tie-breaks).
- :mod:`palimpsest.search.rank` orders the FTS5 candidates of a recall: BM25 fused with how
  much of the question each record covers, when it was written, and its conversation.
- :mod:`palimpsest.search.regex` compiles RE2 patterns for ``pal memory grep`` under byte,
  expansion-estimate, compiled-program and work limits.
"""
