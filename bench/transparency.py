"""Benchmark for the transparency log at scale (issues 55 and 64); prints its figures.

The log grows through each of 10,000, 100,000 and 1,000,000 entries below --entries, then to --entries itself
(default 10,000). At each scale:

F   the log filled in bulk to the scale less APPENDED: run and certificate rows copied from one template row in SQL,
    the entries, with the roots log_append would store, written through COPY. Its seconds are printed; it is a fill,
    not a figure with a target. The bulk's certificate files are placeholders, not signed: nothing timed reads them.
T1  the last APPENDED appended through log_append itself (the head locked, the tree held to the database, the entry
    written and the checkpoint signed), one transaction each, by a process whose tree is warm: ms per append, median
    and p95 (target: no slower at 1,000,000 entries than at 10,000)
T2  inclusion proofs, GET /api/v1/log/proof/inclusion by a random certificate file's SHA-256, from the web tier as
    docker-compose.yml runs it (gunicorn, two sync workers, started afresh at each scale), while another process
    appends --append-rate entries a second through log_append (so each gunicorn worker extends its tree as it
    answers): a fresh worker's first request (it reads the whole log); then the median and p95 one request at a time;
    paced, --rate requests a second as Poisson arrivals with up to --clients in flight, each timed from when it was
    due (target p95 <= 50 ms); and in a storm, --storm clients back to back, as bench/workers.py's claim storm: there
    two sync workers queue the requests, so its latency is about --storm over the rate answered (Little's law), and
    says how much each request costs more than how the log scales
T3  consistency proofs, GET /api/v1/log/proof/consistency from a random size to the latest, the same ways; then the
    storm's floor: GET /healthz, which reads neither the database nor the log, the same storm

Every timed phase holds /tmp/spechub-bench.lock, and its line ends with the CPU and how much of the machine's cores
this benchmark's processes (itself, gunicorn, the appender, their PostgreSQL backends) and all others used over it.

Run: `make bench` or `python -m bench.transparency [--entries N] [--rate R] [--storm C]` (DATABASE_URL's server, a
database of its own, made afresh unless --reuse); `--entries 300` runs in seconds, `--entries 1000000` prints each of
10,000, 100,000 and 1,000,000 entries (about ten minutes here, the fill 75 s of them).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import logging
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from kernel.transparency import entries, merkle

SCALES = (10_000, 100_000, 1_000_000)
APPENDED = 200
APPENDER_CERTIFICATES = 4000  # more than the appender logs over T2 and T3 at the default rate
LOCK = Path("/tmp/spechub-bench.lock")  # noqa: S108 - shared with the other benchmarks on this machine by name
ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER = """'{"format":"spechub-bench","serial":' || r.id || '}'"""


@dataclass
class Log:
    """What the fill keeps between scales: the template rows it copies and the frontier of the log it wrote."""

    run: int
    certificate: int
    frontier: merkle.Frontier = field(default_factory=merkle.Frontier)


def configure() -> str:
    """Set the environment this process and its children share, before Django starts; return the public key."""
    from kernel import certificates

    seed = os.environ.setdefault("SPECHUB_SIGNING_KEY", certificates.new_seed())
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("SECRET_KEY", "bench")
    os.environ.update(ALLOWED_HOSTS="127.0.0.1", SECURE_SSL_REDIRECT="0")
    os.environ.pop("SPECHUB_SIGNING_PUBLIC_KEY", None)
    return certificates.public_key_text(certificates.private_key_from_seed(seed).public_key())


def started_log() -> Log:
    """Make the template rows: one run and its certificate, which the fill copies and the log never holds."""
    from django.core.management import call_command
    from django.utils import timezone

    from registry.models import Certificate, CertificationRun, HubModel, LogHead, Pair

    call_command("migrate", verbosity=0)
    verifier = HubModel.objects.create(repo_id="org/verifier", sha="a" * 40, role="verifier")
    pair = Pair.objects.create(verifier=verifier, method="ngram", num_speculative_tokens=4)
    run = CertificationRun.objects.create(pair=pair, hardware="cpu", engine="vllm")
    now = timezone.now()
    certificate = Certificate.objects.create(pair=pair, run=run, verdict="certified", digest="0" * 64, issued_at=now,
                                             expires_at=now, document="{}")  # fmt: skip
    LogHead.objects.create(pk=1)
    return Log(run.pk, certificate.pk)


def reused_log() -> Log:
    """Return the log a previous run left, its frontier read back from the entries."""
    from registry.models import Certificate

    template = Certificate.objects.order_by("pk").values_list("pk", "run_id").first()
    assert template is not None, "--reuse: the database holds no log to reuse"
    log = Log(template[1], template[0])
    caught_up(log)
    return log


def copies(log: Log, count: int) -> list[int]:
    """Copy the template run `count` times, each with a certificate of its own; return the certificates' ids."""
    from django.db import connection

    from registry.models import Certificate, CertificationRun

    quote = connection.ops.quote_name
    runs, certs = quote(CertificationRun._meta.db_table), quote(Certificate._meta.db_table)
    run_columns = ", ".join(quote(str(f.column)) for f in CertificationRun._meta.concrete_fields if not f.primary_key)
    cert_columns = [str(f.column) for f in Certificate._meta.concrete_fields if not f.primary_key]
    chosen = {"run_id": "r.id", "document": PLACEHOLDER}
    picked = ", ".join(chosen.get(column, f"t.{quote(column)}") for column in cert_columns)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {runs} ({run_columns}) SELECT {run_columns} FROM {runs}, generate_series(1, %s) "  # noqa: S608 - names
                       f"WHERE id = %s RETURNING id", [count, log.run])  # fmt: skip
        made = sorted(row[0] for row in cursor.fetchall())
        cursor.execute(f"INSERT INTO {certs} ({', '.join(map(quote, cert_columns))}) SELECT {picked} FROM {certs} t, "  # noqa: S608
                       f"{runs} r WHERE t.id = %s AND r.id BETWEEN %s AND %s ORDER BY r.id RETURNING id",
                       [log.certificate, made[0], made[-1]])  # fmt: skip
        return sorted(row[0] for row in cursor.fetchall())


def caught_up(log: Log) -> None:
    """Add to the frontier the leaves logged after it (by log_append: T1 and the appender)."""
    from registry.models import LogEntry

    later = LogEntry.objects.filter(index__gte=log.frontier.size).order_by("index").values_list("leaf_hash", flat=True)
    for leaf in later.iterator(chunk_size=20_000):
        log.frontier.append(bytes(leaf))


def filled(log: Log, size: int) -> float:
    """Log certificates in bulk until the log holds `size` entries; return the seconds it took."""
    from django.db import connection

    from registry.models import LogHead

    started = time.perf_counter()
    caught_up(log)
    if size > log.frontier.size:
        made = copies(log, size - log.frontier.size)
        for at in range(0, len(made), 50_000):
            logged(log, made[at : at + 50_000])
        LogHead.objects.filter(pk=1).update(size=log.frontier.size)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")  # as autovacuum would have by now: the visibility map index-only scans read
    return time.perf_counter() - started


def logged(log: Log, made: list[int]) -> None:
    """Write the entries of certificates `made` (consecutive ids) through COPY, with the roots log_append stores."""
    from django.db import connection
    from django.utils import timezone

    from registry.models import Certificate, LogEntry

    documents = Certificate.objects.filter(pk__range=(made[0], made[-1])).order_by("pk").values_list("pk", "document")
    rows = []
    for certificate, document in list(documents):
        data = document.encode()
        log.frontier.append(entries.entry_leaf(data))
        rows.append((log.frontier.size - 1, "certificate", certificate, data, entries.entry_sha256(data),
                     entries.entry_leaf(data), log.frontier.root(), timezone.now()))  # fmt: skip
    columns = '"index", kind, certificate_id, entry, entry_sha256, leaf_hash, root_hash, logged_at'
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {LogEntry._meta.db_table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def settled() -> None:
    """Write the fill's pages out before anything is timed: else the checkpoint PostgreSQL starts after a gigabyte of
    WAL lands in T1 and T2 (appends at 1,000,000 entries took 24 ms median and 188 ms p95 so, 3 to 6 and 4 to 8 after)."""
    from django.db import DatabaseError, connection

    with connection.cursor() as cursor, contextlib.suppress(DatabaseError):  # CHECKPOINT needs a superuser
        cursor.execute("CHECKPOINT")


def signed_copies(log: Log, count: int) -> list[tuple[object, bytes]]:
    """Return `count` new certificates, each with its file signed, as log_append is given them."""
    from kernel import certificates
    from registry.certificates.services import signing_key
    from registry.models import Certificate

    key, made = signing_key(), copies(log, count)
    files = {pk: certificates.sign({"format": certificates.FORMAT, "serial": pk}, key) for pk in made}  # type: ignore[typeddict-item]
    rows = [Certificate(pk=pk, document=data.decode()) for pk, data in files.items()]
    Certificate.objects.bulk_update(rows, ["document"], batch_size=500)
    found = Certificate.objects.in_bulk(made)
    return [(found[pk], files[pk]) for pk in made]


def appends(log: Log, count: int) -> list[float]:
    """Append `count` signed certificates through log_append, one transaction each; return each one's ms."""
    from registry.certificates.services import signing_key
    from registry.models import EntryKind
    from registry.transparency.selectors import log_tree
    from registry.transparency.services import log_append

    key, logged, timings = signing_key(), signed_copies(log, count), []
    log_tree()  # this process's tree, read once: a process's first read is timed in T2
    for certificate, data in logged:
        started = time.perf_counter()
        log_append(kind=EntryKind.CERTIFICATE, certificate=certificate, entry=data, key=key)  # type: ignore[arg-type]
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def appender(first: int, last: int, rate: float) -> None:
    """Append certificates `first` to `last` (placeholder files) through log_append, `rate` a second, until killed."""
    from registry.certificates.services import signing_key
    from registry.models import Certificate, EntryKind
    from registry.transparency.services import log_append

    key = signing_key()
    for number, certificate in enumerate(Certificate.objects.filter(pk__gte=first, pk__lte=last).order_by("pk")):
        due = time.perf_counter() + 1 / rate
        log_append(kind=EntryKind.CERTIFICATE, certificate=certificate, entry=certificate.document.encode(), key=key)
        if number == 0:
            print("ready", flush=True)
        time.sleep(max(0.0, due - time.perf_counter()))


@dataclass
class Usage:
    """CPU seconds used so far: by the whole machine, and by this benchmark's processes."""

    at: float
    machine: float
    ours: dict[int, float]


def usage(database: str) -> Usage:
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _wait, irq, softirq, steal = (int(n) for n in stat.readline().split()[1:9])
    machine = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    me = psutil.Process()
    processes = [me, *me.children(recursive=True)]
    with contextlib.suppress(psutil.Error):  # PostgreSQL's backends for this database are ours too
        processes += [p for p in psutil.process_iter(["cmdline"]) if database in " ".join(p.info["cmdline"] or [])]
    ours = {}
    for process in processes:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            ours[process.pid] = times.user + times.system
    return Usage(time.monotonic(), machine, ours)


def cpu_model() -> str:
    with open("/proc/cpuinfo") as info:
        names = [line.split(":", 1)[1].strip() for line in info if line.startswith("model name")]
    return f"{names[0] if names else 'unknown CPU'} x{len(names)}"


@dataclass
class Phase:
    """A timed phase's share of the machine, filled in when it ends."""

    database: str
    shares: str = ""


@contextlib.contextmanager
def timed(database: str) -> Iterator[Phase]:
    """Hold the benchmarks' lock over a timed phase, and measure who else used the CPU meanwhile."""
    phase = Phase(database)
    with LOCK.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        before = usage(database)
        yield phase
        after = usage(database)
    seconds = max(after.at - before.at, 1e-3)
    ours = sum(used - before.ours.get(pid, 0.0) for pid, used in after.ours.items()) / seconds
    others = max(0.0, (after.machine - before.machine) / seconds - ours)
    phase.shares = f"[{cpu_model()}; cores busy: this benchmark {ours:.2f}, other processes {others:.2f}]"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def web_tier(database_url: str, public_key: str) -> Iterator[str]:
    """Serve the registry as docker-compose.yml does (gunicorn, two sync workers, the public key alone)."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "SPECHUB_SIGNING_PUBLIC_KEY": public_key}
    env.pop("SPECHUB_SIGNING_KEY")
    command = [sys.executable, "-m", "gunicorn", "registry.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2"]
    (ROOT / "var").mkdir(exist_ok=True)
    with (ROOT / "var" / "bench-transparency-gunicorn.log").open("a") as log:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"{base}/healthz", timeout=2)
                break
            time.sleep(0.2)
        else:
            raise SystemExit(f"the registry at {base} did not answer: see var/bench-transparency-gunicorn.log")
        yield base
    finally:
        server.terminate()
        server.wait(timeout=60)


@contextlib.contextmanager
def appending(log: Log, args: argparse.Namespace, database_url: str) -> Iterator[None]:
    """Run the appender in a process of its own, once it has appended its first entry (it read the log first)."""
    made = copies(log, APPENDER_CERTIFICATES)
    command = [sys.executable, "-m", "bench.transparency", "--database", args.database, "--append",
               f"{made[0]}:{made[-1]}", "--append-rate", str(args.append_rate)]  # fmt: skip
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready", "the appender did not start"
        yield
    finally:
        child.terminate()
        child.wait(timeout=60)


async def _timed_gets(base: str, paths: list[str], clients: int) -> list[float]:
    latencies: list[float] = []
    queue = iter(paths)
    async with httpx.AsyncClient(base_url=base, timeout=300, limits=httpx.Limits(max_connections=clients)) as client:

        async def one() -> None:
            for path in queue:
                started = time.perf_counter()
                answer = await client.get(path)
                latencies.append((time.perf_counter() - started) * 1000)
                assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])

        await asyncio.gather(*(one() for _ in range(clients)))
    return latencies


def timed_gets(base: str, paths: list[str], clients: int) -> tuple[list[float], float]:
    """Return each request's ms, `clients` of them at once back to back, and the requests answered a second."""
    started = time.perf_counter()
    latencies = asyncio.run(_timed_gets(base, paths, clients))
    return latencies, len(paths) / (time.perf_counter() - started)


async def _paced_gets(base: str, paths: list[str], rate: float, clients: int) -> list[float]:
    latencies: list[float] = []
    rng, gate = random.Random(0), asyncio.Semaphore(clients)  # noqa: S311 - a schedule, not a secret
    async with httpx.AsyncClient(base_url=base, timeout=300, limits=httpx.Limits(max_connections=clients)) as client:

        async def one(path: str, due: float) -> None:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            async with gate:
                answer = await client.get(path)
            # From when it was due: a request that waited for a free client counts its wait (no coordinated omission).
            latencies.append((time.perf_counter() - due) * 1000)
            assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])

        due, tasks = time.perf_counter(), []
        for path in paths:
            due += rng.expovariate(rate)
            tasks.append(one(path, due))
        await asyncio.gather(*tasks)
    return latencies


def paced_gets(base: str, paths: list[str], rate: float, clients: int) -> list[float]:
    """Return each request's ms, sent at `rate` a second on average (Poisson arrivals), at most `clients` at once."""
    return asyncio.run(_paced_gets(base, paths, rate, clients))


def percentile(found: list[float], share: float) -> float:
    return sorted(found)[min(len(found) - 1, int(len(found) * share))]


def spread(found: list[float]) -> str:
    return f"median {statistics.median(found):.1f} ms, p95 {percentile(found, 0.95):.1f} ms"


def inclusion_paths(size: int, count: int, rng: random.Random) -> list[str]:
    from registry.models import LogEntry

    wanted = [rng.randrange(size) for _ in range(count)]
    found = dict(LogEntry.objects.filter(index__in=set(wanted)).values_list("index", "entry_sha256"))
    return [f"/api/v1/log/proof/inclusion?certificate={found[index]}" for index in wanted if index in found]


def consistency_paths(size: int, count: int, rng: random.Random) -> list[str]:
    return [f"/api/v1/log/proof/consistency?from={rng.randrange(1, size)}" for _ in range(count)]


@dataclass
class Figures:
    """One scale's figures, for the closing table."""

    size: int
    fill_s: float
    append_ms: list[float]
    first_ms: float = 0.0
    proofs: dict[str, list[float]] = field(default_factory=dict)  # paced, by kind of proof
    storms: dict[str, list[float]] = field(default_factory=dict)  # back to back


def measured_proofs(figures: Figures, base: str, args: argparse.Namespace) -> list[str]:
    """T2 and T3 at one scale, against a fresh web tier, the appender running; return their lines."""
    rng, size, serial = random.Random(figures.size), figures.size, max(50, args.requests // 10)  # noqa: S311 - choices, not secrets
    path = inclusion_paths(size, 1, rng)[0]
    started = time.perf_counter()
    first = httpx.get(base + path, timeout=600)
    figures.first_ms = (time.perf_counter() - started) * 1000
    assert first.status_code == 200, first.text[:300]
    timed_gets(base, inclusion_paths(size, 4 * args.storm, rng), args.storm)  # both workers warm, as in service
    lines = []
    for name, paths in (("inclusion", inclusion_paths), ("consistency", consistency_paths)):
        one, _ = timed_gets(base, paths(size, serial, rng), 1)
        paced = paced_gets(base, paths(size, args.requests, rng), args.rate, args.clients)
        storm, answered = timed_gets(base, paths(size, args.requests, rng), args.storm)
        figures.proofs[name], figures.storms[name] = paced, storm
        label = "T2 inclusion" if name == "inclusion" else "T3 consistency"
        lines.append(f"{label} proofs at {size:,} entries: one at a time {spread(one)}; {args.rate:g} a second, up to "
                     f"{args.clients} at once: {spread(paced)} (target p95 <= 50 ms): {verdict(paced)}; {args.storm} "
                     f"clients back to back: {spread(storm)}, {answered:.0f} a second: {verdict(storm)}")  # fmt: skip
    floor, answered = timed_gets(base, ["/healthz"] * args.requests, args.storm)
    figures.storms["healthz"] = floor
    lines.append(f"   the storm's floor, GET /healthz (no database, no log: the web tier alone), {args.storm} clients back to "
                 f"back: {spread(floor)}, {answered:.0f} a second")  # fmt: skip
    return lines


def verdict(found: list[float]) -> str:
    return "OK" if percentile(found, 0.95) <= 50 else "OVER TARGET"


def scale(log: Log, size: int, args: argparse.Namespace, database_url: str, public_key: str) -> Figures:
    appended = min(APPENDED, size // 2)
    fill_s = filled(log, size - appended)
    print(f"F  the log filled to {log.frontier.size:,} entries in {fill_s:.1f} s (SQL copies and COPY)", flush=True)
    settled()
    with timed(args.database) as phase:
        timings = appends(log, appended)
    caught_up(log)
    figures = Figures(log.frontier.size, fill_s, timings)
    print(f"T1 {appended} appended through log_append, up to {figures.size:,} entries: {spread(timings)}, mean "
          f"{statistics.fmean(timings):.1f} ms {phase.shares}", flush=True)  # fmt: skip
    with web_tier(database_url, public_key) as base, timed(args.database) as phase, appending(log, args, database_url):
        lines = measured_proofs(figures, base, args)
    print("\n".join(lines))
    print(f"   a fresh gunicorn worker's first request: {figures.first_ms:.0f} ms; {args.append_rate:g} entries a second "
          f"appended meanwhile {phase.shares}", flush=True)  # fmt: skip
    return figures


def table(rows: list[Figures]) -> None:
    print("entries    | fill s | append p50/p95 ms | inclusion p50/p95 (storm p95) ms | consistency p50/p95 (storm p95) ms"
          " | healthz storm p95 | first request ms")  # fmt: skip
    for row in rows:
        proofs = " | ".join(
            f"{statistics.median(row.proofs[name]):6.1f} / {percentile(row.proofs[name], 0.95):6.1f} "
            f"({percentile(row.storms[name], 0.95):6.1f})"
            for name in ("inclusion", "consistency")
        )
        print(f"{row.size:>10,} | {row.fill_s:6.1f} | {statistics.median(row.append_ms):7.1f} / "
              f"{percentile(row.append_ms, 0.95):7.1f} | {proofs} | {percentile(row.storms['healthz'], 0.95):17.1f} | "
              f"{row.first_ms:9.0f}")  # fmt: skip


def parsed() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=10_000, help="The largest scale (default 10,000).")
    parser.add_argument("--rate", type=float, default=150.0, help="Proof requests a second, paced (default 150).")
    parser.add_argument("--clients", type=int, default=64, help="The most paced requests at once (default 64).")
    parser.add_argument("--storm", type=int, default=16, help="Clients back to back in the storm (default 16).")
    parser.add_argument(
        "--requests", type=int, help="Requests per proof kind, paced and in the storm (default 2,000; 200 below 10,000 entries)."
    )
    parser.add_argument("--append-rate", type=float, default=10.0, help="Entries a second appended during T2 and T3.")
    parser.add_argument("--database", default="spechub_bench_log")
    parser.add_argument("--reuse", action="store_true", help="Keep the database a previous run filled, and grow it.")
    parser.add_argument("--append", help=argparse.SUPPRESS)  # FIRST:LAST, the appender's own process
    args = parser.parse_args()
    if args.requests is None:
        args.requests = 2000 if args.entries >= 10_000 else 200
    return args


def main() -> int:
    from bench.database import use_bench_database

    args = parsed()
    public_key = configure()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    database_url = use_bench_database(args.database, fresh=not (args.reuse or args.append))
    if args.append:
        first, last = args.append.split(":")
        appender(int(first), int(last), args.append_rate)
        return 0
    log = reused_log() if args.reuse else started_log()
    sizes = [size for size in (*SCALES, args.entries) if log.frontier.size < size <= args.entries] or [args.entries]
    rows = [scale(log, size, args, database_url, public_key) for size in dict.fromkeys(sizes)]
    table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
