"""Benchmark: 200 self-hosted workers polling one registry at once (issue 41; targets: claim p95 at most 50 ms, and
no run claimed twice).

It creates (or empties) a database `spechub_bench_workers` on the server in DATABASE_URL, registers 200 workers and
queues 400 runs on their label through the services, then serves the registry as docker-compose.yml does (gunicorn,
two workers) and has every worker poll POST /api/v1/workers/claim/ at once (asyncio, one connection each) until the
queue is empty: first steadily (each polls every 10 s and holds a run 20 s), then in a storm (all at once, back to
back, the worst case). It prints the claim latencies of each (every answer, 200 or 204) and how many runs were
claimed more than once (from the answers, the runs' attempts and the audit log).

Run: `python -m bench.workers [--workers 200] [--runs 400] [--web '<gunicorn options>']`; the suite runs it tiny
(tests/test_benchmarks_run.py).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import yaml

from bench.database import use_bench_database
from zoo.localhub import free_port

DATABASE = "spechub_bench_workers"
LABEL = "gpu.h100"
ROOT = Path(__file__).resolve().parent.parent


def fill(workers: int) -> list[str]:
    """Register `workers` workers of one owner, each qualified on its label (a claim checks it, as in production);
    return their credentials."""
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from registry.fleet.services import registration_token_create, worker_qualify, worker_register
    from registry.models import HubModel

    call_command("migrate", verbosity=0)
    owner = User.objects.create_user("team")
    HubModel.objects.create(repo_id="org/verifier", sha="a" * 40, role="verifier")
    credentials = []
    for number in range(workers):
        _, token = registration_token_create(owner=owner, labels=[LABEL])
        worker, credential = worker_register(secret=token, name=f"box-{number}", engine_build="0.32.0", evidence={})
        worker_qualify(worker=worker, document=record(seed=number))
        credentials.append(credential)
    return credentials


def record(seed: int) -> dict[str, object]:
    """A qualification record of the registry's controls, all passing, as a worker's controls would send it."""
    from django.conf import settings

    from kernel import qualification as q

    names = settings.SPECHUB_QUALIFY_CONTROLS
    passing: dict[str, object] = {"method": None, "draft": None, "outcome": q.PASS, "summary": "bench", "sampling": []}
    controls: list[dict[str, object]] = [{"name": name, **passing} for name in names]
    made: dict[str, object] = {
        "kind": q.KIND, "schema_version": q.SCHEMA_VERSION, "engine": settings.SPECHUB_DEFAULT_ENGINE, "engine_build": "0.32.0",
        "hardware": LABEL, "dtype": settings.SPECHUB_ENGINE_DTYPE, "k": 4, "temperature": 1.0, "alpha": 0.001,
        "power": 0.99, "tv": settings.SPECHUB_QUALIFY_TV, "seed": seed, "versions": {}, "device": LABEL,
        "controls": controls, "seconds": 0.0,
    }  # fmt: skip
    made["digest"] = q.digest_of(made)
    return made


def queue(runs: int) -> None:
    """Queue `runs` runs on the workers' owner's own workload, on their label: what an unapproved worker may claim
    (through the models: nothing is dispatched)."""
    from django.contrib.auth.models import User

    from registry.models import CertificationRun, HubModel, Pair, Workload

    owner, verifier = User.objects.get(username="team"), HubModel.objects.get(repo_id="org/verifier")
    workload, _ = Workload.objects.get_or_create(owner=owner, name="bench", defaults={
        "verifier": verifier, "sha256": "c" * 64, "format": "suite", "total_requests": 1, "unique_requests": 1})  # fmt: skip
    first = Pair.objects.count()
    pairs = (Pair(verifier=verifier, method="ngram", num_speculative_tokens=4, identity=f"{first + i:064x}") for i in range(runs))
    made = Pair.objects.bulk_create(pairs)
    CertificationRun.objects.bulk_create(
        CertificationRun(pair=pair, engine="vllm", hardware=LABEL, requested_by=owner, workload=workload) for pair in made
    )


async def poll(client: httpx.AsyncClient, credential: str, pace: Pace, latencies: list[float], claimed: list[int]) -> None:
    """One worker: claim; with a run, hold it `pace.run` seconds (it measures nothing: a claim's cost is the subject),
    without one wait `pace.poll` seconds; until `pace.until`. A storm has no waits at all."""
    await asyncio.sleep(pace.offset())
    while time.perf_counter() < pace.until:
        started = time.perf_counter()
        answer = await client.post("/api/v1/workers/claim/", headers={"Authorization": f"Worker {credential}"})
        latencies.append(time.perf_counter() - started)
        if answer.status_code == 204:
            if pace.storm:
                return
            await asyncio.sleep(pace.poll)
            continue
        answer.raise_for_status()
        claimed.append(answer.json()["run"])
        await asyncio.sleep(pace.run)


@dataclass
class Pace:
    poll: float
    run: float
    until: float
    storm: bool = False

    def offset(self) -> float:
        return 0.0 if self.storm else random.uniform(0, self.poll)  # noqa: S311 - a schedule, not a secret


async def phase(base: str, credentials: list[str], pace: Pace) -> tuple[list[float], list[int], float]:
    latencies: list[float] = []
    claimed: list[int] = []
    started = time.perf_counter()
    limits = httpx.Limits(max_connections=len(credentials))
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        await asyncio.gather(*(poll(client, c, pace, latencies, claimed) for c in credentials))
    return latencies, claimed, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--seconds", type=float, default=40.0, help="How long the steady phase polls.")
    parser.add_argument("--poll", type=float, default=10.0, help="The steady phase's poll interval (the worker's default).")
    parser.add_argument("--hold", type=float, default=20.0, help="How long a worker holds a run it claimed, steadily.")
    parser.add_argument("--web", default=None, help="gunicorn's options for the web tier (default: docker-compose.yml's "
                        "web command: what is measured is what is deployed), e.g. '--workers 2 --threads 8'.")  # fmt: skip
    args = parser.parse_args()
    # One team's fleet: its owner's limit raised to it, as an operator raises it for a team that runs one.
    os.environ["SPECHUB_WORKERS_PER_USER"] = str(max(args.workers, 20))
    database = use_bench_database(DATABASE, fresh=True)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line a request, else
    credentials = fill(args.workers)
    port = free_port()
    from kernel import certificates

    public = certificates.public_key_text(certificates.private_key_from_seed(certificates.new_seed()).public_key())
    env = {**os.environ, "DATABASE_URL": database, "DEBUG": "0", "SECRET_KEY": "bench", "ALLOWED_HOSTS": "127.0.0.1",
           "SECURE_SSL_REDIRECT": "0", "SPECHUB_SIGNING_PUBLIC_KEY": public}  # fmt: skip
    env.pop("SPECHUB_SIGNING_KEY", None)  # the web tier holds only the public key
    options = shlex.split(args.web) if args.web is not None else compose_web_options()
    command = [sys.executable, "-m", "gunicorn", "registry.wsgi", "--bind", f"127.0.0.1:{port}", *options]
    print(f"web tier: gunicorn {' '.join(options)}" + ("" if args.web is not None else " (docker-compose.yml's)"))
    log = (ROOT / "var" / "bench-workers-gunicorn.log").open("w")
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(base)
        load_before = os.getloadavg()[0]
        # Steady: each worker polls every 10 s (the default) from a random start, and holds a run 20 s.
        queue(args.runs)
        with Share(server.pid) as steady_share:
            steady = asyncio.run(phase(base, credentials, Pace(args.poll, args.hold, until=time.perf_counter() + args.seconds)))
        # The storm: every worker claims back to back at once until the queue is empty (the worst case).
        queue(len(steady[1]))  # the queue holds `runs` again
        with Share(server.pid) as storm_share:
            storm = asyncio.run(phase(base, credentials, Pace(poll=0.0, run=0.0, until=float("inf"), storm=True)))
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"{args.workers} workers, {args.runs} runs queued, load average {load_before:.2f} before")
    report(f"steady (poll {args.poll:g} s, a run {args.hold:g} s)", *steady, steady_share, target=50)
    report("storm (all at once, back to back)", *storm, storm_share, target=250)
    check(steady[1] + storm[1], args.runs + len(steady[1]))


def _wait(base: str) -> None:
    for _ in range(300):
        try:
            httpx.get(f"{base}/healthz", timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"the registry at {base} did not answer")


def report(name: str, latencies: list[float], claimed: list[int], seconds: float, share: Share, *, target: int) -> None:
    print(f"{name}: {share}")
    if not latencies:
        print(f"{name}: no claims in {seconds:.1f} s")
        return
    # A tiny run (the suite's, tests/bench) may answer once: its percentiles are that answer.
    cuts = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) > 1 else latencies * 99
    p50, p95 = (cuts[i] * 1000 for i in (49, 94))
    print(f"{name}: {len(latencies)} claims in {seconds:.1f} s ({len(claimed)} with a run, {len(latencies) / seconds:.0f} "
          f"answers/s); latency p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {max(latencies) * 1000:.1f} ms (target p95 <= "
          f"{target} ms)")  # fmt: skip


class Share:
    """The machine's CPU over a phase, as /proc/stat and psutil count it: all of it, the web tier's (gunicorn and its
    workers), this client's, and the rest (PostgreSQL, and whatever else runs)."""

    def __init__(self, web: int) -> None:
        self.web = psutil.Process(web)

    def __enter__(self) -> Share:
        self.started, self.before = time.perf_counter(), self._seconds()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall, after = time.perf_counter() - self.started, self._seconds()
        self.used = {key: after[key] - self.before.get(key, 0.0) for key in after}

    def _seconds(self) -> dict[str, float]:
        times = psutil.cpu_times()
        web = [self.web, *self.web.children(recursive=True)]
        return {"all": times.user + times.system + times.nice, "web": sum(_cpu(p) for p in web), "client": _cpu(psutil.Process())}

    def __str__(self) -> str:
        cores = psutil.cpu_count() or 1
        share = {key: 100 * used / (self.wall * cores) for key, used in self.used.items()}
        rest = share["all"] - share["web"] - share["client"]
        return (
            f"CPU over {self.wall:.1f} s on {cores} cores ({_model()}): {share['all']:.0f} % busy; the web tier "
            f"{share['web']:.0f} %, this client {share['client']:.0f} %, the rest (PostgreSQL and other processes) {rest:.0f} %"
        )


def _cpu(process: psutil.Process) -> float:
    try:
        used = process.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return float(used.user + used.system)


def _model() -> str:
    found = [
        line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")
    ]
    return found[0] if found else "unknown CPU"


def compose_web_options() -> list[str]:
    """gunicorn's options in docker-compose.yml's web command, less the app and its bind address."""
    command: list[str] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]["command"]
    options, rest = [], iter(command[2:])  # "gunicorn", "registry.wsgi"
    for option in rest:
        if option == "--bind":
            next(rest)
        else:
            options.append(option)
    return options


def check(claimed: list[int], runs: int) -> None:
    """No run claimed twice: by the answers, by the runs' attempts, and by the audit log."""
    from registry.models import CertificationRun, WorkerEvent

    twice = len(claimed) - len(set(claimed))
    attempts = CertificationRun.objects.filter(attempts__gt=1).count()
    logged = WorkerEvent.objects.filter(action="claimed").values("run").distinct().count()
    print(f"claimed twice: {twice} (answers), {attempts} (runs past attempt 1); runs claimed {len(set(claimed))} of {runs}, "
          f"in the audit log {logged}")  # fmt: skip
    if twice or attempts or logged != len(set(claimed)) or len(set(claimed)) != runs:
        raise SystemExit("FAIL: a run was claimed twice or not at all")


if __name__ == "__main__":
    main()
