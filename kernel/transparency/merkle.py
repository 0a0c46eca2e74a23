"""An RFC 9162 (RFC 6962) Merkle tree: leaf and node hashes, roots, and inclusion and consistency proofs.

Pure and Django-free: the registry builds proofs with it and `spechub verify` checks them. Hashes are raw
32-byte SHA-256 digests; positions count from zero, as the RFC's do.

The tree keeps every level's hashes, so a proof reads O(log n) of them. Only perfect subtrees are kept, and those
never change: appending hashes O(1) nodes on average, and a view taken before reads the same hashes after.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Sequence

HASH_SIZE = 32


class ProofError(Exception):
    """A proof does not hold: the tree it claims does not have the root or the leaf it was checked against."""


def leaf_hash(data: bytes) -> bytes:
    """Return MTH({d}) = SHA-256(0x00 || d)."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Return SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


EMPTY_ROOT = hashlib.sha256(b"").digest()


def _split(n: int) -> int:
    """Return the largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


class Tree:
    """The leaves' hashes in order, with every complete subtree's hash kept per level.

    Each level is one bytearray of 32-byte hashes (a log of a million leaves holds about 64 MB, not the 150 MB that
    a bytes object per hash costs). Only perfect subtrees are kept, and those never change: a view (`view()`) shares
    the hashes, and what is appended after it was taken neither changes what it reads nor its size."""

    def __init__(self, leaves: Iterable[bytes] = ()) -> None:
        self._levels: list[bytearray] = [bytearray()]
        self._size = 0
        self._read_only = False
        for leaf in leaves:
            self.append(leaf)

    @classmethod
    def built(cls, leaves: bytes | bytearray) -> Tree:
        """Return the tree of the leaf hashes concatenated in `leaves`, built a level at a time."""
        if len(leaves) % HASH_SIZE:
            raise ValueError(f"{len(leaves)} bytes are not a whole number of {HASH_SIZE}-byte hashes")
        tree = cls()
        tree._levels, tree._size = [bytearray(leaves)], len(leaves) // HASH_SIZE
        pair = 2 * HASH_SIZE
        while len(below := tree._levels[-1]) >= pair:
            pairs = range(0, len(below) - len(below) % pair, pair)
            tree._levels.append(bytearray(b"".join([hashlib.sha256(b"\x01" + below[at : at + pair]).digest() for at in pairs])))
        return tree

    @property
    def size(self) -> int:
        return self._size

    def view(self) -> Tree:
        """Return a read-only view of the tree as it is now, sharing its hashes (a thread may append meanwhile)."""
        found = copy.copy(self)
        found._read_only = True
        return found

    def append(self, leaf: bytes) -> None:
        """Add one leaf hash; each subtree it completes is hashed once."""
        if self._read_only:
            raise TypeError("a view of a tree is read-only")
        if len(leaf) != HASH_SIZE:
            raise ValueError(f"a leaf hash is {HASH_SIZE} bytes, not {len(leaf)}")
        self._levels[0] += leaf
        self._size += 1
        height, index, node = 0, self._size - 1, leaf
        while index % 2 == 1:
            node = node_hash(self._node(height, index - 1), node)
            height, index = height + 1, index // 2
            if len(self._levels) == height:
                self._levels.append(bytearray())
            self._levels[height] += node

    def leaf(self, index: int) -> bytes:
        if not 0 <= index < self._size:
            raise IndexError(f"the tree has no leaf {index}: it has {self._size}")
        return self._node(0, index)

    def _node(self, height: int, index: int) -> bytes:
        """Return the hash of the perfect subtree of 2**height leaves that is the index-th at its height."""
        return bytes(self._levels[height][index * HASH_SIZE : (index + 1) * HASH_SIZE])

    def _hash(self, start: int, end: int) -> bytes:
        """Return MTH(D[start:end]); a perfect aligned range is read, any other is split as the RFC splits."""
        width = end - start
        if width & (width - 1) == 0 and start % width == 0:
            return self._node(width.bit_length() - 1, start // width)
        k = _split(width)
        return node_hash(self._hash(start, start + k), self._hash(start + k, end))

    def root(self, size: int | None = None) -> bytes:
        """Return the root of the tree of the first `size` leaves (all of them by default)."""
        size = self.size if size is None else size
        self._check_size(size)
        return EMPTY_ROOT if size == 0 else self._hash(0, size)

    def frontier(self) -> Frontier:
        """Return the roots of the perfect subtrees the tree is made of, largest first: enough to append to it."""
        hashes, start = [], 0
        for height in reversed(range(self._size.bit_length())):
            if self._size >> height & 1:
                hashes.append(self._node(height, start >> height))
                start += 1 << height
        return Frontier(self._size, hashes)

    def root_with(self, leaf: bytes) -> bytes:
        """Return the root the tree would have with `leaf` appended, leaving the tree as it is."""
        frontier = self.frontier()
        frontier.append(leaf)
        return frontier.root()

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """Return PATH(index, D[0:size]), RFC 9162 section 2.1.3.1, nearest sibling first."""
        self._check_size(size)
        if not 0 <= index < size:
            raise ValueError(f"index {index} is not in a tree of size {size}")
        proof: list[bytes] = []
        start, end = 0, size
        while end - start > 1:
            k = _split(end - start)
            if index < start + k:
                proof.append(self._hash(start + k, end))
                end = start + k
            else:
                proof.append(self._hash(start, start + k))
                start += k
        return proof[::-1]

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """Return PROOF(old_size, D[0:new_size]), RFC 9162 section 2.1.4.1."""
        self._check_size(new_size)
        if not 0 <= old_size <= new_size:
            raise ValueError(f"a tree of size {old_size} cannot precede one of size {new_size}")
        if old_size in (0, new_size):
            return []
        return self._subproof(old_size, 0, new_size, True)

    def _subproof(self, m: int, start: int, end: int, whole: bool) -> list[bytes]:
        if m == end - start:
            return [] if whole else [self._hash(start, end)]
        k = _split(end - start)
        if m <= k:
            return [*self._subproof(m, start, start + k, whole), self._hash(start + k, end)]
        return [*self._subproof(m - k, start + k, end, False), self._hash(start, start + k)]

    def _check_size(self, size: int) -> None:
        if not 0 <= size <= self.size:
            raise ValueError(f"the tree has {self.size} leaves, not {size}")


class Frontier:
    """The roots of the perfect subtrees a tree of `size` leaves is made of, largest first (a compact range from 0).

    Enough to append leaves and compute each new root without the leaves before: a client that read the log up to
    `size` keeps these few hashes, then checks that the entries after them lead to a signed checkpoint's root."""

    def __init__(self, size: int = 0, hashes: Sequence[bytes] = ()) -> None:
        if size < 0 or len(hashes) != size.bit_count() or any(len(node) != HASH_SIZE for node in hashes):
            raise ValueError(f"a tree of {size} leaves is made of {max(size, 0).bit_count()} perfect subtrees' hashes")
        self.size, self.hashes = size, list(hashes)

    def append(self, leaf: bytes) -> None:
        """Add one leaf hash, merging each pair of equal subtrees it completes."""
        self.hashes.append(leaf)
        self.size += 1
        for _ in range((self.size & -self.size).bit_length() - 1):
            right, left = self.hashes.pop(), self.hashes.pop()
            self.hashes.append(node_hash(left, right))

    def root(self) -> bytes:
        """Return MTH of the leaves appended so far: the subtrees folded from the right, as the RFC splits."""
        if not self.hashes:
            return EMPTY_ROOT
        found = self.hashes[-1]
        for left in reversed(self.hashes[:-1]):
            found = node_hash(left, found)
        return found


def verify_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes) -> None:
    """Check an inclusion proof as RFC 9162 section 2.1.3.2 does; raise ProofError saying what failed."""
    if not 0 <= index < size:
        raise ProofError(f"index {index} is outside a log of size {size}")
    fn, sn, found = index, size - 1, leaf
    for sibling in proof:
        if sn == 0:
            raise ProofError("the inclusion proof is longer than a tree of this size needs")
        if fn & 1 or fn == sn:
            found = node_hash(sibling, found)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            found = node_hash(found, sibling)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("the inclusion proof is shorter than a tree of this size needs")
    if found != root:
        raise ProofError(f"entry {index} is not in the log of size {size} with that root: the proof leads to another root")


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]) -> None:
    """Check that the tree of `new_size` extends the one of `old_size` (RFC 9162 section 2.1.4.2); raise ProofError."""
    if old_size > new_size:
        raise ProofError(f"the log shrank from {old_size} entries to {new_size}")
    if old_size == new_size:
        if proof or old_root != new_root:
            raise ProofError(f"two different roots for the same log size {new_size}: the log was rewritten")
        return
    if old_size == 0:
        if proof:
            raise ProofError("a consistency proof from an empty log must be empty")
        return
    if not proof:
        raise ProofError(f"the consistency proof from size {old_size} to {new_size} is empty")
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # the old tree is a perfect subtree: its root is the proof's first node
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for node in path[1:]:
        if sn == 0:
            raise ProofError("the consistency proof is longer than these sizes need")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(node, fr), node_hash(node, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, node)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("the consistency proof is shorter than these sizes need")
    if fr != old_root:
        raise ProofError(f"the log of size {new_size} does not begin with the log of size {old_size} you saw: it was rewritten")
    if sr != new_root:
        raise ProofError(f"the consistency proof does not lead to the root of the log of size {new_size}")
