"""The log's Merkle tree against RFC 9162's definitions, written here straight from the RFC's text (section 2.1):
MTH, PATH and PROOF as recursions over the list of entries, with no shared code."""

from __future__ import annotations

import hashlib

import pytest

from kernel.transparency import merkle


def mth(entries: list[bytes]) -> bytes:
    """RFC 9162 2.1.1: the Merkle Tree Hash of a list of entries."""
    n = len(entries)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + entries[0]).digest()
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + mth(entries[:k]) + mth(entries[k:])).digest()


def path(m: int, entries: list[bytes]) -> list[bytes]:
    """RFC 9162 2.1.3.1: PATH(m, D[n])."""
    n = len(entries)
    if n == 1:
        return []
    k = 1
    while k * 2 < n:
        k *= 2
    if m < k:
        return [*path(m, entries[:k]), mth(entries[k:])]
    return [*path(m - k, entries[k:]), mth(entries[:k])]


def subproof(m: int, entries: list[bytes], b: bool) -> list[bytes]:
    """RFC 9162 2.1.4.1: SUBPROOF(m, D[n], b)."""
    n = len(entries)
    if m == n:
        return [] if b else [mth(entries)]
    k = 1
    while k * 2 < n:
        k *= 2
    if m <= k:
        return [*subproof(m, entries[:k], b), mth(entries[k:])]
    return [*subproof(m - k, entries[k:], False), mth(entries[:k])]


def tree_of(entries: list[bytes]) -> merkle.Tree:
    return merkle.Tree(merkle.leaf_hash(e) for e in entries)


SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 31, 33]
DATA = [b"entry %d" % i for i in range(40)]


@pytest.mark.parametrize("n", SIZES)
def test_roots_inclusion_and_consistency_proofs_are_the_rfcs_and_verify(n):
    entries = DATA[:n]
    tree = tree_of(DATA)  # a bigger tree answers for each smaller size, as the log does
    assert tree.root(n) == mth(entries) == tree_of(entries).root()
    for m in range(n):
        proof = tree.inclusion_proof(m, n)
        assert proof == path(m, entries)
        merkle.verify_inclusion(merkle.leaf_hash(entries[m]), m, n, proof, mth(entries))
    for m in range(1, n + 1):
        proof = tree.consistency_proof(m, n)
        assert proof == (subproof(m, entries, True) if m < n else [])
        merkle.verify_consistency(m, n, mth(entries[:m]), mth(entries), proof)


def test_root_with_a_leaf_is_the_root_once_it_is_appended():
    for n in range(0, 20):
        tree = tree_of(DATA[:n])
        assert tree.root_with(merkle.leaf_hash(b"next")) == mth([*DATA[:n], b"next"])
        assert tree.size == n


def test_a_changed_entry_fails_inclusion_and_says_so():
    tree = tree_of(DATA[:10])
    proof = tree.inclusion_proof(3, 10)
    with pytest.raises(merkle.ProofError, match="not in the log of size 10"):
        merkle.verify_inclusion(merkle.leaf_hash(b"entry 3, edited"), 3, 10, proof, tree.root())
    with pytest.raises(merkle.ProofError, match="shorter"):
        merkle.verify_inclusion(merkle.leaf_hash(DATA[3]), 3, 10, proof[:-1], tree.root())
    with pytest.raises(merkle.ProofError, match="outside"):
        merkle.verify_inclusion(merkle.leaf_hash(DATA[3]), 10, 10, proof, tree.root())


def test_a_log_rebuilt_with_one_entry_replaced_fails_consistency():
    seen = tree_of(DATA[:7])
    rebuilt = tree_of([*DATA[:4], b"a better figure", *DATA[5:12]])
    proof = rebuilt.consistency_proof(7, 12)
    with pytest.raises(merkle.ProofError, match="does not begin with the log of size 7"):
        merkle.verify_consistency(7, 12, seen.root(), rebuilt.root(), proof)
    with pytest.raises(merkle.ProofError, match="rewritten"):
        merkle.verify_consistency(7, 7, seen.root(), rebuilt.root(7), [])
    with pytest.raises(merkle.ProofError, match="shrank"):
        merkle.verify_consistency(7, 6, seen.root(), rebuilt.root(6), [])


def test_a_log_with_one_entry_removed_is_not_consistent_with_the_one_seen():
    seen = tree_of(DATA[:8])
    without = tree_of([*DATA[:3], *DATA[4:9]])  # entry 3 gone, one more appended: the same size again
    with pytest.raises(merkle.ProofError):
        merkle.verify_consistency(8, 8, seen.root(), without.root(), [])
    grown = tree_of([*DATA[:3], *DATA[4:12]])
    with pytest.raises(merkle.ProofError):
        merkle.verify_consistency(8, 11, seen.root(), grown.root(), grown.consistency_proof(8, 11))


def test_a_frontier_kept_at_one_size_leads_to_the_rfcs_root_at_every_later_size():
    for kept in (0, 1, 5, 8, 13):
        start = tree_of(DATA[:kept])
        hashes = [start._hash(s, s + w) for s, w in _subtrees(kept)]  # the perfect subtrees, largest first
        frontier = merkle.Frontier(kept, hashes)
        assert frontier.root() == mth(DATA[:kept])
        for n in range(kept + 1, 34):
            frontier.append(merkle.leaf_hash(DATA[n - 1]))
            assert (frontier.size, frontier.root()) == (n, mth(DATA[:n])), (kept, n)


def test_a_frontier_of_the_wrong_number_of_hashes_for_its_size_is_refused():
    with pytest.raises(ValueError, match="perfect subtrees"):
        merkle.Frontier(5, [b"\x00" * 32])


def _subtrees(size: int) -> list[tuple[int, int]]:
    found, start = [], 0
    for height in reversed(range(size.bit_length())):
        if size >> height & 1:
            found.append((start, 1 << height))
            start += 1 << height
    return found
