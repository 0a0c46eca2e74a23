"""The pair page (verdict, recipe, charts with text equivalents, history) and the live run page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from registry.models import WorkloadResult
from registry.runs.demo import demo_catalog_load
from registry.states import RunState
from tests.support.factories import RunFactory
from tests.support.processes import ROOT

pytestmark = pytest.mark.django_db


def result_document() -> dict[str, Any]:
    levels = {
        str(c): {
            "speedup": s,
            "speedup_interval": [s - 0.1, s + 0.1],
            "block_ratios": [s] * 6,  # 5 degrees of freedom: "slower" at c=16 clears its half of the error rate
            "baseline": {"tokens_per_second": 100.0 * c},
            "speculative": {"tokens_per_second": 100.0 * c * s},
        }
        for c, s in ((1, 1.4), (2, 1.3), (4, 1.1), (8, 0.9), (16, 0.8))
    }
    greedy = {
        "chat": {"exact_match": 1.0, "divergences": []},
        "math": {"exact_match": 0.75, "divergences": [{"prompt": 2, "token": 7}]},
    }
    acceptance = {"mean_acceptance_length": 3.2, "acceptance_rate": 0.55, "per_position": [0.8, 0.6, 0.45, 0.35]}
    return {
        "schema_version": 2,
        "stages": {
            "speculative": {"acceptance": acceptance},
            "throughput": {"levels": levels, "break_even_concurrency": 6.3, "theoretical_bound": 3.2, "per_category_speedup": {}},
            "equivalence": {
                "greedy": greedy,
                "reference": {"chat": {"exact_match": 1.0}, "math": {"exact_match": 1.0}},
                "sampling": [{"p_value": 0.42, "samples": 600}],
            },
            "verdict": {
                "verdict": "failed",
                "reasons": ["greedy exact match 0.750 < 1.0"],
                "thresholds": {"greedy_exact_match": 1.0, "sampling_alpha": 0.001, "min_speedup": 1.0},
            },
        },
    }


def latency(scale: float) -> dict[str, dict[str, float]]:
    base = {"ttft": 20.0, "tpot": 2.0, "itl": 1.9, "e2e": 270.0}
    return {name: {f"p{q}": value * scale * (1 + (q - 50) / 100) for q in (50, 90, 95, 99)} for name, value in base.items()}


def serving_document() -> dict[str, Any]:
    """The same figures as a version-3 run measured them: two servers, paired blocks, latencies, load."""
    document = result_document()
    levels = document["stages"]["throughput"]["levels"]
    for figures in levels.values():
        speedup = figures["speedup"]
        figures["block_ratios"] = [speedup * 0.98, speedup, speedup * 1.02, speedup * 0.99, speedup * 1.01]
        figures["requests_per_block"] = 7
        figures["speedup_cv"] = 0.015
        for side, scale in (("baseline", 1.0), ("speculative", 1 / speedup)):
            figures[side] = {**figures[side], "tokens_per_second_runs": [figures[side]["tokens_per_second"]] * 5,
                             "requests_per_second": 3.9, "latency_ms": latency(scale)}  # fmt: skip
    recipe = "vllm serve spechub-toy/llama-verifier --revision " + "a" * 40
    flags = "--dtype float32 --max-model-len 512 --seed 0 --enforce-eager"
    document["schema_version"] = 3
    document["stages"]["throughput"].update(
        mode="serving",
        servers={
            "baseline_command": ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/snap"],
            "speculative_command": ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/snap"],
            "baseline_recipe": f"{recipe} {flags}",
            "speculative_recipe": f"{recipe} --speculative-config '{{\"method\":\"eagle3\"}}' {flags}",
            "start_seconds": 38.5,
            "output_tokens": 128,
        },
        rate_point={**levels["1"], "speedup": 1.9, "speedup_interval": [1.6, 2.2], "request_rate": 7.0},
        load={"load_average_before": [0.4, 0.5, 0.6], "load_average_after": [1.9, 1.0, 0.7], "wall_seconds": 110.0,
              "other_cpu_seconds": 2.2, "other_cpu_share": 0.01, "cpu_count": 2},
        counters={"served": {"drafts": 60, "draft_tokens": 240, "accepted": 216, "accepted_per_position": []},
                  "offline": {"drafts": 60, "draft_tokens": 240, "accepted": 216, "accepted_per_position": []},
                  "agree": True},
    )  # fmt: skip
    return document


@pytest.fixture
def serving_pair(certified_pair):
    pair, run = certified_pair
    run.result = serving_document()
    run.save(update_fields=["result"])
    return pair, run


@pytest.fixture
def certified_pair():
    pair = next(p for p in demo_catalog_load(zoo_dir=ROOT / "zoo" / "models") if p.method == "eagle3")
    run = RunFactory.create(
        pair=pair, state=RunState.FINISHED, finished_at=timezone.now(), result=result_document(), environment={"dtype": "float32"}
    )
    WorkloadResult.objects.create(
        run=run, category="math", mean_acceptance_length=3.1, acceptance_rate=0.5, greedy_exact_match=0.75, speedup=1.2,
        acceptance={"mean_acceptance_length": 3.1, "per_position": [0.8, 0.6], "prompts": 12,
                    "mean_acceptance_length_interval": [2.8, 3.4]},
    )  # fmt: skip
    return pair, run


def test_the_catalog_links_each_pair_to_its_page(certified_pair):
    pair, _ = certified_pair
    assert f'href="/pairs/{pair.pk}/"' in Client().get("/").content.decode()


def test_the_pair_page_shows_verdict_recipe_charts_and_their_numbers(certified_pair):
    pair, run = certified_pair
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert "verdict-failed" in page and "greedy exact match 0.750" in page
    assert pair.compatibility["recipe"]["serve"].split(" --speculative-config")[0] in page
    assert 'class="copy"' in page and "copy.js" in page
    bars = re.findall(r'<rect class="bar"[^>]*height="([0-9.]+)"', page)
    assert len(bars) == 4 and [float(h) for h in bars] == sorted(
        (float(h) for h in bars), reverse=True
    )  # rates fall with position
    points = re.search(r'<polyline class="line speedup" points="([^"]+)"', page)
    assert points and len(points.group(1).split()) == 5
    assert 'class="break-even"' not in page and "bound 3.20x" in page  # no crossing of point estimates: it has no interval
    assert "0.350" in page  # the text equivalents carry the same numbers
    assert "2: 7" in page  # the divergence position
    assert f'href="/runs/{run.pk}/"' in page
    # c=1 and 2 clear 1, c=4 and 8 reach it, c=16 stays below: the table says what each interval supports.
    supported = re.findall(r'<span class="speed speed-[a-z-]+">([a-z ]+)</span>', page)
    assert supported == ["faster", "faster", "no measurable difference", "no measurable difference", "slower"]
    assert "measurably faster up to <strong>c=2</strong>" in page and "measurably slower from <strong>c=16</strong>" in page


def test_the_run_api_gives_each_levels_speedup_interval_and_what_it_supports(certified_pair):
    _, run = certified_pair
    speed = Client().get(f"/api/v1/runs/{run.pk}/").json()["speed"]
    supported = [(row["concurrency"], row["supports"]) for row in speed]
    assert supported[:3] == [(1, "faster"), (2, "faster"), (4, "no measurable difference")]
    assert speed[0]["interval"] == pytest.approx([1.3, 1.5]) and speed[0]["speedup"] == 1.4


def test_a_pair_without_runs_says_so(certified_pair):
    pair = next(p for p in demo_catalog_load(zoo_dir=ROOT / "zoo" / "models") if p.method == "ngram")
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert "Not certified yet" in page and "No certification run yet." in page and "<svg" not in page


def test_the_run_page_shows_progress_and_on_failure_what_to_do(certified_pair):
    pair, _ = certified_pair
    running = RunFactory.create(pair=pair, state=RunState.MEASURING, stage="speculative", progress=57, attempts=1)
    page = Client().get(f"/runs/{running.pk}/").content.decode()
    assert 'value="57"' in page and "speculative" in page and 'data-final="false"' in page and "run.js" in page
    failed = RunFactory.create(
        pair=pair, state=RunState.FAILED_USER, error_code="gate:incompatible", error_message="gate:mapping-t2d: bad"
    )
    page = Client().get(f"/runs/{failed.pk}/").content.decode()
    assert "gate:incompatible" in page and "What to do: Fix what each finding names" in page and 'data-final="true"' in page


def test_unknown_pages_are_404():
    assert Client().get("/pairs/999999/").status_code == 404
    assert Client().get("/runs/999999/").status_code == 404


def test_the_queue_lists_runs_still_going_first(certified_pair):
    pair, _ = certified_pair
    going = RunFactory.create(pair=pair, state=RunState.QUEUED)
    newer = RunFactory.create(pair=pair, state=RunState.FINISHED)
    page = Client().get("/runs/").content.decode()
    assert page.index(f"#{going.pk}<") < page.index(f"#{newer.pk}<")


def test_the_queue_says_when_it_is_empty():
    assert "No certification has been queued yet" in Client().get("/runs/").content.decode()


def test_the_run_api_gives_state_progress_and_the_verdict(certified_pair):
    from rest_framework.test import APIClient

    _, run = certified_pair
    body = APIClient().get(f"/api/v1/runs/{run.pk}/").json()
    assert (body["state"], body["verdict"]["verdict"]) == ("finished", "failed")
    assert [r["category"] for r in body["results"]] == ["math"]
    math = body["results"][0]  # a category's speedup rests on one or two prompts a block: the field says indicative
    assert math["indicative_speedup"] == 1.2 and "speedup" not in math
    assert math["acceptance"]["cumulative_per_position"] == [0.8, 0.6] and "per_position" not in math["acceptance"]
    assert math["acceptance"]["mean_acceptance_length_interval"] == [2.8, 3.4]


def test_the_pair_page_gives_al_its_interval_over_prompts_or_says_why_not(certified_pair):
    pair, _ = certified_pair
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert "[2.80, 3.40]" in page and "95 % over 12 prompts" in page  # the math row
    assert "no interval: measured before per-prompt counts" in page  # the suite's document predates them


def test_a_serving_run_publishes_the_measured_command_and_its_latencies_and_load(serving_pair):
    pair, run = serving_pair
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    recipe = run.result["stages"]["throughput"]["servers"]["speculative_recipe"]
    assert "The command that was measured" in page and recipe.split(" --speculative-config")[0] in page
    assert "--enforce-eager" in page and "the verifier alone" in page
    assert "How speed was measured" in page and "A B or B A as a coin decided" in page and "128 tokens per request" in page
    rows = re.findall(r"<tr><td class=\"nowrap\">([^<]+)</td><td>([A-Z0-9]+)</td>", page)
    assert ("c=1", "TTFT") in rows and ("c=16", "E2E") in rows and ("Poisson 7.00 req/s", "TPOT") in rows
    assert len(rows) == 6 * 4  # five levels and the Poisson point, four latencies each
    assert "20.0 → 14.3" in page  # c=1 TTFT p50, baseline → speculative (ms)
    assert "Poisson arrivals at <strong>7.00 req/s</strong>" in page and "1.90\u00d7" in page
    assert "other processes used <strong>1 %</strong>" in page and "<strong>equal</strong> the offline engine" in page
    assert "95 % interval from the paired blocks" in page and page.count('<td class="num">5</td>') == 5


AGREEING = "<strong>equal</strong> the sum of its answers' own (40 accepted of 48"
DIFFERING = "<strong>differ</strong> from the sum of its answers' own: /metrics 40/48, answers 39/48"


@pytest.mark.parametrize(("agree", "said"), [(True, AGREEING), (False, DIFFERING)])
def test_a_run_the_servers_measured_holds_their_metrics_to_their_answers_own_counters(serving_pair, agree, said):
    """Issue 62 §1: where the published servers gave the figures, the counters check is /metrics against each answer's own."""
    pair, run = serving_pair
    counts = {"drafts": 12, "draft_tokens": 48, "accepted": 40, "accepted_per_position": [12, 10, 9, 9]}
    answers = counts if agree else {**counts, "accepted": 39, "accepted_per_position": [12, 10, 9, 8]}
    run.result["stages"]["throughput"]["counters"] = {"served": counts, "offline": answers, "agree": agree, "against": "requests"}
    run.save(update_fields=["result"])
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert said in page and "offline engine" not in page


def test_a_version_2_run_still_renders_and_says_it_was_timed_offline(certified_pair):
    pair, run = certified_pair
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert "timed offline engine waves" in page and "re-certify this pair" in page
    assert "measured offline" in page and "The command that was measured" not in page
    run_page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert "Measured offline" in run_page and "no load record" in run_page


def test_the_run_page_and_api_give_a_serving_runs_speed_latency_and_measurement(serving_pair):
    _, run = serving_pair
    page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert "Verdict:" in page and "Machine load during the timed blocks" in page and "run-recipe" in page
    body = Client().get(f"/api/v1/runs/{run.pk}/").json()
    assert body["speed"][0]["pairs"] == 5 and len(body["latency"]) == 24
    first = body["latency"][0]
    assert first["where"] == "c=1" and first["metric"] == "ttft" and first["baseline"]["p50"] == pytest.approx(20.0)
    measured = body["measurement"]
    assert measured["mode"] == "serving" and measured["counters_agree"] is True and measured["request_rate"] == 7.0
    assert measured["recipe"].startswith("vllm serve spechub-toy/llama-verifier") and measured["output_tokens"] == 128
    assert measured["latency_speedup_interval"] == [1.6, 2.2] and measured["load"]["cpu_count"] == 2


CPU_ENVIRONMENT = {"VLLM_CPU_KVCACHE_SPACE": "1", "LD_PRELOAD": "libtcmalloc_minimal.so.4:$VIRTUAL_ENV/lib/libiomp5.so"}
STARTS: list[dict[str, object]] = [
    {"kind": "server", "detail": "baseline", "stage": "gate", "seconds": 41.5},
    {"kind": "server", "detail": "speculative", "stage": "gate", "seconds": 47.0},
    {"kind": "engine", "detail": "vllm verifier-alone", "stage": "baseline", "seconds": 28.1},
    {"kind": "engine", "detail": "vllm draft_model", "stage": "speculative", "seconds": 31.9},
    {"kind": "reference", "detail": "transformers verifier-alone", "stage": "equivalence", "seconds": 4.2},
    {"kind": "server", "detail": "speculative --enable-chunked-prefill", "stage": "throughput", "seconds": None},
]


def with_starts_and_environment(document: dict[str, Any]) -> dict[str, Any]:
    """A CPU run as issue 62 records it: the servers' environment, and every engine and server the run started."""
    document["stages"]["throughput"]["servers"]["environment"] = dict(CPU_ENVIRONMENT)
    document["stages"]["verdict"]["starts"] = [dict(start) for start in STARTS]
    return document


def test_a_cpu_runs_pages_list_what_it_started_and_its_commands_carry_the_servers_environment(serving_pair):
    pair, run = serving_pair
    run.result = with_starts_and_environment(run.result)
    run.save(update_fields=["result"])
    page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert "What this run started" in page and "This run started 6 engines or servers" in page
    assert "vLLM offline engine" in page and "reference engine (transformers)" in page and "never answered" in page
    assert page.index("vllm verifier-alone") < page.index("transformers verifier-alone")  # in the order they started
    prefix = "LD_PRELOAD=libtcmalloc_minimal.so.4:$VIRTUAL_ENV/lib/libiomp5.so VLLM_CPU_KVCACHE_SPACE=1 vllm serve "
    served = re.search(r'<pre id="run-recipe"><code>([^<]+)</code>', page)
    assert served is not None and served[1].startswith(prefix), page
    pair_page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    for target in ("recipe", "recipe-baseline"):
        line = re.search(rf'<pre id="{target}"><code>([^<]+)</code>', pair_page)
        assert line is not None and line[1].startswith(prefix), target
    body = Client().get(f"/api/v1/runs/{run.pk}/").json()
    assert body["measurement"]["recipe"].startswith(prefix) and body["measurement"]["baseline_recipe"].startswith(prefix)
    # A document from before issue 62 lists nothing and publishes its lines as they were.
    run.result = serving_document()
    run.save(update_fields=["result"])
    page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert "What this run started" not in page and "LD_PRELOAD" not in page


def test_the_queue_updates_itself_only_while_runs_are_going(certified_pair):
    pair, _ = certified_pair
    page = Client().get("/runs/").content.decode()
    assert 'data-going="false"' in page and "runs-live-toggle" not in page
    RunFactory.create(pair=pair, state=RunState.MEASURING)
    page = Client().get("/runs/").content.decode()
    assert 'data-going="true"' in page and "Pause live updates" in page and "queue.js" in page


def test_the_pair_page_run_page_and_run_api_show_the_serving_feature_grid(serving_pair):
    pair, run = serving_pair
    features = [
        {"feature": "structured output (JSON schema)", "outcome": "equal", "detail": "2 requests, greedy output equal"},
        {"feature": "chunked prefill", "outcome": "differs", "detail": "1 of 9 requests differ; the first at request 6, token 3",
         "divergence": {"request": 6, "token": 3}},
        {"feature": "fp8 KV cache", "outcome": "not-supported", "detail": "not supported on this build",
         "error": "ValueError: fp8 is not supported"},
    ]  # fmt: skip
    run.result = {**run.result, "stages": {**run.result["stages"], "smoke": {"features": features, "seconds": 41.4}}}
    run.save(update_fields=["result"])
    for page in (Client().get(f"/pairs/{pair.pk}/").content.decode(), Client().get(f"/runs/{run.pk}/").content.decode()):
        assert "Serving features" in page and "41 s for the whole grid" in page
        assert re.findall(r'class="verdict verdict-(\w+)">(equal|differs|not-supported)<', page) == [
            ("certified", "equal"), ("failed", "differs"), ("expired", "not-supported")
        ]  # fmt: skip
        assert "ValueError: fp8 is not supported" in page
    assert Client().get(f"/api/v1/runs/{run.pk}/").json()["smoke"]["features"][1]["divergence"] == {"request": 6, "token": 3}


def test_a_pair_measured_before_the_smoke_tier_says_so(certified_pair):
    pair, _ = certified_pair
    assert "measured before the smoke tier" in Client().get(f"/pairs/{pair.pk}/").content.decode()


def test_the_pair_page_reads_al_at_each_smaller_k_and_says_speed_was_measured_at_one(certified_pair):
    from workers import metrics
    from workers.engines.base import SpecCounters

    pair, run = certified_pair
    counts = SpecCounters(drafts=100, draft_tokens=400, accepted=220, per_position=(80, 60, 45, 35))
    run.result["stages"]["speculative"]["acceptance"] = metrics.acceptance(counts)
    run.save(update_fields=["result"])
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert "k=1 <strong>1.80</strong> · k=2 <strong>2.40</strong> · k=3 <strong>2.85</strong> · k=4 <strong>3.20</strong>" in page
    assert f"estimated</strong> from the run at k={pair.num_speculative_tokens}" in page and "not a run at that k" in page


def test_the_pair_page_and_run_api_give_acceptance_by_prompt_length_with_a_chart(certified_pair):
    from workers import metrics
    from workers.engines.base import SpecCounters

    pair, run = certified_pair
    short = [SpecCounters(drafts=10, draft_tokens=40, accepted=30, per_position=(9, 8, 7, 6))] * 12
    long = [SpecCounters(drafts=10, draft_tokens=40, accepted=2, per_position=(2, 0, 0, 0))] * 2
    acceptance = metrics.acceptance(sum([*short, *long], SpecCounters()), [*short, *long])
    acceptance["by_length"] = metrics.by_length([30] * 12 + [300, 400], [*short, *long], [64, 128, 256, 480])
    run.result["stages"]["speculative"]["acceptance"] = acceptance
    run.save(update_fields=["result"])
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert 'id="acceptance-by-length"' in page and "Mean acceptance length by prompt length" in page
    assert len(re.findall(r'<rect class="hbar"[^>]*><title>≤ (?:64|480) tokens', page)) == 2  # two buckets measured
    assert "not measured" in page and "no prompt this long" in page  # the empty buckets say so
    assert "257\u2013480 tokens" in page and "none: 2 prompts, fewer than 12" in page
    api = Client().get(f"/api/v1/runs/{run.pk}/").json()
    rows = api["acceptance"]["by_length"]
    assert [row["prompts"] for row in rows] == [12, 0, 0, 2] and "cumulative_per_position" in rows[0]


def choice_of_k(document: dict[str, Any]) -> dict[str, Any]:
    """Which k, as the throughput stage leaves it: best k = 2 at c = 1 (measured on a third server), 4 at c = 2."""
    throughput = document["stages"]["throughput"]
    recipe = throughput["servers"]["speculative_recipe"]
    predicted = {
        "1": [1.45, 1.62, 1.51, 1.4],
        "2": [1.1, 1.2, 1.25, 1.3],
    }
    levels: dict[str, dict[str, Any]] = {
        level: {
            "baseline_step_seconds": 0.01, "draft_seconds_per_token": 0.002, "best_k": 2 if level == "1" else 4,
            "predicted": [{"k": k, "mean_acceptance_length": 1 + 0.6 * k, "predicted_speedup": s}
                          for k, s in enumerate(speeds, 1)],
        }
        for level, speeds in predicted.items()
    }  # fmt: skip
    levels["1"]["measured"] = {**throughput["levels"]["1"], "speedup": 1.58, "speedup_interval": [1.49, 1.67]}
    return {
        "run_k": 4, "verifier_seconds_per_token": 0.00012, "prefill": {"tokens": [8, 32], "seconds": [0.02, 0.023]},
        "levels": levels, "recipes": {"4": recipe, "2": recipe.replace('"eagle3"}', '"eagle3","num_speculative_tokens":2}')},
    }  # fmt: skip


def test_the_pair_page_names_the_best_k_per_level_predicted_and_measured_and_serves_the_best_at_c1(serving_pair):
    pair, run = serving_pair
    run.result["stages"]["throughput"]["choice_of_k"] = choice_of_k(run.result)
    run.save(update_fields=["result"])
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert 'id="which-k"' in page and "Predicted speedup at each k, concurrency 1" in page and "0.000120 s a token" in page
    assert len(re.findall(r'<rect class="hbar"[^>]*><title>k=\d', page)) == 4
    rows = re.findall(r"<tr><td class=\"num\">(\d+)</td>(.*?)</tr>", page, re.S)
    best = {level: re.findall(r"<strong>(\d)</strong>", cells) for level, cells in rows if "predicted" not in cells}
    assert best["1"] == ["2"] and best["2"] == ["4"]
    assert "1.58\u00d7" in page and "1.49\u20131.67" in page  # the best k at c=1, measured with its interval
    served = re.search(r'<pre id="recipe"><code>([^<]+)</code>', page)
    assert served and "num_speculative_tokens&quot;:2" in served.group(1)  # the best k at c=1 is the one to run
    assert 'id="recipe-k4"' in page and "At k=4, as certified" in page  # the certified k is still offered
    api = Client().get(f"/api/v1/runs/{run.pk}/").json()["best_k"]
    assert [(row["concurrency"], row["best_k"], row["measured_speedup"]) for row in api] == [(1, 2, 1.58), (2, 4, 1.3)]
    assert api[0]["predicted_speedup"] == 1.62 and api[0]["supports"] == "faster"


def schedule_of(serve_it: bool) -> dict[str, Any]:
    """A schedule served and timed: k=2 at batch 1, k=4 above; faster than the fixed k at c=1 when `serve_it`."""
    levels = {c: {"speedup": 1.5, "speedup_interval": [1.45, 1.55], "honoured": True, "drafted_per_step": k,
                  "drafting": "", "block_ratios": [1.5]} for c, k in (("1", 2.0), ("2", 3.2))}  # fmt: skip
    why = "the schedule: measured faster than the fixed k=4 at c=1 and slower at none" if serve_it else (
        "the fixed k=4 stays: the schedule was not measured faster than it at any level")  # fmt: skip
    return {"ranges": [[1, 1, 2], [2, 1024, 4]], "levels": levels, "honoured": True, "finding": None,
            "recipe": "vllm serve spechub-toy/schedule-line", "serve_it": serve_it, "why": why}  # fmt: skip


@pytest.mark.parametrize("serve_it", [True, False])
def test_the_pair_page_serves_the_measured_schedule_only_where_it_was_measured_better(serving_pair, serve_it):
    pair, run = serving_pair
    run.result["stages"]["throughput"]["choice_of_k"] = {**choice_of_k(run.result), "schedule": schedule_of(serve_it)}
    run.save(update_fields=["result"])
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    served = re.search(r'<pre id="recipe"><code>([^<]+)</code>', page)
    assert served and ("schedule-line" in served.group(1)) is serve_it
    assert 'id="schedule"' in page and "batches 1\u20131 draft <strong>k=2</strong>" in page
    assert ('id="recipe-schedule"' in page) is not serve_it  # shown apart only when it is not the command
    assert ("not measured faster than it at any level" in page) is not serve_it


def test_the_certificate_names_the_best_k_per_level_measured(serving_pair):
    from kernel.certificate_text import describe
    from kernel.certificates import Verified

    _, run = serving_pair
    document = run.result
    document["stages"]["throughput"]["choice_of_k"] = choice_of_k(document)
    payload = {
        "expires_at": "2030-01-01T00:00:00+00:00", "issued_at": "2026-12-03T00:00:00+00:00", "verdict": "certified",
        "reproduce": "spechub reproduce", "results": {"throughput": document["stages"]["throughput"]},
        "inputs": {"draft": None, "method": "eagle3", "verifier": {"repo_id": "v", "sha": "a" * 40}, "num_speculative_tokens": 4,
                   "hardware": "cpu"},
    }  # fmt: skip
    text, _ = describe(Verified(payload=payload, digest="d", key_id="k", signature="s"), timezone.now())  # type: ignore[arg-type]
    assert "best k: c=1 k=2 (1.58x [1.49, 1.67] measured); c=2 k=4 (1.30x" in text


def test_the_certificate_names_acceptance_by_temperature_and_the_schedule_served(serving_pair):
    from kernel.certificate_text import describe
    from kernel.certificates import Verified

    _, run = serving_pair
    document = run.result
    document["stages"]["throughput"]["choice_of_k"] = {**choice_of_k(document), "schedule": schedule_of(True)}
    sampled = [{"temperature": 0.0, "mean_acceptance_length": 3.2, "mean_acceptance_length_interval": [3.0, 3.4]},
               {"temperature": 0.7, "mean_acceptance_length": 2.6}]  # fmt: skip
    payload = {
        "expires_at": "2030-01-01T00:00:00+00:00", "issued_at": "2026-12-03T00:00:00+00:00", "verdict": "certified",
        "reproduce": "spechub reproduce", "inputs": {"draft": None, "method": "eagle3", "num_speculative_tokens": 4},
        "results": {"throughput": document["stages"]["throughput"],
                    "speculative": {"acceptance": {"mean_acceptance_length": 3.2, "by_temperature": sampled}}},
    }  # fmt: skip
    text, _ = describe(Verified(payload=payload, digest="d", key_id="k", signature="s"), timezone.now())  # type: ignore[arg-type]
    assert "acceptance by temperature: 0.0 3.20 [3.00, 3.40]; 0.7 2.60" in text
    assert "batch-size schedule: batches 1-1 k=2, batches 2-1024 k=4; c=1 1.50x [1.45, 1.55]; c=2 1.50x" in text
    assert "honoured; the schedule: measured faster than the fixed k=4 at c=1 and slower at none" in text
    payload["results"]["throughput"]["choice_of_k"]["schedule"] = {"ranges": "hostile"}  # type: ignore[index]
    text, _ = describe(Verified(payload=payload, digest="d", key_id="k", signature="s"), timezone.now())  # type: ignore[arg-type]
    assert "batch-size schedule: unreadable" in text


def test_the_pair_page_and_run_api_give_acceptance_by_temperature_and_the_recipe_says_its_figures_are_greedy(serving_pair):
    from workers import metrics
    from workers.engines.base import SpecCounters

    pair, run = serving_pair
    greedy = [SpecCounters(drafts=10, draft_tokens=40, accepted=30, per_position=(9, 8, 7, 6))] * 12
    hot = [SpecCounters(drafts=12, draft_tokens=48, accepted=10, per_position=(6, 3, 1, 0))] * 12
    acceptance = metrics.acceptance(sum(greedy, SpecCounters()), greedy)
    acceptance["by_temperature"] = metrics.by_temperature({0.0: (sum(greedy, SpecCounters()), greedy),
                                                           1.0: (sum(hot, SpecCounters()), hot)})  # fmt: skip
    run.result["stages"]["speculative"]["acceptance"] = acceptance
    judged: dict[str, Any] = {"outcome": "measured", "fault": None, "reason": "", "evidence": {}}
    untested = {**judged, "outcome": "not judgeable", "fault": "engine", "reason": "the build failed its own control"}
    run.result["stages"]["verdict"]["properties"] = {"acceptance": judged, "greedy": judged, "sampling": untested,
                                                     "speed": judged}  # fmt: skip
    run.save(update_fields=["result"])
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert 'id="acceptance-by-temperature"' in page and "by temperature (top_p 1" in page
    assert "its sampling test on this run did not pass (the build failed its own control)." in page
    assert "hold for greedy requests (temperature 0)" in page and "acceptance length reads 1.83 at 1.0" in page
    assert '0.0 <small class="muted">greedy</small>' in page and '0.500 <span class="interval nowrap">[' in page
    rows = Client().get(f"/api/v1/runs/{run.pk}/").json()["acceptance"]["by_temperature"]
    assert [row["temperature"] for row in rows] == [0.0, 1.0]
    assert "cumulative_per_position_interval" in rows[1] and "per_position" not in rows[1]


def _by_mode_acceptance() -> dict[str, Any]:
    """Acceptance on the suite as written, and with the thinking switch on and off (issue 53), from counters."""
    from workers import metrics, modes
    from workers.engines.base import SpecCounters

    on = [SpecCounters(drafts=10 + i % 3, draft_tokens=40, accepted=20 + i % 5, per_position=(9, 8, 3, 0)) for i in range(12)]
    off = [SpecCounters(drafts=10 + i % 2, draft_tokens=40, accepted=28 + i % 4, per_position=(9, 9, 6, 4)) for i in range(12)]
    acceptance: dict[str, Any] = dict(metrics.acceptance(sum(on, SpecCounters()), on))
    acceptance["mode"] = {"rendered": "as written", "chat_template_kwargs": {}}
    runs = {"thinking on": (sum(on, SpecCounters()), on), "thinking off": (sum(off, SpecCounters()), off)}
    acceptance["by_mode"] = modes.by_mode("enable_thinking", "each prompt as the user's one message", runs)
    return acceptance


def test_the_pair_page_the_run_api_and_the_certificate_give_acceptance_by_thinking_mode(serving_pair):
    from kernel.certificate_text import describe
    from kernel.certificates import Verified

    pair, run = serving_pair
    acceptance = _by_mode_acceptance()
    run.result["stages"]["speculative"]["acceptance"] = acceptance
    run.save(update_fields=["result"])
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    on, off = (row["mean_acceptance_length"] for row in acceptance["by_mode"]["modes"])
    apart = acceptance["by_mode"]["difference"]
    assert 'id="acceptance-by-mode"' in page and "<code>enable_thinking</code>" in page
    assert "<td>thinking on</td>" in page and f"{on:.2f}" in page and f"{off:.2f}" in page
    assert f"thinking on less thinking off: <strong>{apart['mean_acceptance_length']:.2f}</strong>" in page
    assert f"[{apart['interval'][0]:.2f}, {apart['interval'][1]:.2f}]" in page and "paired over 12 prompts" in page
    assert "the prompts as written (no chat template, so no thinking switch)" in page
    found = Client().get(f"/api/v1/runs/{run.pk}/").json()["acceptance"]
    assert found["mode"] == {"rendered": "as written", "chat_template_kwargs": {}}
    rows = found["by_mode"]["modes"]
    assert [row["chat_template_kwargs"] for row in rows] == [{"enable_thinking": True}, {"enable_thinking": False}]
    assert all(len(row["mean_acceptance_length_interval"]) == 2 and "cumulative_per_position" in row for row in rows)
    assert found["by_mode"]["difference"]["interval"] == apart["interval"]
    payload = {"expires_at": "2030-01-01T00:00:00+00:00", "verdict": "certified", "inputs": {},
               "results": {"speculative": {"acceptance": acceptance}}}  # fmt: skip
    text, _ = describe(Verified(payload=payload, digest="d", key_id="k", signature="s"), timezone.now())  # type: ignore[arg-type]
    assert "figures hold for: the prompts as written (no chat template, so no thinking switch)" in text
    assert f"acceptance by mode (enable_thinking): thinking on {on:.2f} [" in text
    assert f"thinking on - thinking off {apart['mean_acceptance_length']:.2f} [" in text and "paired over 12 prompts" in text
    payload["results"] = {"speculative": {"acceptance": {"by_mode": {"modes": "hostile"}, "mode": ["x"]}}}
    text, _ = describe(Verified(payload=payload, digest="d", key_id="k", signature="s"), timezone.now())  # type: ignore[arg-type]
    assert "acceptance by mode: unreadable" in text


def test_the_pair_page_the_run_api_and_the_certificate_give_acceptance_by_reasoning_effort(serving_pair):
    """gpt-oss's harmony `reasoning_effort` (issue 60): three modes, each with its interval, low set against high."""
    from kernel.certificate_text import describe
    from kernel.certificates import Verified
    from workers import metrics, modes
    from workers.engines.base import SpecCounters

    pair, run = serving_pair
    levels = {f"effort {level}": [SpecCounters(drafts=10 + i % 3, draft_tokens=40, accepted=shift + i % 5,
                                               per_position=(9, 8, 3, 0)) for i in range(12)]
              for level, shift in (("low", 28), ("medium", 24), ("high", 20))}  # fmt: skip
    acceptance: dict[str, Any] = dict(metrics.acceptance(sum(levels["effort low"], SpecCounters()), levels["effort low"]))
    runs = {mode: (sum(counters, SpecCounters()), counters) for mode, counters in levels.items()}
    acceptance["by_mode"] = modes.by_mode("reasoning_effort", "each prompt as the user's one message", runs)
    run.result["stages"]["speculative"]["acceptance"] = acceptance
    run.save(update_fields=["result"])
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    apart = acceptance["by_mode"]["difference"]
    assert "By reasoning effort" in page and "<code>reasoning_effort</code>" in page
    assert all(f"<td>effort {level}</td>" in page for level in ("low", "medium", "high"))
    assert '{"reasoning_effort": "medium"}' in page.replace("&quot;", '"') and "yes" not in page.split("By reasoning")[1][:3000]
    assert f"effort low less effort high: <strong>{apart['mean_acceptance_length']:.2f}</strong>" in page
    rows = Client().get(f"/api/v1/runs/{run.pk}/").json()["acceptance"]["by_mode"]["modes"]
    assert [row["chat_template_kwargs"] for row in rows] == [{"reasoning_effort": v} for v in ("low", "medium", "high")]
    assert all(len(row["mean_acceptance_length_interval"]) == 2 for row in rows)
    payload = {"expires_at": "2030-01-01T00:00:00+00:00", "verdict": "certified", "inputs": {},
               "results": {"speculative": {"acceptance": acceptance}}}  # fmt: skip
    text, _ = describe(Verified(payload=payload, digest="d", key_id="k", signature="s"), timezone.now())  # type: ignore[arg-type]
    assert "acceptance by mode (reasoning_effort): effort low " in text and "; effort high " in text
    assert f"effort low - effort high {apart['mean_acceptance_length']:.2f} [" in text
