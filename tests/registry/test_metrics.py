"""/metrics: scrapeable by Prometheus's own parser, the pipeline read from the database and the real broker,
and closed to public addresses without the token."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from registry.models import CertificationRun, EngineBuild
from registry.runs.services import run_claim, run_create, run_progress
from tests.support.factories import PairFactory, RunFactory

pytestmark = pytest.mark.django_db(transaction=True)


def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = Client(REMOTE_ADDR="127.0.0.1").get("/metrics")
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.content.decode())
        for sample in family.samples
    }


def test_the_pipeline_is_counted_at_scrape_time_queue_depth_from_the_real_broker():
    with transaction.atomic():
        queued = run_create(pair=PairFactory.create(), hardware="cpu")  # dispatched to the cpu queue: nobody consumes it
    RunFactory.create(state="failed_user")
    EngineBuild.objects.create(hardware="cpu", engine="vllm", version="0.32.0", reported_by="worker-1")
    found = scrape()
    assert found[("spechub_runs", (("state", "queued"),))] == 1
    assert found[("spechub_runs", (("state", "failed_user"),))] == 1
    assert found[("spechub_runs", (("state", "finished"),))] == 0
    assert found[("spechub_queue_depth", (("queue", "cpu"),))] >= 1, queued
    assert (
        found[
            (
                "spechub_engine_build_info",
                (("engine", "vllm"), ("hardware", "cpu"), ("version", "0.32.0"), ("worker", "worker-1")),
            )
        ]
        == 1
    )


def test_requests_are_timed_by_route_and_status():
    Client().get("/healthz")
    Client().get("/no/such/page")
    found = scrape()
    assert found[("spechub_http_request_seconds_count", (("method", "GET"), ("route", "healthz"), ("status", "200")))] >= 1
    assert found[("spechub_http_request_seconds_count", (("method", "GET"), ("route", "unmatched"), ("status", "404")))] >= 1


def test_stage_durations_come_from_the_runs_a_worker_moved_along():
    with transaction.atomic():
        run = run_create(pair=PairFactory.create(), hardware="cpu")
    spec = run_claim(run_id=run.pk, worker="test")
    assert spec is not None
    for stage in ("fetch", "gate", "baseline"):
        run_progress(run_id=run.pk, attempt=spec.attempt, stage=stage, percent=10)
    run.refresh_from_db()
    assert set(run.stage_seconds) == {"fetch", "gate"} and run.stage == "baseline"
    CertificationRun.objects.filter(pk=run.pk).update(finished_at=timezone.now())
    found = scrape()
    assert found[("spechub_stage_seconds_count", (("stage", "gate"),))] == 1
    assert found[("spechub_stage_seconds_sum", (("stage", "gate"),))] >= 0


def test_public_addresses_need_the_token(settings):
    outside = Client(REMOTE_ADDR="8.8.4.4")
    refused = outside.get("/metrics")
    assert refused.status_code == 403 and b"SPECHUB_METRICS_TOKEN" in refused.content
    settings.SPECHUB_METRICS_TOKEN = "scrape-secret"
    assert outside.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret").status_code == 200
    assert outside.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403


def test_a_method_a_client_makes_up_is_counted_as_other_and_adds_no_series():
    for made_up in ("BREW", "PROPFIND", "X-RANDOM-1", "X-RANDOM-2"):
        Client().generic(made_up, "/healthz")
    methods = {dict(labels).get("method") for name, labels in scrape() if name == "spechub_http_request_seconds_count"}
    assert "other" in methods and methods <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}


def test_a_non_ascii_token_is_refused_not_a_500(settings):
    settings.SPECHUB_METRICS_TOKEN = "scrape-secret"
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer sécret\u00ff").status_code == 403


def test_behind_a_proxy_every_peer_is_private_so_only_the_token_opens_it(settings):
    settings.SPECHUB_TRUSTED_PROXIES = 1
    proxy = Client(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="8.8.4.4")  # the public client, as the proxy saw it
    assert proxy.get("/metrics").status_code == 403
    settings.SPECHUB_METRICS_TOKEN = "scrape-secret"
    assert proxy.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret").status_code == 200
