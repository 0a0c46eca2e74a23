"""Benchmark for the transparency log (issue 55); prints its figures.

T1  10,000 certificates in the log: the first ones written in bulk with the roots log_append would store (each
    append is a transaction of its own, so 10,000 of them on a busy 2-core machine take minutes), the last
    APPENDED through log_append itself (the head locked, the tree held to the database, the entry written and
    the checkpoint signed): milliseconds per append
T2  an inclusion proof through GET /api/v1/log/proof/inclusion, by the file's SHA-256, for random certificates:
    median and p95 over 1,000 requests with the process's tree warm (target p95 < 50 ms), and the first request
    of a process, which reads the whole log once
T3  a consistency proof through GET /api/v1/log/proof/consistency: p95 over 200 requests

Run: `make bench` or `python -m bench.transparency [--entries N]` (DATABASE_URL's server, a database of its own).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time

ENTRIES = int(sys.argv[sys.argv.index("--entries") + 1]) if "--entries" in sys.argv else 10_000
APPENDED = 200
DATABASE = "spechub_bench_log"


def fill() -> list[str]:
    """Return the SHA-256 of each logged certificate file, appending them first."""
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.utils import timezone

    from kernel import certificates
    from kernel.transparency import entries, merkle
    from registry.certificates.services import signing_key
    from registry.models import Certificate, CertificationRun, EntryKind, HubModel, LogEntry, LogHead, Pair
    from registry.transparency.services import log_append

    call_command("migrate", verbosity=0)
    verifier = HubModel.objects.create(repo_id="org/verifier", sha="a" * 40, role="verifier")
    pair = Pair.objects.create(verifier=verifier, method="ngram", num_speculative_tokens=4)
    runs = CertificationRun.objects.bulk_create([CertificationRun(pair=pair, hardware="cpu") for _ in range(ENTRIES)])
    key, now = signing_key(), timezone.now()
    files = [certificates.sign({"format": certificates.FORMAT, "serial": run.pk}, key) for run in runs]  # type: ignore[typeddict-item]
    fields = {"pair": pair, "verdict": "certified", "digest": "0" * 64, "issued_at": now, "expires_at": now}
    rows = Certificate.objects.bulk_create(
        [Certificate(run=run, document=data.decode(), **fields) for run, data in zip(runs, files, strict=True)]
    )
    bulk = ENTRIES - APPENDED
    tree, logged = merkle.Tree(), []
    for index, (certificate, data) in enumerate(zip(rows[:bulk], files[:bulk], strict=True)):
        tree.append(entries.entry_leaf(data))
        logged.append(LogEntry(index=index, kind=EntryKind.CERTIFICATE, certificate=certificate, entry=data,
                               entry_sha256=entries.entry_sha256(data), leaf_hash=tree.leaf(index), root_hash=tree.root(),
                               logged_at=now))  # fmt: skip
    LogEntry.objects.bulk_create(logged, batch_size=2000)
    LogHead.objects.create(pk=1, size=bulk)
    started = time.perf_counter()
    for certificate, data in zip(rows[bulk:], files[bulk:], strict=True):
        with transaction.atomic():
            log_append(kind=EntryKind.CERTIFICATE, certificate=certificate, entry=data, key=key)
    took = (time.perf_counter() - started) / APPENDED * 1000
    print(f"T1 {ENTRIES} certificates in the log, the last {APPENDED} appended through log_append: {took:.1f} ms each")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return [entries.entry_sha256(data) for data in files]


def percentile(found: list[float], share: float) -> float:
    return sorted(found)[int(len(found) * share)]


def measure(files: list[str]) -> None:
    from django.test import Client

    from registry.transparency import selectors

    client, rng = Client(), random.Random(0)  # noqa: S311 - which certificates to ask for, not security
    selectors._cached = selectors._Cached()  # a process that has not read the log yet
    started = time.perf_counter()
    first = client.get("/api/v1/log/proof/inclusion", {"certificate": files[0]}, secure=True)
    cold = (time.perf_counter() - started) * 1000
    assert first.status_code == 200, first.content[:300]
    timings = []
    for _ in range(1000):
        started = time.perf_counter()
        answer = client.get("/api/v1/log/proof/inclusion", {"certificate": rng.choice(files)}, secure=True)
        timings.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.content[:300]
    p95 = percentile(timings, 0.95)
    print(f"T2 inclusion proof in a log of {len(files)}: median {statistics.median(timings):.1f} ms, p95 {p95:.1f} ms "
          f"(target < 50 ms): {'OK' if p95 < 50 else 'OVER TARGET'}; a process's first {cold:.0f} ms")  # fmt: skip
    consistency = []
    for _ in range(200):
        start = rng.randrange(1, len(files))
        started = time.perf_counter()
        answer = client.get("/api/v1/log/proof/consistency", {"from": start}, secure=True)
        consistency.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.content[:300]
    print(f"T3 consistency proof: median {statistics.median(consistency):.1f} ms, p95 {percentile(consistency, 0.95):.1f} ms")


def main() -> int:
    from bench.database import use_bench_database

    os.environ["ALLOWED_HOSTS"] = "testserver"
    use_bench_database(DATABASE, fresh=True)
    measure(fill())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
