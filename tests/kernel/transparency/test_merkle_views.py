"""Issue 64: a tree built a level at a time is the tree appended a leaf at a time, and a view of it stays the tree it was
when taken, whatever is appended after; the frontier it gives appends as the tree does."""

from __future__ import annotations

import pytest

from kernel.transparency import merkle

LEAVES = [merkle.leaf_hash(b"entry %d" % i) for i in range(70)]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 8, 9, 31, 32, 33, 70])
def test_a_tree_built_a_level_at_a_time_is_the_tree_appended_a_leaf_at_a_time(n):
    built, appended = merkle.Tree.built(b"".join(LEAVES[:n])), merkle.Tree(LEAVES[:n])
    assert built.size == appended.size == n and built.root() == appended.root()
    for size in range(1, n + 1):
        assert built.root(size) == appended.root(size)
        assert [built.inclusion_proof(i, size) for i in range(size)] == [appended.inclusion_proof(i, size) for i in range(size)]
        assert built.consistency_proof(1, size) == appended.consistency_proof(1, size)
    built.append(LEAVES[0])  # and it grows as any tree does
    assert built.root() == merkle.Tree([*LEAVES[:n], LEAVES[0]]).root()


def test_a_view_is_the_tree_when_it_was_taken_and_cannot_be_appended_to():
    tree = merkle.Tree(LEAVES[:5])
    view = tree.view()
    root, proof = view.root(), view.inclusion_proof(4, 5)
    for leaf in LEAVES[5:40]:  # perfect subtrees it reads are never rewritten; levels it never reads are added
        tree.append(leaf)
    assert (view.size, view.root(), view.inclusion_proof(4, 5)) == (5, root, proof)
    assert tree.size == 40 and tree.root(5) == root
    with pytest.raises(TypeError, match="read-only"):
        view.append(LEAVES[0])
    with pytest.raises(IndexError):
        view.leaf(5)
    with pytest.raises(ValueError, match="has 5 leaves"):
        view.root(6)


@pytest.mark.parametrize("n", [0, 1, 5, 8, 13])
def test_the_frontier_of_a_tree_appends_as_the_tree_does(n):
    tree = merkle.Tree(LEAVES[:n])
    frontier = tree.frontier()
    assert (frontier.size, frontier.root()) == (n, tree.root())
    for leaf in LEAVES[n : n + 9]:
        frontier.append(leaf)
        assert tree.root_with(leaf) != tree.root()
        tree.append(leaf)
        assert frontier.root() == tree.root()


def test_leaves_that_are_not_hashes_are_refused():
    with pytest.raises(ValueError, match="32 bytes"):
        merkle.Tree([b"short"])
    with pytest.raises(ValueError, match="whole number"):
        merkle.Tree.built(b"\0" * 33)
