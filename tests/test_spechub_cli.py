"""The `spechub` command, installed as a console script, drives a live server (gunicorn, a real worker with
injected stages, the gate reading the toy zoo through olah): submit → wait → verify."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from tests.support.processes import BIN, compose_command, process_env, serving, start_worker, worker_database_url
from zoo import ORG

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def spechub(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "spechub"), *args], cwd=cwd, env=process_env(env), capture_output=True, text=True, timeout=300
    )


def test_the_cli_submits_waits_for_the_verdict_saves_and_verifies_the_certificate_with_injected_stages(hub_settings, tmp_path):
    token = Token.objects.create(user=User.objects.create_user("pipeline")).key
    env = {
        "DATABASE_URL": worker_database_url(),
        "HF_ENDPOINT": hub_settings.endpoint,
        "SPECHUB_HUB_CACHE": str(tmp_path / "hub"),
    }
    worker = start_worker("worker-cpu", tmp_path, SPECHUB_DIRECTOR_STAGES="tests.support.stages.injected_quick_stages")
    try:
        with serving(compose_command("web"), tmp_path, env) as base:
            client = {"SPECHUB_URL": base, "SPECHUB_TOKEN": token, "SPECHUB_CONFIG": str(tmp_path / "none.toml")}
            gate = spechub(
                "gate", "--draft", f"{ORG}/llama-draft-1l", "--verifier", f"{ORG}/llama-verifier", env=client, cwd=tmp_path
            )
            refused = spechub(
                "gate", "--draft", f"{ORG}/broken-pickle-only", "--verifier", f"{ORG}/llama-verifier", env=client, cwd=tmp_path
            )
            done = spechub("submit", "--draft", f"{ORG}/llama-draft-1l", "--verifier", f"{ORG}/llama-verifier", "--wait",
                           "--require", "certified", "--out", "certificate.json", env=client, cwd=tmp_path)  # fmt: skip
            verified = spechub(
                "verify", "certificate.json", "--url", base, env={"SPECHUB_CONFIG": str(tmp_path / "none.toml")}, cwd=tmp_path
            )  # first use: the server's key is pinned beside that config
            too_strict = spechub(
                "submit", "--draft", f"{ORG}/eagle3-head", "--wait", "--require", "certified", env=client, cwd=tmp_path
            )
            anonymous = spechub("submit", "--draft", f"{ORG}/eagle3-head", env={"SPECHUB_URL": base}, cwd=tmp_path)
    finally:
        worker.stop()
    assert gate.returncode == 0 and gate.stdout.startswith("compatible: draft_model"), gate
    assert refused.returncode == 1 and "INCOMPATIBLE" in refused.stdout, refused
    assert done.returncode == 0, (done.stdout, done.stderr[-2000:])
    assert "run " in done.stdout and ": certified" in done.stdout and "certificate.json" in done.stdout
    assert "100%" in done.stderr  # the progress bar reached the end
    assert verified.returncode == 0 and "Signature valid (ed25519" in verified.stdout, verified
    assert too_strict.returncode == 0  # injected stages certify every pair: certified meets "certified"
    assert (anonymous.returncode == 1 and "not_authenticated" in anonymous.stderr) or "credentials" in anonymous.stderr, anonymous


def test_verify_needs_no_server_with_the_issuers_key_and_refuses_a_changed_file(tmp_path):
    from kernel import certificates
    from registry.certificates.services import signing_key
    from tests.registry.test_certificates import edited_payload

    payload = {"format": certificates.FORMAT, "verdict": "provisional", "expires_at": "2999-01-01T00:00:00+00:00",
               "issued_at": "2026-12-01T00:00:00+00:00", "reproduce": "python -m workers reproduce certificate.json",
               "inputs": {"draft": None, "method": "ngram", "verifier": {"repo_id": "org/v", "sha": "a" * 40},
                          "num_speculative_tokens": 4, "hardware": "cpu"}}  # fmt: skip
    key = signing_key()
    (tmp_path / "good.json").write_bytes(certificates.sign(payload, key))  # type: ignore[arg-type]
    (tmp_path / "issuer.pem").write_text(certificates.public_key_pem(key.public_key()))
    (tmp_path / "bad.json").write_bytes(edited_payload((tmp_path / "good.json").read_text(), "provisional", "certified"))
    good = spechub("verify", "good.json", "--public-key", "issuer.pem", env={}, cwd=tmp_path)
    bad = spechub("verify", "bad.json", "--public-key", "issuer.pem", env={}, cwd=tmp_path)
    assert good.returncode == 0 and "provisional: ngram → org/v@" in good.stdout, good
    assert bad.returncode == 1 and "NOT VALID" in bad.stderr, bad


def test_the_cli_uploads_traffic_certifies_every_draft_on_it_and_prints_the_recommendation_with_injected_stages(
    hub_settings, tmp_path
):
    from registry.runs.submissions import submission_create

    owner = User.objects.create_user("deployer")
    token = Token.objects.create(user=owner).key
    for draft in ("llama-draft-1l", "eagle3-head"):
        submission_create(user=owner, repo_id=f"{ORG}/{draft}", verifier_repo_id=f"{ORG}/llama-verifier", certify=False)
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_text("".join(f'{{"prompt": "Q: What is {i} + 1?\\nA:", "category": "math"}}\n' for i in range(12)))
    env = {
        "DATABASE_URL": worker_database_url(),
        "HF_ENDPOINT": hub_settings.endpoint,
        "SPECHUB_HUB_CACHE": str(tmp_path / "hub"),
    }
    worker = start_worker("worker-cpu", tmp_path, SPECHUB_DIRECTOR_STAGES="tests.support.stages.injected_stages_on_a_workload",
                          SPECHUB_WORKLOAD_DIR=str(tmp_path / "worker-workloads"))  # fmt: skip
    try:
        with serving(compose_command("web"), tmp_path, env) as base:
            client = {"SPECHUB_URL": base, "SPECHUB_TOKEN": token, "SPECHUB_CONFIG": str(tmp_path / "none.toml")}
            uploaded = spechub("upload", str(traffic), "--verifier", f"{ORG}/llama-verifier", env=client, cwd=tmp_path)
            workload = uploaded.stdout.split()[1] if uploaded.returncode == 0 else "0"
            compared = spechub("compare", workload, "--certify", "--wait", "--concurrency", "1", env=client, cwd=tmp_path)
            stranger = spechub("compare", workload, env={**client, "SPECHUB_TOKEN": ""}, cwd=tmp_path)
    finally:
        worker.stop()
    assert uploaded.returncode == 0 and "12 of your 12 requests, seed 0" in uploaded.stdout, uploaded
    assert compared.returncode == 0, (compared.stdout, compared.stderr[-2000:])
    assert "queued runs" in compared.stdout and "100%" in compared.stderr
    assert "spechub-toy/llama-draft-1l: 1.60" in compared.stdout and "at concurrency 1 (the interval for 2" in compared.stdout
    assert stranger.returncode == 1 and "not_found" in stranger.stderr, stranger
