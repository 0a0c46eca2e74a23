"""Live ingest held on real processes: the per-minute limit against simultaneous pushes, and a watcher's clock far
ahead, through gunicorn (docker-compose.yml's web command, two workers) on PostgreSQL."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from registry.deployments.services import deployment_create
from registry.models import LiveSnapshot
from tests.support.factories import PairFactory
from tests.support.processes import compose_command, serving, worker_database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

PER_MINUTE = 120
PUSH = 100


def snapshot(read_at: float, step: int, started_at: float = 1000.0) -> dict[str, Any]:
    drafts = 10 * step
    return {"read_at": read_at, "drafts": drafts, "draft_tokens": 4 * drafts, "accepted": 2 * drafts,
            "per_position": [drafts, drafts // 2, drafts // 4, drafts // 8], "requests": step, "started_at": started_at,
            "engine_version": "0.32.0", "k": 4}  # fmt: skip


def test_three_simultaneous_pushes_of_100_store_at_most_120_and_a_clock_far_ahead_blocks_nothing(tmp_path):
    deployment, token = deployment_create(owner=User.objects.create_user("operator"), name="prod", pair=PairFactory.create())
    now = timezone.now().timestamp()
    env = {"DATABASE_URL": worker_database_url(), "SPECHUB_LIVE_SNAPSHOTS_PER_MINUTE": str(PER_MINUTE),
           "SPECHUB_LIVE_SNAPSHOTS_PER_PUSH": str(PUSH)}  # fmt: skip
    url_path = f"/api/v1/deployments/{deployment.pk}/observations/"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    batches = [[snapshot(now - 3000 + 300 * b + i, 100 * b + i + 1) for i in range(PUSH)] for b in range(3)]
    with serving(compose_command("web"), tmp_path, env) as base:

        def send(body: dict[str, Any]) -> httpx.Response:
            return httpx.post(base + url_path, content=json.dumps(body), headers=headers, timeout=60)

        with ThreadPoolExecutor(max_workers=3) as pool:
            answers = list(pool.map(send, [{"snapshots": batch} for batch in batches]))
        ahead = send({"snapshots": [snapshot(now + 200 * 365 * 86400, 400)]})
        started = send({"snapshots": [snapshot(now - 10, 401, started_at=1e308)]})
        settled = LiveSnapshot.objects.filter(deployment=deployment).count()
        later = send({"snapshots": [snapshot(now - 5, 402)]})
    statuses = sorted(a.status_code for a in answers)
    assert statuses.count(201) == 1 and set(statuses) <= {201, 422, 429}, [(a.status_code, a.text[:200]) for a in answers]
    assert settled == PUSH <= PER_MINUTE  # never 200 rows, as two pushes that each counted before the other stored
    # A clock 200 years ahead, or a start at 1e308, is refused with the reason, and stores nothing to block the next push.
    for refused in (ahead, started):
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "live:clock-ahead", refused.text
        assert "the watcher's clock is ahead" in refused.json()["error"]["message"]
    assert later.status_code == 201 and LiveSnapshot.objects.filter(deployment=deployment).count() == PUSH + 1, later.text
