"""Distinct requests counted, a seeded bottom-k sample kept, and the whole digested into one identity."""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable, Iterator
from dataclasses import replace

from kernel.errors import UserError
from kernel.traffic.requests import KINDS, Limits, Request, Workload, canonical, storable


def collect(kind: str, requests: Iterator[Request], limits: Limits) -> Workload:
    """Count distinct requests, keep the seeded bottom-k sample, and digest the whole."""
    counts: dict[bytes, int] = {}  # raw digests: memory follows the distinct requests, never their length
    kept: list[tuple[int, bytes, Request]] = []  # a max-heap on the sketch key, as (-key, digest, request)
    total = 0
    for request in requests:
        total += 1
        if total > limits.max_requests:
            raise UserError("workload:too-large", f"line {request.line}: more than {limits.max_requests:,} requests, the limit.")
        digest = hashlib.sha256(canonical(storable(request)).encode()).digest()
        if digest in counts:
            counts[digest] += 1
            continue
        counts[digest] = 1
        _keep(kept, _sketch_key(limits.seed, digest), digest, request, limits.sample_size)
    if not counts:
        raise UserError("workload:invalid", "The file holds no requests.")
    sample = tuple(sorted((replace(r, count=counts[d]) for _, d, r in kept), key=lambda r: r.line))
    return Workload(kind, _identity(counts), total, len(counts), limits.seed, sample, _per_category(sample))


def _sketch_key(seed: int, digest: bytes) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{digest.hex()}".encode()).digest()[:8], "big")


def _keep(kept: list[tuple[int, bytes, Request]], key: int, digest: bytes, request: Request, size: int) -> None:
    if len(kept) < size:
        heapq.heappush(kept, (-key, digest, request))
    elif -kept[0][0] > key:
        heapq.heapreplace(kept, (-key, digest, request))


def _identity(counts: dict[bytes, int]) -> str:
    whole = hashlib.sha256()
    for digest in sorted(counts):
        whole.update(f"{digest.hex()} {counts[digest]}\n".encode())
    return whole.hexdigest()


def _per_category(sample: Iterable[Request]) -> dict[str, int]:
    found: dict[str, int] = {}
    for request in sample:
        found[request.category] = found.get(request.category, 0) + 1
    return {kind: found[kind] for kind in KINDS if kind in found}
