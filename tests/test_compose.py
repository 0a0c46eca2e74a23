"""docker-compose.yml describes the deployment; every command in it is one the tests run."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid

import pytest
import yaml

from registry.celery import celery_config, hardware_queues, queue_names
from tests.support.processes import ROOT, Process, compose_command, process_env, worker_database_url

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def option(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_it_declares_the_deployment_services():
    assert set(SERVICES) == {"postgres", "redis", "web", "beat", "worker-notify", "worker-cpu", "worker-gpu", "flower"}


def test_flower_is_optional_and_needs_only_the_broker():
    flower = SERVICES["flower"]
    assert flower["profiles"] == ["monitoring"] and "--broker=redis://redis:6379/0" in flower["command"]
    assert set(flower["environment"]) == {"FLOWER_BASIC_AUTH"}  # no database, no keys
    assert flower["ports"] == ["127.0.0.1:5555:5555"]  # it can revoke tasks: never published beyond this machine


def test_webhook_deliveries_have_their_own_queue_and_worker_apart_from_engines(settings):
    assert SERVICES["web"]["environment"]["SPECHUB_NOTIFICATIONS_QUEUE"] == "notifications"
    assert option(compose_command("worker-notify"), "-Q") == "notifications"
    assert "SPECHUB_SIGNING_KEY" not in SERVICES["worker-notify"]["environment"]
    for name in ("worker-cpu", "worker-gpu"):
        assert "notifications" not in option(compose_command(name), "-Q").split(",")
    settings.SPECHUB_NOTIFICATIONS_QUEUE = "notifications"
    routes = celery_config()["task_routes"]
    assert isinstance(routes, dict) and routes["registry.deliver_webhook"] == {"queue": "notifications"}
    assert "notifications" in queue_names() and "notifications" not in hardware_queues()


def test_engine_workers_run_solo_one_job_at_a_time_on_known_queues():
    for name in ("worker-cpu", "worker-gpu"):
        command = compose_command(name)
        assert option(command, "--pool") == "solo" and option(command, "--concurrency") == "1"
        assert set(option(command, "-Q").split(",")) <= set(queue_names())
    assert option(compose_command("worker-gpu"), "-Q") == "gpu.h100"


def test_the_gpu_worker_reserves_an_nvidia_device():
    devices = SERVICES["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]


def test_production_services_refuse_to_start_without_a_secret_key():
    for name in ("web", "beat", "worker-cpu", "worker-gpu"):
        assert SERVICES[name]["environment"]["DEBUG"] == "0"
        assert SERVICES[name]["environment"]["SECRET_KEY"].startswith("${SECRET_KEY:?")


def test_only_workers_hold_the_signing_key_and_no_password_is_written_in_the_file():
    for name in ("web", "beat"):
        environment = SERVICES[name]["environment"]
        assert "SPECHUB_SIGNING_KEY" not in environment and environment["SPECHUB_SIGNING_PUBLIC_KEY"].startswith("${")
    for name in ("worker-cpu", "worker-gpu"):
        assert SERVICES[name]["environment"]["SPECHUB_SIGNING_KEY"].startswith("${SPECHUB_SIGNING_KEY:?")
    assert SERVICES["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    assert "${POSTGRES_PASSWORD:?" in SERVICES["web"]["environment"]["DATABASE_URL"]


def test_docker_compose_accepts_the_file_where_the_client_has_compose():
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True).returncode != 0:
        # No compose plugin here: the file must still be well-formed YAML with
        # a command per application service, which the other tests check.
        assert all("command" in SERVICES[name] for name in ("web", "beat", "worker-cpu", "worker-gpu"))
        return
    env = {
        **os.environ,
        "SECRET_KEY": "x" * 50,
        "POSTGRES_PASSWORD": "p",
        "SPECHUB_SIGNING_KEY": "k",
        "SPECHUB_SIGNING_PUBLIC_KEY": "k",
    }
    result = subprocess.run([docker, "compose", "config", "-q"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.django_db(transaction=True)
@pytest.mark.process
def test_the_compose_beat_command_starts_on_the_database_scheduler(tmp_path):
    beat = Process(
        compose_command("beat"),
        process_env({"DATABASE_URL": worker_database_url()}),
        tmp_path / f"beat-{uuid.uuid4().hex[:6]}.log",
    )
    try:
        beat.wait_for_output("beat: Starting...", timeout=60)
        beat.wait_for_output("DatabaseScheduler", timeout=30)
        time.sleep(3)  # past its first database read of the schedule
        assert beat.popen.poll() is None, beat.output()
    finally:
        beat.stop()
    assert "Traceback" not in beat.output()
    assert not (ROOT / "celerybeat.pid").exists()


def test_the_gpu_override_runs_one_solo_worker_per_further_gpu_class_with_the_shared_baseline_store():
    override = yaml.safe_load((ROOT / "docker-compose.gpu.yml").read_text())["services"]
    queues = {option(service["command"], "-Q") for service in override.values()}
    assert queues == {"gpu.h200", "gpu.a100"} and queues <= set(hardware_queues())
    for service in override.values():
        assert option(service["command"], "--pool") == "solo" and "SPECHUB_SIGNING_KEY" in service["environment"]
        assert service["environment"]["SPECHUB_BASELINE_STORE"] == SERVICES["worker-cpu"]["environment"]["SPECHUB_BASELINE_STORE"]
