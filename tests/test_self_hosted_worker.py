"""A self-hosted worker as a team runs one (issue 41): `python -m workers serve` against a real registry (gunicorn and
PostgreSQL), with nothing in its environment but the registry's URL and its registration token: no DATABASE_URL, no
broker, no signing key. The stages are the injected quick ones (tests/support/stages.py): the subject is the protocol,
the lease and where the certificate is signed; a real certification's stages are the shared certification's."""

from __future__ import annotations

import json
import os
import stat
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest
from django.contrib.auth.models import User

from kernel import certificates
from registry.certificates.services import signing_key
from registry.fleet.services import registration_token_create
from registry.models import CertificationRun, Workload
from registry.runs.services import run_create, runs_requeue_stale
from registry.states import RunState
from tests.support import fleet
from tests.support.factories import PairFactory
from tests.support.loopback import loopback
from tests.support.processes import Process, run_whole, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]
LABEL = "gpu.h100"  # a class no hosted worker in the session listens for: only the self-hosted worker takes the run
STAGES = "tests.support.stages."


def serve_command(base: str, token: str | None, credentials: Path, stages: str, *extra: str) -> list[str]:
    quick = ("--qualifier", "tests.support.qualification.quick_qualify")
    return fleet.serve_command(base, token, credentials, STAGES + stages, *quick, *extra)


def worker_env(tmp_path: Path) -> dict[str, str]:
    return fleet.worker_env(SPECHUB_TEST_MARKERS=str(tmp_path), SPECHUB_WORKLOAD_DIR=str(tmp_path / "workloads"))


def private_run(owner: User) -> CertificationRun:
    pair = PairFactory.create()
    sample = [{"prompt": "Hello there", "max_tokens": 16, "category": "custom"}]
    workload = Workload.objects.create(owner=owner, name="ours", verifier=pair.verifier, sha256="b" * 64, format="suite",
                                       total_requests=1, unique_requests=1, sample=sample)  # fmt: skip
    return run_create(pair=pair, hardware=LABEL, workload=workload, requested_by=owner)


@pytest.fixture
def registry(tmp_path):
    """The registry, qualifying every new engine build (as in production): a worker qualifies its own first."""
    with fleet.registry_serving(tmp_path, SPECHUB_QUALIFY_NEW_BUILDS="1") as base:
        yield base


def test_a_self_hosted_worker_with_no_secret_of_ours_certifies_its_owners_run_and_the_registry_signs_it(registry, tmp_path):
    owner = User.objects.create_user("team", password="pw")
    _, token = registration_token_create(owner=owner, labels=[LABEL])
    run = private_run(owner)
    credentials = tmp_path / "worker.json"
    done = run_whole(serve_command(registry, token, credentials, "injected_quick_stages", "--once"), worker_env(tmp_path), 120)
    assert done.returncode == 0, (done.stdout, done.stderr[-3000:])
    wait_until(lambda: CertificationRun.objects.get(pk=run.pk).state == RunState.FINISHED, 60, "the signer to finish it")
    run.refresh_from_db()
    assert run.worker is not None and run.worker.owner == owner
    assert run.claimed_by == f"self-hosted:{run.worker.pk}:team-box"
    verified = certificates.verify(run.certificate.document.encode(), signing_key().public_key())  # the registry's key
    measured = verified.payload["measured_on"]
    assert measured == {"kind": "self-hosted", "worker": "team-box", "owner": "team", "engine_build": run.worker.engine_build,
                        "evidence": run.worker.hardware_evidence}  # fmt: skip
    assert stat.S_IMODE(os.stat(credentials).st_mode) == 0o600 and token not in credentials.read_text()
    assert run.worker.engine_build and run.worker.hardware_evidence["cpus"] >= 1
    # It qualified its build on itself, through the API, before it claimed; the registry judged its run with it.
    assert f"qualified vllm on {LABEL} here" in done.stderr
    qualified = run.worker.qualifications.get()
    assert (qualified.hardware, qualified.engine_build) == (LABEL, run.worker.engine_build)
    assert (verified.payload.get("qualification") or {}).get("digest") == qualified.digest
    logged = list(run.worker.events.order_by("at", "id").values_list("action", flat=True))
    assert logged == ["registered", "qualified", "claimed", "uploaded"], logged
    # Registered once: a later start reads its credential; the token, spent, registers nothing again.
    quick = ("injected_quick_stages", "--once")
    again = run_whole(serve_command(registry, None, credentials, *quick), worker_env(tmp_path), 60)
    assert again.returncode == 0, again.stderr[-2000:]
    spent = run_whole(serve_command(registry, token, credentials, *quick), worker_env(tmp_path), 60)
    assert spent.returncode == 5 and "was used already" in spent.stderr, spent.stderr[-2000:]


def test_a_worker_killed_mid_run_loses_its_lease_and_another_certifies_the_run_once(registry, tmp_path, settings):
    owner = User.objects.create_user("team", password="pw")
    run = private_run(owner)
    _, first_token = registration_token_create(owner=owner, labels=[LABEL])
    hanging = "injected_stages_hanging_on_first_attempt"  # attempt 1 hangs; attempt 2 is quick
    command = serve_command(registry, first_token, tmp_path / "first.json", hanging, "--once")
    first = Process(command, worker_env(tmp_path), tmp_path / "first.log")
    try:
        wait_until(lambda: CertificationRun.objects.get(pk=run.pk).state == RunState.MEASURING, 60, "the first attempt")
    finally:
        first.kill()  # SIGKILL: no fail, no deregister, no clean-up
    settings.SPECHUB_STALE_AFTER_SECONDS = 1
    wait_until(lambda: runs_requeue_stale() == [run.pk], 30, "the lease to expire")
    _, second_token = registration_token_create(owner=owner, labels=[LABEL])
    command = serve_command(
        registry, second_token, tmp_path / "second.json", "injected_stages_hanging_on_first_attempt", "--once"
    )
    done = run_whole(command, worker_env(tmp_path), 120)
    assert done.returncode == 0, done.stderr[-3000:]
    wait_until(lambda: CertificationRun.objects.get(pk=run.pk).state == RunState.FINISHED, 60, "the signer to finish it")
    run.refresh_from_db()
    markers = (tmp_path / f"{run.pk}.log").read_text()
    assert run.state == RunState.FINISHED and run.attempts == 2 and markers.count("end verdict") == 1
    assert json.loads(Path(tmp_path / "second.json").read_text())["worker"] == run.worker_id


class RestartingRegistry:
    """What the worker sees of a registry that restarts mid-upload: a loopback front that passes each call on to the
    registry of the moment, and loses the answer to the first upload (the registry stored it, then went down before
    answering). From then until `up` is set (the registry restarted), it closes every connection, as a stopped
    registry does: the worker's retries meet the gap, however quickly they come."""

    def __init__(self) -> None:
        self.upstream = ""
        self.answer_lost = threading.Event()
        self.up = threading.Event()
        self.refused = 0  # connections closed while the registry was down

    def handler(self) -> type[BaseHTTPRequestHandler]:
        front = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.forward()

            def do_POST(self) -> None:
                self.forward()

            def forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                if front.answer_lost.is_set() and not front.up.is_set():
                    front.refused += 1
                    self.close_connection = True  # the registry is down
                    return
                try:
                    answer = httpx.request(self.command, front.upstream + self.path, content=body, headers=headers, timeout=30)
                except httpx.TransportError:
                    self.close_connection = True  # no registry: the worker's connection drops
                    return
                if self.path.endswith("/result/") and not front.answer_lost.is_set():
                    front.answer_lost.set()
                    self.close_connection = True  # stored, and the answer lost
                    return
                self.send_response(answer.status_code)
                for name in ("Content-Type",):
                    if name in answer.headers:
                        self.send_header(name, answer.headers[name])
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


def test_the_registry_restarting_mid_upload_costs_a_retry_and_one_result_is_stored(tmp_path):
    owner = User.objects.create_user("team", password="pw")
    _, token = registration_token_create(owner=owner, labels=[LABEL])
    run = private_run(owner)
    registry = RestartingRegistry()
    settings = {"SPECHUB_QUALIFY_NEW_BUILDS": "1"}
    with loopback(registry.handler()) as front, fleet.signing(tmp_path, **settings):
        with fleet.web_serving(tmp_path, **settings) as first:
            registry.upstream = first
            command = serve_command(front, token, tmp_path / "worker.json", "injected_quick_stages", "--once")
            worker = Process(command, worker_env(tmp_path), tmp_path / "serve.log")
            try:
                assert registry.answer_lost.wait(120), worker.output()[-3000:]
            except BaseException:
                worker.stop()
                raise
        # The first registry is gone (stopped as a deploy stops it); the worker retries into the gap.
        try:
            with fleet.web_serving(tmp_path, **settings) as second:
                registry.upstream = second
                registry.up.set()
                wait_until(lambda: worker.popen.poll() is not None, 120, "the worker's upload to land")
                assert worker.popen.returncode == 0, worker.output()[-3000:]
                wait_until(lambda: CertificationRun.objects.get(pk=run.pk).state == RunState.FINISHED, 60, "the signer")
        finally:
            worker.stop()
    assert registry.refused >= 1  # the worker met the gap and retried through it
    run.refresh_from_db()
    assert run.worker is not None
    uploads = run.worker.events.filter(action="uploaded")
    assert uploads.count() == 1 and run.attempts == 1 and run.certificate.document
    assert (tmp_path / f"{run.pk}.log").read_text().count("end verdict") == 1  # measured once
