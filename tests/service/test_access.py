"""The access rules of uhp-memories.md §4, on pure values (no storage)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.service.access import Tree, View
from palimpsest.service.model import ALL_PRIVILEGES, Grant, Memory


def node(mid: str, parent: str | None, *, restricted: bool = False, by: str = "owner",
         at: int = 0) -> Memory:
    return Memory(mid, mid, "", parent, restricted, "builtin", by, at, at)


def grant(mid: str, principal: str, *privs: str) -> Grant:
    return Grant(f"g-{mid}-{principal}", mid, principal, frozenset(privs))


def company() -> list[Memory]:
    # root ─ sales ─ acme ─ secret(restricted) ─ deep
    #      └ hr
    return [node("root", None, at=1), node("sales", "root", at=2), node("acme", "sales", at=3),
            node("secret", "acme", restricted=True, at=4), node("deep", "secret", at=5),
            node("hr", "root", at=6)]


def test_union_of_grants_up_the_tree() -> None:
    tree = Tree.build(company(), [grant("root", "member:a", "read"),
                                  grant("acme", "member:a", "write"),
                                  grant("sales", "group:team", "create")])
    view = View(tree, frozenset({"member:a", "group:team"}))
    assert view.privileges("root") == {"read"}
    assert view.privileges("sales") == {"read", "create"}
    assert view.privileges("acme") == {"read", "write", "create"}


def test_restricted_cutoff_stops_ancestor_grants_but_not_its_own() -> None:
    tree = Tree.build(company(), [grant("root", "member:a", "read", "write"),
                                  grant("deep", "member:a", "read")])
    view = View(tree, frozenset({"member:a"}))
    assert view.privileges("acme") == {"read", "write"}
    assert view.privileges("secret") == frozenset()
    # A node inside the closed branch that the caller holds a grant on is reachable.
    assert view.privileges("deep") == {"read"}
    assert view.readable_reach("root") == ["root", "sales", "hr", "acme", "deep"]


def test_creator_holds_all_four_and_it_flows_down() -> None:
    nodes = [node("r", None, by="x"), node("c", "r", by="owner")]
    view = View(Tree.build(nodes, []), frozenset({"member:x"}))
    assert view.privileges("r") == ALL_PRIVILEGES
    assert view.privileges("c") == ALL_PRIVILEGES


def test_no_grant_means_no_access_and_no_deny_exists() -> None:
    tree = Tree.build(company(), [grant("sales", "member:b", "read")])
    view = View(tree, frozenset({"member:a"}))
    assert all(not view.sees(m) for m in tree.nodes)
    assert view.entry_points() == []


def test_entry_points_and_granted_listing() -> None:
    tree = Tree.build(company(), [grant("sales", "member:a", "read"),
                                  grant("acme", "member:a", "write"),
                                  grant("deep", "member:a", "read"),
                                  grant("hr", "member:a", "read")])
    view = View(tree, frozenset({"member:a"}))
    assert view.entry_points() == ["sales", "hr", "deep"]
    # granted adds acme, where what the caller may do differs from its parent.
    assert view.granted() == ["sales", "hr", "acme", "deep"]
    assert view.visible_ancestors("acme") == ["sales"]
    assert view.visible_ancestors("deep") == []


def test_depth_narrows_reach() -> None:
    tree = Tree.build(company(), [grant("root", "member:a", "read")])
    view = View(tree, frozenset({"member:a"}))
    assert view.readable_reach("root", 0) == ["root"]
    assert view.readable_reach("root", 1) == ["root", "sales", "hr"]
    assert view.readable_reach("sales", None) == ["sales", "acme"]


def test_cycle_detection() -> None:
    tree = Tree.build(company(), [])
    assert tree.would_cycle("sales", "deep")
    assert tree.would_cycle("sales", "sales")
    assert not tree.would_cycle("hr", "deep")
    assert not tree.would_cycle("hr", None)


@st.composite
def forests(draw: st.DrawFn) -> tuple[list[Memory], list[Grant]]:
    n = draw(st.integers(1, 12))
    nodes = []
    for i in range(n):
        parent = draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None
        nodes.append(node(f"n{i}", None if parent is None else f"n{parent}",
                          restricted=draw(st.booleans()), by=draw(st.sampled_from(["x", "o"])),
                          at=i))
    grants = [grant(f"n{draw(st.integers(0, n - 1))}", draw(st.sampled_from(["member:x",
                                                                              "group:g"])),
                    *draw(st.sets(st.sampled_from(sorted(ALL_PRIVILEGES)), min_size=1)))
              for _ in range(draw(st.integers(0, 6)))]
    return nodes, grants


@settings(max_examples=150, deadline=None, derandomize=True)
@given(forests())
def test_inheritance_properties(forest: tuple[list[Memory], list[Grant]]) -> None:
    nodes, grants = forest
    tree = Tree.build(nodes, grants)
    view = View(tree, frozenset({"member:x", "group:g"}))
    for m in nodes:
        privs = view.privileges(m.id)
        if m.parent_id is not None and not m.restricted:
            assert view.privileges(m.parent_id) <= privs  # children inherit (union)
        own = {p for g in grants if g.memory_id == m.id for p in g.privileges}
        if m.created_by == "x":
            own |= ALL_PRIVILEGES
        assert own <= privs
    for root in tree.roots:
        assert all(view.can(r, "read") for r in view.readable_reach(root))
