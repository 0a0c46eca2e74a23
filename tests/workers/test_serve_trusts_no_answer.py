"""`python -m workers serve` against a hostile or broken registry (issue 52 §4, defects 5 and 9).

A stand-in registry on loopback (a real HTTP server) sends each wrong answer. The worker stops with the field named
(exit 5, never a traceback), writes nothing outside its workload folder, reads no file the registry names, and a
refused upload ends that run while the worker claims the next.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernel.builds import installed_engine_build
from kernel.spec import ModelRef, Plan, RunSpec, inputs_of
from tests.support.scripted_server import Answer, answer, scripted
from workers import __main__ as workers_main
from workers import answers, remote

API = "/api/v1/workers"
SHA = "b" * 64
STAGES = "tests.support.stages.injected_quick_stages"
NOT_JSON = Answer(200, b"<html>Welcome to nginx!</html>", (("Content-Type", "text/html"),))
NOTHING_TO_QUALIFY = answer({"worker": 1, "name": "box", "labels": ["cpu"], "engine_build": "x", "public_approved": False,
                             "ephemeral": False,
                             "qualify": {"hardware": [], "dtype": "float32", "tv": 0.1, "controls": []}})  # fmt: skip


def spec(workloads: str = f"sha256:{SHA}") -> dict[str, Any]:
    made = RunSpec(run_id=7, attempt=1, verifier=ModelRef("org/verifier", "a" * 40), draft=None, method="ngram",
                   num_speculative_tokens=4, engine="reference", hardware="cpu", plan=Plan(workloads=workloads))  # fmt: skip
    found: dict[str, Any] = json.loads(json.dumps(inputs_of(made.as_dict())))
    return found


def claim(**changes: object) -> Answer:
    return answer({"run": 7, "attempt": 1, "spec": spec(), **changes})


def routes(**given: Answer | list[Answer]) -> dict[tuple[str, str], Answer | list[Answer]]:
    """The worker API answering as a registry does, with `given` (claim, me, workload, result) in place."""
    run = f"{API}/runs/7"
    return {
        ("GET", f"{API}/me/"): given.get("me", NOTHING_TO_QUALIFY),
        ("POST", f"{API}/claim/"): given.get("claim", claim()),
        ("GET", f"{run}/workload/"): given.get("workload", Answer(204)),
        ("POST", f"{run}/heartbeat/"): answer({}),
        ("POST", f"{run}/progress/"): answer({}),
        ("POST", f"{run}/fail/"): answer({"run": 7, "requeued": True}),
        ("POST", f"{run}/result/"): given.get("result", answer({"run": 7, "state": "finished"}, 202)),
    }


def serve_once(base: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`python -m workers serve --once`, in process, with a credential kept from an earlier registration."""
    kept = tmp_path / "worker.json"
    kept.write_text(json.dumps({"registry": base, "credential": "shw_test", "worker": 1,
                                "engine_build": installed_engine_build("reference") or "unknown"}))  # fmt: skip
    code = workers_main.main(["serve", "--registry", base, "--credential-file", str(kept), "--engine", "reference",
                              "--stages", STAGES, "--once", "--verbose"])  # fmt: skip
    said = capsys.readouterr()
    assert "Traceback" not in said.out + said.err
    return code, said.err


@pytest.mark.parametrize(
    ("claimed", "named"),
    [
        (answer({}), "`run`"),
        (answer({"run": "7", "attempt": 1, "spec": {}}), "`run`"),
        (answer({"run": 7, "attempt": 1}), "`spec`"),
        (answer({"run": 7, "attempt": 1, "spec": {}}), "`verifier`"),
        (answer({"run": 7, "attempt": 1, "spec": {**spec(), "plan": {"workloads": "toy-v2"}}}), "lacks 'concurrency'"),
        (answer([1]), "not the JSON object"),
        (NOT_JSON, "not JSON"),
    ],
)
def test_a_claim_of_the_wrong_shape_stops_the_worker_naming_the_field(claimed, named, tmp_path, capsys):
    with scripted(routes(claim=claimed)) as (base, _):
        code, said = serve_once(base, tmp_path, capsys)
    assert code == 5 and "serve stopped: POST /claim/" in said and named in said, said


@pytest.mark.parametrize(
    ("me", "named"),
    [
        (answer({}), "`qualify`"),
        (answer({"qualify": {"hardware": "cpu"}}), "`hardware`"),
        (answer({"qualify": {"hardware": ["cpu"], "dtype": "float32", "tv": "tight", "controls": []}}), "`tv`"),
        (NOT_JSON, "not JSON"),
    ],
)
def test_a_me_answer_of_the_wrong_shape_stops_the_worker_naming_the_field(me, named, tmp_path, capsys):
    with scripted(routes(me=me)) as (base, _):
        code, said = serve_once(base, tmp_path, capsys)
    assert code == 5 and "serve stopped: GET /me/" in said and named in said, said


@pytest.mark.parametrize("hostile", ["../outside/victim", "../made/deep/x", SHA.upper(), "c" * 64])
def test_a_workload_hash_that_is_no_hash_of_the_run_writes_nothing_anywhere(hostile, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPECHUB_WORKLOAD_DIR", str(tmp_path / "workloads"))
    victim = tmp_path / "outside" / "victim.run7.json"
    victim.parent.mkdir()
    victim.write_text("precious")
    sample = answer({"sha256": hostile, "requests": [{"prompt": "Hi", "max_tokens": 4, "category": "custom"}]})
    with scripted(routes(workload=sample)) as (base, script):
        code, said = serve_once(base, tmp_path, capsys)
    assert code == 5 and "`sha256`" in said, said
    assert victim.read_text() == "precious" and not (tmp_path / "made").exists()
    assert not (tmp_path / "workloads").exists() or not any((tmp_path / "workloads").iterdir())
    assert ("POST", f"{API}/runs/7/fail/") in script.seen  # the lease goes back with the reason


@pytest.mark.parametrize("workloads", ["/etc/passwd", "../../secrets.jsonl", "traffic.jsonl"])
def test_a_spec_naming_a_file_of_this_machine_as_its_workload_is_refused(workloads, tmp_path, capsys):
    with scripted(routes(claim=answer({"run": 7, "attempt": 1, "spec": spec(workloads)}))) as (base, script):
        code, said = serve_once(base, tmp_path, capsys)
    assert code == 5 and "`spec.plan.workloads`" in said, said
    assert ("POST", f"{API}/runs/7/result/") not in script.seen


def test_a_model_whose_commit_is_no_commit_is_refused_before_anything_is_downloaded(tmp_path, capsys):
    hostile = {**spec(), "verifier": {"repo_id": "org/verifier", "sha": "../../../tmp/x"}}
    with scripted(routes(claim=answer({"run": 7, "attempt": 1, "spec": hostile}))) as (base, _):
        code, said = serve_once(base, tmp_path, capsys)
    assert code == 5 and "`sha`" in said and "spec.verifier" in said, said


def test_a_refused_upload_ends_that_run_and_the_worker_claims_the_next(tmp_path):
    refused = Answer(403, b'{"error": {"code": "permission_denied", "message": "This run holds an upload already."}}')
    revoked = Answer(401, b'{"error": {"code": "not_authenticated", "message": "Credential revoked."}}')
    toy = answer({"run": 7, "attempt": 1, "spec": spec("toy-v2")})
    lines: list[str] = []
    with scripted(routes(claim=[toy, toy, revoked], result=refused)) as (base, script), pytest.raises(answers.Refused) as stopped:
        remote.serve(remote.Registry(base, credential="shw_test"), stages=STAGES, poll_seconds=0, once=False, say=lines.append)
    assert stopped.value.status == 401  # the revoked credential stops the worker; the refused uploads did not
    assert script.seen.count(("POST", f"{API}/claim/")) == 3 and script.seen.count(("POST", f"{API}/runs/7/result/")) == 2
    assert len(lines) == 2 and "ends without its upload" in lines[0] and "holds an upload already" in lines[0]
    assert ("POST", f"{API}/runs/7/fail/") not in script.seen  # the upload stored beside it is not failed


def test_a_refused_document_hands_the_lease_back_and_serve_once_exits_5(tmp_path, capsys):
    refused = Answer(400, b'{"error": {"code": "invalid", "message": "The result document does not read: stages."}}')
    with scripted(routes(claim=answer({"run": 7, "attempt": 1, "spec": spec("toy-v2")}), result=refused)) as (base, script):
        code, said = serve_once(base, tmp_path, capsys)
    assert code == 5 and "ends without its upload" in said and "does not read" in said, said
    assert ("POST", f"{API}/runs/7/fail/") in script.seen
