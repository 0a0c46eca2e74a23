"""The web tier as deployed: docker-compose.yml's gunicorn command, /healthz, and `make demo`."""

from __future__ import annotations

import httpx
import pytest

from tests.services import free_port
from tests.support.processes import BIN, compose_command, serving, worker_database_url

pytestmark = pytest.mark.django_db(transaction=True)
# What `make demo` runs, less the certification, which tests/test_demo_certifies.py covers.
DEMO = [str(BIN / "python"), "manage.py", "demo", "--addrport", "127.0.0.1:8000", "--no-certify"]


def test_the_compose_web_command_serves_healthz_with_both_parts_up(tmp_path):
    with serving(compose_command("web"), tmp_path, {"DATABASE_URL": worker_database_url()}) as base:
        response = httpx.get(f"{base}/healthz")
        catalog = httpx.get(f"{base}/")
    assert response.status_code == 200, response.text
    assert response.json()["parts"] == {"database": "ok", "broker": "ok"}
    assert catalog.status_code == 200 and "Catalog" in catalog.text


def test_healthz_answers_503_naming_the_broker_when_it_is_down(tmp_path):
    env = {"DATABASE_URL": worker_database_url(), "CELERY_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0"}
    with serving(compose_command("web"), tmp_path, env) as base:
        response = httpx.get(f"{base}/healthz", timeout=30)
    assert response.status_code == 503
    assert response.json()["down"] == ["broker"] and response.json()["parts"]["database"] == "ok"


def test_healthz_answers_503_naming_the_database_when_it_is_down(tmp_path):
    env = {"DATABASE_URL": f"postgres://postgres@127.0.0.1:{free_port()}/spechub"}
    with serving(compose_command("web"), tmp_path, env) as base:
        response = httpx.get(f"{base}/healthz", timeout=30)
    assert response.status_code == 503
    assert response.json()["down"] == ["database"]


def test_make_demo_serves_healthz_on_embedded_sqlite_and_in_process_tasks(tmp_path):
    services = ("DATABASE_URL", "CELERY_BROKER_URL")
    with serving(DEMO, tmp_path, {"SPECHUB_VAR_DIR": str(tmp_path)}, drop=services) as base:
        health = httpx.get(f"{base}/healthz")
        page = httpx.get(f"{base}/")
        css = httpx.get(f"{base}/static/registry/site.css")
    assert health.status_code == 200, health.text
    assert health.json()["parts"] == {"database": "ok", "broker": "in-process"}
    assert "spechub-toy/llama-draft-1l" in page.text and ">ngram</a>" in page.text
    assert css.status_code == 200 and "font-family" in css.text
    assert (tmp_path / "spechub.sqlite3").exists()


def test_make_demo_serves_healthz_on_configured_postgres_and_redis(tmp_path):
    env = {"DATABASE_URL": worker_database_url(), "SPECHUB_VAR_DIR": str(tmp_path)}
    with serving(DEMO, tmp_path, env) as base:
        health = httpx.get(f"{base}/healthz")
    assert health.status_code == 200, health.text
    assert health.json()["parts"] == {"database": "ok", "broker": "ok"}
    assert not (tmp_path / "spechub.sqlite3").exists()
