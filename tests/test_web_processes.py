"""The web tier as deployed: docker-compose.yml's gunicorn command, /healthz, and `make demo`."""

from __future__ import annotations

import json
import sqlite3

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.services import free_port
from tests.support.processes import BIN, compose_command, process_env, run_whole, serving, worker_database_url
from zoo import ORG

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]
# What `make demo` runs, less the certification, which tests/test_demo_certifies.py covers.
DEMO = [str(BIN / "python"), "manage.py", "demo", "--addrport", "127.0.0.1:8000", "--no-certify"]


def test_the_compose_web_command_is_live_and_ready_with_both_parts_up(tmp_path):
    with serving(compose_command("web"), tmp_path, {"DATABASE_URL": worker_database_url()}) as base:
        live = httpx.get(f"{base}/healthz")
        response = httpx.get(f"{base}/readyz")
        catalog = httpx.get(f"{base}/")
    assert live.status_code == 200 and live.json() == {"status": "ok"}
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "ok", "parts": {"database": "ok", "broker": "ok"}}
    assert catalog.status_code == 200 and "Catalog" in catalog.text


def test_the_compose_web_commands_two_workers_sum_their_request_metrics_in_one_scrape(tmp_path):
    env = {"DATABASE_URL": worker_database_url(), "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus")}
    with serving(compose_command("web"), tmp_path, env) as base:
        for _ in range(20):  # spread over both gunicorn workers
            httpx.get(f"{base}/healthz")
        scraped = httpx.get(f"{base}/metrics").text
    counts = [
        sample.value
        for family in text_string_to_metric_families(scraped)
        for sample in family.samples
        if sample.name == "spechub_http_request_seconds_count" and sample.labels.get("route") == "healthz"
    ]
    assert sum(counts) >= 20, scraped[:2000]
    assert "spechub_runs" in scraped and 'spechub_queue_depth{queue="cpu"}' in scraped


def test_without_the_broker_the_web_tier_stays_ready_degraded_and_names_no_exception(tmp_path):
    env = {"DATABASE_URL": worker_database_url(), "CELERY_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0"}
    with serving(compose_command("web"), tmp_path, env) as base:
        response = httpx.get(f"{base}/readyz", timeout=30)
    assert response.status_code == 200  # submissions are still taken; the dispatch sweep sends their runs later
    assert response.json() == {"status": "degraded", "parts": {"database": "ok", "broker": "down"}, "down": ["broker"]}


def test_without_the_database_the_web_tier_is_live_but_not_ready(tmp_path):
    env = {"DATABASE_URL": f"postgres://postgres@127.0.0.1:{free_port()}/spechub"}
    with serving(compose_command("web"), tmp_path, env) as base:
        live = httpx.get(f"{base}/healthz", timeout=30)
        response = httpx.get(f"{base}/readyz", timeout=30)
        pages = [httpx.get(f"{base}{path}", timeout=30) for path in ("/api/v1/pairs/", "/", "/runs/")]
    assert live.status_code == 200
    for page in pages:  # an outage is "try again shortly", never a 500 page
        assert page.status_code == 503 and int(page.headers["Retry-After"]) > 0, (page.url, page.text[:300])
        assert page.json()["error"]["code"] == "database-unavailable"
    assert response.status_code == 503 and response.headers["Retry-After"] == "30"
    assert response.json()["down"] == ["database"] and "Error" not in response.text  # no exception text


def test_make_demo_serves_healthz_on_embedded_sqlite_and_a_queue_on_files(tmp_path):
    services = ("DATABASE_URL", "CELERY_BROKER_URL")
    with serving(DEMO, tmp_path, {"SPECHUB_VAR_DIR": str(tmp_path)}, drop=services) as base:
        health = httpx.get(f"{base}/readyz")
        page = httpx.get(f"{base}/")
        css = httpx.get(f"{base}/static/registry/site.css")
    assert health.status_code == 200, health.text
    assert health.json()["parts"] == {"database": "ok", "broker": "ok"}
    assert "spechub-toy/llama-draft-1l" in page.text and ">ngram</a>" in page.text
    assert css.status_code == 200 and "font-family" in css.text
    assert (tmp_path / "spechub.sqlite3").exists() and (tmp_path / "queue" / "messages").is_dir()


def test_on_the_embedded_default_a_new_pairs_submission_is_answered_and_waits_in_the_file_queue(tmp_path, local_hub):
    """The web process only queues: the certification is the demo's worker's (tests/test_demo_certifies.py)."""
    services, env = ("DATABASE_URL", "CELERY_BROKER_URL"), {"SPECHUB_VAR_DIR": str(tmp_path)}
    newcomer = "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token; " \
        "print(Token.objects.create(user=User.objects.create_user('newcomer')).key)"  # fmt: skip
    with serving(DEMO, tmp_path, env, drop=services) as base:  # it migrates the SQLite database before it serves
        made = run_whole([str(BIN / "python"), "manage.py", "shell", "-c", newcomer], process_env(env, drop=services), 120)
        assert made.returncode == 0, made.stderr[-2000:]
        payload = {"repo_id": f"{ORG}/llama-draft-1l", "revision": "v1.0", "verifier_repo_id": f"{ORG}/llama-verifier"}
        headers = {"Authorization": f"Token {made.stdout.split()[-1]}"}
        answer = httpx.post(f"{base}/api/v1/submissions/", json=payload, headers=headers, timeout=60)
        queue = httpx.get(f"{base}/runs/")
    assert answer.status_code == 201 and answer.json()["status"] == "accepted", answer.text[:500]
    messages = [json.loads(path.read_text()) for path in (tmp_path / "queue" / "messages").iterdir()]
    assert [message["headers"]["task"] for message in messages] == ["registry.certify"], messages
    with sqlite3.connect(tmp_path / "spechub.sqlite3") as db:
        states = db.execute("SELECT state FROM registry_certificationrun").fetchall()
    assert states == [("queued",)]  # not run inside the request: nothing on the embedded default runs eagerly
    assert queue.status_code == 200 and "queued" in queue.text


def test_make_demo_serves_healthz_on_configured_postgres_and_redis(tmp_path):
    env = {"DATABASE_URL": worker_database_url(), "SPECHUB_VAR_DIR": str(tmp_path)}
    with serving(DEMO, tmp_path, env) as base:
        health = httpx.get(f"{base}/readyz")
    assert health.status_code == 200, health.text
    assert health.json()["parts"] == {"database": "ok", "broker": "ok"}
    assert not (tmp_path / "spechub.sqlite3").exists()
