"""R8: a burst of 1,000 submissions from 20 users, good, duplicate and bad mixed, at the deployed web tier.

gunicorn (docker-compose.yml's command) on the test PostgreSQL and Redis, the gate reading the
toy zoo through olah. Every request must end as created, duplicate or refused (2xx), a 4xx with
a reason, or a 429 with Retry-After; never a 5xx; and the rows must match the answers exactly.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from registry.models import CertificationRun, Pair, Submission
from tests.support.processes import compose_command, serving, worker_database_url
from zoo import ORG

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]
USERS, PER_USER, QUOTA = 20, 50, 5
VERIFIER = f"{ORG}/llama-verifier"
PAYLOADS: list[dict[str, Any]] = [
    {"repo_id": f"{ORG}/llama-draft-1l", "verifier_repo_id": VERIFIER},  # compatible: one pair, then duplicates
    {"repo_id": f"{ORG}/eagle3-head"},  # compatible, names its verifier
    {"repo_id": f"{ORG}/broken-pickle-only", "verifier_repo_id": VERIFIER},  # refused by the gate
    {"repo_id": "../../etc/passwd"},  # refused by validation
    {"repo_id": f"{ORG}/no-such-repo", "verifier_repo_id": VERIFIER},  # not on the Hub
    {"repo_id": "x" * 5000},  # too long
    {"revision": "main"},  # no repo at all
]


def test_a_burst_of_a_thousand_submissions_ends_in_answers_the_rows_match(hub_settings, tmp_path):
    tokens = [Token.objects.create(user=User.objects.create_user(f"user{n}")).key for n in range(USERS)]
    requests = [(tokens[n % USERS], PAYLOADS[n % len(PAYLOADS)]) for n in range(USERS * PER_USER)]
    env = {"DATABASE_URL": worker_database_url(), "HF_ENDPOINT": hub_settings.endpoint}
    env.update(SPECHUB_SUBMISSION_RATE=f"{QUOTA}/hour", SPECHUB_HUB_CACHE=str(tmp_path / "hub-cache"))
    with serving(compose_command("web"), tmp_path, env) as base, httpx.Client(base_url=base, timeout=120) as client:

        def submit(request: tuple[str, dict[str, Any]]) -> httpx.Response:
            token, payload = request
            return client.post("/api/v1/submissions/", json=payload, headers={"Authorization": f"Token {token}"})

        with ThreadPoolExecutor(max_workers=USERS) as pool:
            answers = list(pool.map(submit, requests))

    statuses = Counter(answer.status_code for answer in answers)
    assert not [s for s in statuses if s >= 500], (statuses, [a.text[:400] for a in answers if a.status_code >= 500][:3])
    assert set(statuses) <= {200, 201, 400, 422, 429}, statuses
    for answer in answers:
        if answer.status_code >= 400:
            assert answer.json()["error"]["message"], answer.text[:300]
        if answer.status_code == 429:
            assert int(answer.headers["Retry-After"]) > 0

    stored = [answer.json() for answer in answers if answer.status_code in (200, 201)]
    assert Submission.objects.count() == len(stored)  # no lost and no doubled rows
    assert sorted(Submission.objects.values_list("id", flat=True)) == sorted(s["id"] for s in stored)
    by_status = Counter(s["status"] for s in stored)
    assert by_status["accepted"] == statuses[201] == 2 and Pair.objects.count() == 2, (by_status, statuses)
    assert CertificationRun.objects.count() == 2  # one run per new pair, however many asked at once
    assert set(by_status) <= {"accepted", "duplicate", "refused"}
    per_user = Counter(Submission.objects.values_list("submitted_by__username", flat=True))
    assert max(per_user.values()) <= QUOTA  # the quota held across gunicorn's workers
    assert statuses[429] > 0 and statuses[400] > 0 and statuses[422] > 0
