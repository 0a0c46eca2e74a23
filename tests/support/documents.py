"""A whole version-3 result document, as a worker's director writes one: every field the types in kernel/result
require, at every depth, each figure what it may be and coherent with the figures beside it (issue 61 §3). A
self-hosted upload is held to all of that, so the tests that upload start from this one and change what they test."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from kernel.spec import Thresholds
from kernel.verdict import judge_document

K = 4  # the drafted tokens a step of the run the document is for


def percentiles(p50: float) -> dict[str, float]:
    return {"p50": p50, "p90": p50 * 1.2, "p95": p50 * 1.3, "p99": p50 * 1.5}


def rates(tokens_per_second: float, scale: float) -> dict[str, Any]:
    """One side at one level: the client's latencies, the engine's own (agreeing with them) and what was delayed."""
    latency = {"ttft": percentiles(20.0 * scale), "tpot": percentiles(2.0 * scale), "itl": percentiles(1.9 * scale),
               "e2e": percentiles(270.0 * scale)}  # fmt: skip
    return {"tokens_per_second": tokens_per_second, "tokens_per_second_runs": [tokens_per_second] * 4,
            "requests_per_second": 3.9, "latency_ms": latency,
            "engine_latency_ms": {name: {q: v * 0.95 for q, v in figures.items()} for name, figures in latency.items()},
            "delayed": []}  # fmt: skip


def level(concurrency: int, speedup: float) -> dict[str, Any]:
    return {
        "baseline": rates(100.0 * concurrency, 1.0),
        "speculative": rates(100.0 * concurrency * speedup, 1 / speedup),
        "speedup": speedup,
        "speedup_interval": [speedup * 0.95, speedup * 1.05],
        "speedup_cv": 0.015,
        "block_ratios": [speedup * 0.98, speedup, speedup * 1.02, speedup],
        "requests_per_block": 8,
        "stopping": {
            "first_pairs": 4,
            "most_pairs": 4,
            "target_half_width": 0.05,
            "half_width": 0.04,
            "reason": "precision reached",
        },
        "client_busy": 0.3,
        "achieved_concurrency": {"baseline": float(concurrency), "speculative": float(concurrency)},
    }


def acceptance(al: float) -> dict[str, Any]:
    """AL `al` at k = K from 60 drafting steps over 12 prompts, with its breakdowns."""
    accepted = round((al - 1) * 60)
    per_position = [round(0.9**i * (al - 1) / K * 1.1, 3) for i in range(1, K + 1)]
    at_temperature = {"mean_acceptance_length": al, "per_position": per_position,
                      "per_position_interval": [[max(0.0, r - 0.1), min(1.0, r + 0.1)] for r in per_position],
                      "per_position_interval_over": "prompts", "drafts": 60, "prompts": 12,
                      "mean_acceptance_length_interval": [al - 0.2, al + 0.2]}  # fmt: skip
    mode = {"chat_template_kwargs": {}, "mean_acceptance_length": al, "per_position": per_position, "drafts": 60}
    return {
        "mean_acceptance_length": al,
        "acceptance_rate": accepted / (60 * K),
        "per_position": per_position,
        "counts": {"drafts": 60, "draft_tokens": 60 * K, "accepted": accepted, "accepted_per_position": [50, 40, 25, 15]},
        "prompts": 12,
        "mean_acceptance_length_interval": [al - 0.2, al + 0.2],
        "prompts_effective": 11.5,
        "by_k": [{"k": k, "mean_acceptance_length": 1 + sum(per_position[:k])} for k in range(1, K + 1)],
        "by_length": [{"after": 0, "up_to": 64, "prompts": 12, "mean_acceptance_length": al, "per_position": per_position}],
        "by_temperature": [{"temperature": 0.0, **at_temperature}, {"temperature": 0.7, **at_temperature}],
        "mode": {"rendered": "as written", "chat_template_kwargs": {}},
        "by_mode": {
            "switch": "enable_thinking",
            "prompts_as": "each the user's one message",
            "modes": [{**mode, "mode": "thinking on"}, {**mode, "mode": "thinking off"}],
            "difference": {
                "of": ["thinking on", "thinking off"],
                "mean_acceptance_length": 0.0,
                "interval": [-0.1, 0.1],
                "prompts": 12,
                "paired_over": "prompts",
            },
        },
        "per_prompt": {"drafts": [5] * 12, "accepted": [accepted // 12] * 12},
    }


def choice_of_k(levels: dict[str, Any]) -> dict[str, Any]:
    """k = 2 best at c = 1 (measured on a third server), the run's k at c = 4, and the schedule that serves both."""
    recipe = 'vllm serve spechub-toy/llama-verifier --speculative-config \'{"method":"eagle3"}\''
    predicted = [{"k": k, "mean_acceptance_length": 1 + 0.6 * k, "predicted_speedup": 1.2 + 0.05 * k} for k in range(1, K + 1)]
    costs = {"baseline_step_seconds": 0.01, "draft_seconds_per_token": 0.002, "predicted": predicted}
    best = {"1": {**costs, "best_k": 2, "measured": level(1, 1.5)}, "4": {**costs, "best_k": K}}
    schedule = {"ranges": [[1, 1, 2], [2, 1024, K]], "honoured": True, "finding": None, "recipe": recipe, "serve_it": False,
                "why": "the fixed k stays", "levels": {level_name: {**figures, "honoured": True, "drafted_per_step": 2.0,
                                                                     "drafting": "as scheduled"}
                                                         for level_name, figures in levels.items()}}  # fmt: skip
    return {"run_k": K, "verifier_seconds_per_token": 0.00012, "prefill": {"tokens": [8, 32], "seconds": [0.02, 0.023]},
            "levels": best, "recipes": {str(K): recipe}, "schedule": schedule}  # fmt: skip


def throughput(speedup: float) -> dict[str, Any]:
    levels = {"1": level(1, speedup), "4": level(4, speedup * 0.9)}
    counts = {"drafts": 60, "draft_tokens": 240, "accepted": 130, "accepted_per_position": [50, 40, 25, 15]}
    return {
        "levels": levels,
        "choice_of_k": choice_of_k(levels),
        "theoretical_bound": 3.2,
        "per_category_speedup": {"chat": speedup},
        "mode": "serving",
        "servers": {
            "baseline_command": ["python", "-m", "vllm.entrypoints.openai.api_server"],
            "speculative_command": ["python", "-m", "vllm.entrypoints.openai.api_server"],
            "baseline_recipe": "vllm serve spechub-toy/llama-verifier",
            "speculative_recipe": "vllm serve spechub-toy/llama-verifier --speculative-config '{}'",
            "start_seconds": 38.5,
            "output_tokens": 128,
        },
        "rate_point": {**level(1, speedup), "request_rate": 7.0},
        "load": {
            "load_average_before": [0.4, 0.5, 0.6],
            "load_average_after": [1.9, 1.0, 0.7],
            "wall_seconds": 110.0,
            "other_cpu_seconds": 2.2,
            "other_cpu_share": 0.01,
            "cpu_count": 2,
        },
        "counters": {"served": counts, "offline": counts, "agree": True},
    }


def equivalence() -> dict[str, Any]:
    greedy = {"chat": {"exact_match": 1.0, "prompts": 12, "divergences": []}}
    power = {"tv": 0.1, "power": 0.9, "alpha": 0.001, "samples_needed": 600}
    sampling = {"prefix": 0, "samples": 800, "bins": 9, "statistic": 7.5, "dof": 8, "p_value": 0.48, "observed_tv": 0.02,
                "power": power, "detectable_tv": 0.08, "own_outcomes": 8, "own_mass": 0.9, "bands": 1}  # fmt: skip
    return {"greedy": greedy, "reference": greedy, "sampling": [sampling]}


def whole_document(
    spec: Mapping[str, Any] | None = None, *, al: float = 3.0, speedup: float = 1.5, engine_build: str = "0.32.0"
) -> dict[str, Any]:
    """A whole document of a run at k = K, judged as the worker judges it, for `spec` (the claim's, as JSON)."""
    accepted = acceptance(al)
    environment = {"engine_build": engine_build, "versions": {"vllm": engine_build}, "hardware_class": "gpu.h100",
                   "cpu": "x86", "cpu_count": 2, "dtype": "float32", "k": K, "seed": 0, "engine": {"max_model_len": 512},
                   "workloads": {"suite": "public", "sha256": "a" * 64, "prompts": 12}}  # fmt: skip
    figures = {"acceptance": accepted, "equivalence": {"greedy_exact_match": 1.0, "divergences": [],
                                                       "reference_exact_match": 1.0},
               "throughput": {"speedup": speedup}}  # fmt: skip
    stages: dict[str, Any] = {
        "fetch": {"verifier": "a" * 40, "draft": "b" * 40},
        "gate": {"compatible": True, "findings": [], "recipe": "vllm serve spechub-toy/llama-verifier"},
        "baseline": {"cache": {"key": "k", "hit": False}, "start_seconds": 1.0, "manifest": {"engine": "vllm"}},
        "speculative": {"start_seconds": 2.0, "manifest": {"engine": "vllm"}, "acceptance": accepted},
        "equivalence": equivalence(),
        "throughput": throughput(speedup),
        "smoke": {"features": [{"feature": "json", "outcome": "equal", "detail": "the same"}], "seconds": 4.5},
    }
    verdict, reasons, properties = judge_document(stages, method="eagle3", thresholds=Thresholds(), qualification=None)
    stages["verdict"] = {"verdict": verdict, "reasons": reasons, "thresholds": asdict(Thresholds()),
                         "workloads": {"chat": figures}, "environment": environment, "properties": properties,
                         "qualification": None}  # fmt: skip
    document = {"schema_version": 3, "spec": dict(spec or {}), "stages": stages, "workloads": {"chat": figures},
                "environment": environment}  # fmt: skip
    found: dict[str, Any] = json.loads(json.dumps(document))  # as sent: no part shared with another
    return found


def changed(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A deep copy of `document` with the field at `path` set to `value`."""
    found = copy.deepcopy(document)
    place = found
    for step in path[:-1]:
        place = place[step]
    place[path[-1]] = value
    return found
