"""Benchmark: live acceptance (targets: ingesting 10,000 observations in <= 5 s; the deployment page in <= 100 ms
with a year of 1-minute windows stored, thinned as SPECHUB_LIVE_KEEP_DAYS keeps them).

Ingest goes through the real endpoint (Django's test client, the ingest token, validation, the windows, the verdict
after every push), 100 snapshots a push, the most a push may hold; the per-minute limit is lifted for the run, as
10,000 snapshots is a week of one deployment's pushes. The page is timed on a year: the last 7 days at one snapshot a
minute (10,080) and the 358 days before at one an hour (8,592), as the nightly thinning leaves them, over its year
span and its default week. The database is DATABASE_URL's, else a temporary SQLite file (the embedded default).
Run: `make bench` or `python -m bench.live [--repeats N]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # Django is set up inside main(): the push body's type is for the checker alone
    from registry.deployments.api import SnapshotFields

INGEST_TARGET_SECONDS = 5.0
PAGE_TARGET_SECONDS = 0.100
OBSERVATIONS = 10_000
PER_PUSH = 100


def setup(name: str = "live") -> None:
    """Django on DATABASE_URL, else a temporary SQLite file, migrated; the test client's host allowed."""
    if "DATABASE_URL" not in os.environ:
        os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp(prefix='spechub-bench-')}/{name}.sqlite3"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.conf import settings

    # The test client's host, and no per-query log (DEBUG keeps every query's text: not what a server runs).
    settings.ALLOWED_HOSTS, settings.DEBUG = ["testserver"], False


def certified_deployment(name: str) -> tuple[Any, Any, str]:
    """A user, a pair with a finished certification (AL 3.4 in [3.2, 3.6], k = 4), and a deployment of it."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from registry.catalog.services import pair_get_or_create
    from registry.deployments.services import deployment_create
    from registry.models import CertificationRun, HubModel
    from registry.states import RunState

    user, _ = User.objects.get_or_create(username=f"bench-{name}")
    verifier, _ = HubModel.objects.get_or_create(repo_id=f"bench/{name}-verifier", sha="a" * 40, role="verifier")
    draft, _ = HubModel.objects.get_or_create(repo_id=f"bench/{name}-draft", sha="b" * 40, role="draft")
    pair, _ = pair_get_or_create(verifier=verifier, draft=draft, method="draft_model", num_speculative_tokens=4)
    acceptance = {"mean_acceptance_length": 3.4, "mean_acceptance_length_interval": [3.2, 3.6], "per_position": []}
    document = {"schema_version": 3, "stages": {"speculative": {"acceptance": acceptance}}}
    CertificationRun.objects.create(pair=pair, engine="vllm", hardware="cpu", state=RunState.FINISHED, engine_version="0.32.0",
                                    finished_at=timezone.now(), result=document)  # fmt: skip
    deployment, token = deployment_create(owner=user, name=name, pair=pair)
    return user, deployment, token


def counters(index: int, start: float, every: float) -> SnapshotFields:
    """The index-th snapshot of a server drafting 40 steps a minute at AL 3.4 (2.4 accepted a step), 2 requests."""
    steps = 40 * index
    return {"read_at": start + every * index, "drafts": steps, "draft_tokens": 4 * steps, "accepted": 96 * index,
            "per_position": [36 * index, 28 * index, 20 * index, 12 * index], "requests": 2 * index,
            "started_at": 1000.0, "engine_version": "0.32.0", "k": 4}  # fmt: skip


def ingest(repeats: int) -> list[float]:
    """Seconds to push 10,000 snapshots through the endpoint, once per repeat (a fresh deployment each time)."""
    import json

    from django.test import Client, override_settings

    timings = []
    for repeat in range(repeats):
        _, deployment, token = certified_deployment(f"ingest-{repeat}")
        start = (datetime.now(UTC) - timedelta(days=8)).timestamp()
        bodies = [json.dumps({"snapshots": [counters(i, start, 60.0) for i in range(first, first + PER_PUSH)]})
                  for first in range(1, OBSERVATIONS + 1, PER_PUSH)]  # fmt: skip
        client, path = Client(), f"/api/v1/deployments/{deployment.pk}/observations/"
        with override_settings(SPECHUB_LIVE_SNAPSHOTS_PER_MINUTE=10**9):
            began = time.perf_counter()
            for body in bodies:
                answer = client.post(path, body, content_type="application/json", headers={"Authorization": f"Bearer {token}"})
                assert answer.status_code == 201, answer.content[:300]
            timings.append(time.perf_counter() - began)
    return timings


def a_year(deployment: Any) -> int:
    """Store a year of one deployment's snapshots as the thinning leaves them: a minute apart for 7 days, an hour
    apart before; each with its window."""
    from kernel import live
    from registry.deployments.services import _row
    from registry.models import LiveSnapshot

    now = datetime.now(UTC).timestamp()
    times = [now - 365 * 86400 + 3600 * h for h in range(358 * 24)] + [now - 7 * 86400 + 60 * m for m in range(7 * 1440)]
    rows, previous = [], None
    for index, at in enumerate(times, start=1):
        snapshot = live.Snapshot(at, 40 * index, 160 * index, 96 * index, (36 * index, 28 * index, 20 * index, 12 * index),
                                 2 * index, 1000.0, "0.32.0", 4)  # fmt: skip
        rows.append(_row(deployment, snapshot, live.window(previous, snapshot) if previous else None))
        previous = snapshot
    LiveSnapshot.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


def page(repeats: int) -> tuple[int, dict[int, list[float]]]:
    from django.test import Client

    user, deployment, _ = certified_deployment("page")
    stored = a_year(deployment)
    client = Client()
    client.force_login(user)
    timings: dict[int, list[float]] = {}
    for days in (365, 7):
        path = f"/deployments/{deployment.pk}/?days={days}"
        assert client.get(path).status_code == 200  # warm: templates compiled, connection open
        for _ in range(repeats):
            began = time.perf_counter()
            answer = client.get(path)
            timings.setdefault(days, []).append(time.perf_counter() - began)
            assert answer.status_code == 200 and b'data-chart="live-acceptance"' in answer.content
    return stored, timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    setup()
    from django.db import connection

    print(f"live acceptance on {connection.vendor}")
    timings = ingest(args.repeats)
    worst = max(timings)
    print(f"  ingest {OBSERVATIONS:,} snapshots, {PER_PUSH} a push: median {statistics.median(timings):.2f} s, "
          f"worst {worst:.2f} s over {args.repeats} (target <= {INGEST_TARGET_SECONDS:.0f} s): "
          f"{'PASS' if worst <= INGEST_TARGET_SECONDS else 'FAIL'}")  # fmt: skip
    stored, pages = page(max(args.repeats, 10))
    for days, seconds in pages.items():
        median = statistics.median(seconds)
        verdict = "PASS" if median <= PAGE_TARGET_SECONDS else "FAIL"
        print(f"  deployment page over {days} days, {stored:,} snapshots stored: median {median * 1000:.0f} ms "
              f"(target <= {PAGE_TARGET_SECONDS * 1000:.0f} ms): {verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
