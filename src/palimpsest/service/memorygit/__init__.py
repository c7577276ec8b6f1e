"""Memory Git, the review face of the service's one history (memory-git.md): the eight ops,
the accepted-memory projection, refs with ownership, diffs and conflicts, proposals, reviews,
merge authorization and reviewed writes."""
