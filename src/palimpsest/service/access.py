"""Who may do what on which memory (uhp-memories.md §4) — pure.

Rules, stated once:

- A principal's effective privileges on a memory are the union of its grants on that memory and
  on every ancestor, walking up until (and including) the first ``restricted`` node: grants on
  ancestors of a restricted node do not reach it. There is no deny; no grant means no access.
- Whoever created a memory holds all four privileges on it, an implicit grant that flows down
  like any other.
- A caller *sees* a memory when it holds any privilege on it. Unknown and unseen memories are
  indistinguishable to callers (the service raises the same ``memory_not_found``).
- The readable reach of a subtree is judged node by node: a branch behind a cutoff the caller is
  not let through is not searched, but a node inside it that the caller holds read on is.

Nothing here does I/O: a :class:`Tree` is a value loaded by storage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from palimpsest.service.model import ALL_PRIVILEGES, Grant, Memory


@dataclass(frozen=True, slots=True)
class Tree:
    """Every memory and every explicit grant, as loaded at one instant."""

    nodes: Mapping[str, Memory]
    grants: Mapping[str, tuple[Grant, ...]]  # by memory id
    children: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    roots: tuple[str, ...] = ()

    @staticmethod
    def build(memories: Iterable[Memory], grants: Iterable[Grant]) -> Tree:
        """Index memories by id and parent, children ordered by creation then id."""
        nodes = {m.id: m for m in memories}
        kids: dict[str, list[str]] = {}
        roots: list[str] = []
        for m in sorted(nodes.values(), key=lambda m: (m.created_at, m.id)):
            if m.parent_id is None or m.parent_id not in nodes:
                roots.append(m.id)
            else:
                kids.setdefault(m.parent_id, []).append(m.id)
        by_memory: dict[str, list[Grant]] = {}
        for g in grants:
            by_memory.setdefault(g.memory_id, []).append(g)
        return Tree(nodes, {k: tuple(v) for k, v in by_memory.items()},
                    {k: tuple(v) for k, v in kids.items()}, tuple(roots))

    def ancestors(self, memory_id: str) -> list[str]:
        """Ids from the root down to the parent (all of them, regardless of caller)."""
        out: list[str] = []
        node = self.nodes.get(memory_id)
        seen = {memory_id}
        while node is not None and node.parent_id is not None and node.parent_id not in seen:
            out.append(node.parent_id)
            seen.add(node.parent_id)
            node = self.nodes.get(node.parent_id)
        out.reverse()
        return out

    def depth(self, memory_id: str) -> int:
        """Distance from the root."""
        return len(self.ancestors(memory_id))

    def descendants(self, memory_id: str, max_depth: int | None = None) -> list[str]:
        """The subtree below ``memory_id`` breadth first (not including it)."""
        out: list[str] = []
        frontier = [memory_id]
        level = 0
        while frontier and (max_depth is None or level < max_depth):
            nxt: list[str] = []
            for mid in frontier:
                nxt.extend(self.children.get(mid, ()))
            out.extend(nxt)
            frontier = nxt
            level += 1
        return out

    def would_cycle(self, memory_id: str, new_parent: str | None) -> bool:
        """Moving ``memory_id`` under ``new_parent`` would make it its own ancestor."""
        if new_parent is None:
            return False
        return new_parent == memory_id or memory_id in self.ancestors(new_parent)


def own_privileges(tree: Tree, memory_id: str, principals: frozenset[str]) -> frozenset[str]:
    """Privileges granted to ``principals`` on this node alone (creator grant included)."""
    node = tree.nodes[memory_id]
    privs: set[str] = set()
    if f"member:{node.created_by}" in principals:
        privs |= ALL_PRIVILEGES
    for g in tree.grants.get(memory_id, ()):
        if g.principal in principals:
            privs |= g.privileges
    return frozenset(privs)


class View:
    """One caller's effective privileges over a :class:`Tree`, memoised per node."""

    def __init__(self, tree: Tree, principals: frozenset[str]) -> None:
        self.tree = tree
        self.principals = principals
        self._cache: dict[str, frozenset[str]] = {}

    def privileges(self, memory_id: str) -> frozenset[str]:
        """Effective privileges: own grants ∪ the parent's, unless this node is restricted."""
        cached = self._cache.get(memory_id)
        if cached is not None:
            return cached
        node = self.tree.nodes.get(memory_id)
        if node is None:
            return frozenset()
        chain: list[str] = [memory_id]
        # Walk up iteratively to the first cached, restricted or root node.
        while True:
            cur = self.tree.nodes[chain[-1]]
            if cur.restricted or cur.parent_id is None or cur.parent_id not in self.tree.nodes:
                base: frozenset[str] = frozenset()
                break
            if cur.parent_id in self._cache:
                base = self._cache[cur.parent_id]
                break
            if cur.parent_id in chain:  # defensive: a stored cycle grants nothing upward
                base = frozenset()
                break
            chain.append(cur.parent_id)
        for mid in reversed(chain):
            privs = own_privileges(self.tree, mid, self.principals)
            inherited = frozenset() if self.tree.nodes[mid].restricted else base
            base = privs | inherited
            self._cache[mid] = base
        return self._cache[memory_id]

    def sees(self, memory_id: str) -> bool:
        """The caller holds some privilege here."""
        return bool(self.privileges(memory_id))

    def can(self, memory_id: str, privilege: str) -> bool:
        """The caller holds ``privilege`` here."""
        return privilege in self.privileges(memory_id)

    def visible_ancestors(self, memory_id: str) -> list[str]:
        """Ancestors root → parent, only as far up as the caller can see (contiguously)."""
        out: list[str] = []
        for mid in reversed(self.tree.ancestors(memory_id)):
            if not self.sees(mid):
                break
            out.append(mid)
        out.reverse()
        return out

    def visible_parent(self, memory_id: str) -> str | None:
        """The parent id when the caller can see it, else ``None``."""
        parent = self.tree.nodes[memory_id].parent_id
        return parent if parent is not None and self.sees(parent) else None

    def entry_points(self) -> list[str]:
        """Every memory the caller sees whose parent it cannot see, highest first."""
        out = [mid for mid in self._all_ordered()
               if self.sees(mid) and self.visible_parent(mid) is None]
        return out

    def granted(self) -> list[str]:
        """Entry points plus every node below where what the caller may do differs from the
        parent, highest in the tree first."""
        out: list[str] = []
        for mid in self._all_ordered():
            privs = self.privileges(mid)
            if not privs:
                continue
            parent = self.visible_parent(mid)
            if parent is None or self.privileges(parent) != privs:
                out.append(mid)
        return out

    def readable_children(self, memory_id: str) -> list[str]:
        """Direct children the caller may read."""
        return [c for c in self.tree.children.get(memory_id, ()) if self.can(c, "read")]

    def visible_children(self, memory_id: str) -> list[str]:
        """Direct children the caller sees."""
        return [c for c in self.tree.children.get(memory_id, ()) if self.sees(c)]

    def readable_reach(self, memory_id: str, depth: int | None = None) -> list[str]:
        """``memory_id`` (if readable) and each readable descendant within ``depth``,
        breadth first. Nodes behind a cutoff are judged on their own."""
        out = [memory_id] if self.can(memory_id, "read") else []
        out.extend(m for m in self.tree.descendants(memory_id, depth) if self.can(m, "read"))
        return out

    def _all_ordered(self) -> list[str]:
        order: list[str] = []
        frontier = list(self.tree.roots)
        while frontier:
            order.extend(frontier)
            frontier = [c for mid in frontier for c in self.tree.children.get(mid, ())]
        return order


__all__ = ["Tree", "View", "own_privileges"]
