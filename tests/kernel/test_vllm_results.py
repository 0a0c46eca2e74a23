"""vLLM's own result files, both ways (issue 54 §2): a `vllm bench serve` result read and held to a certified band, a
hostile file refused with its reason, and a certified level written in vLLM's own field names, which this test reads
from the installed vLLM's benchmarks code rather than from a list typed here."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from kernel import judging, live, vllm_results

DRAFTS, REQUESTS = 20_000, 2_000
# Counts accepted through each of k = 4 positions (cumulative), summing to the accepted tokens: AL 3.4, 2.6 and 4.2.
WITHIN, BELOW, ABOVE = (16_000, 13_000, 11_000, 8_000), (12_000, 9_000, 6_800, 4_200), (19_000, 17_000, 15_000, 13_000)
BAND = judging.Band(al=3.4, interval=(3.3, 3.5), per_position=(0.8, 0.65, 0.55, 0.4),
                    per_position_interval=((0.78, 0.82), (0.62, 0.68), (0.52, 0.58), (0.37, 0.43)), k=4)  # fmt: skip


def bench_result(per_position: tuple[int, ...], *, drafts: int = DRAFTS, completed: int = REQUESTS) -> dict[str, Any]:
    """A result as `vllm bench serve --save-result` writes one for a speculating server (vllm/benchmarks/serve.py)."""
    accepted, tokens = sum(per_position), drafts * len(per_position)
    return {
        "date": "20261205-101500", "endpoint_type": "openai", "backend": "openai", "label": None,
        "model_id": "toy-org/verifier", "tokenizer_id": "toy-org/verifier", "num_prompts": completed,
        "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 8, "duration": 61.5, "completed": completed,
        "failed": 0, "total_input_tokens": 100 * completed, "total_output_tokens": 128 * completed,
        "request_throughput": completed / 61.5, "output_throughput": 128 * completed / 61.5,
        "mean_ttft_ms": 21.0, "median_ttft_ms": 20.0, "std_ttft_ms": 3.0, "p99_ttft_ms": 31.0,
        "spec_decode_acceptance_rate": accepted / tokens * 100, "spec_decode_acceptance_length": 1 + accepted / drafts,
        "spec_decode_num_drafts": drafts, "spec_decode_draft_tokens": tokens, "spec_decode_accepted_tokens": accepted,
        "spec_decode_per_position_acceptance_rates": [n / drafts for n in per_position],
    }  # fmt: skip


def encoded(document: object) -> bytes:
    return json.dumps(document).encode()


@pytest.mark.parametrize(("counts", "verdict"), [(WITHIN, "within"), (BELOW, "below"), (ABOVE, "above")])
def test_three_constructed_results_read_within_below_and_above_the_band_with_the_smallest_visible_difference(counts, verdict):
    observed = vllm_results.read(encoded(bench_result(counts)), name="result.json")
    judged = judging.judge(observed, BAND)
    assert judged["verdict"] == verdict, judged["reason"]
    assert observed.counts.per_position == counts and observed.counts.requests == REQUESTS and observed.k == 4
    low, high = judged["al_interval"]
    assert low < judged["al"] < high and 0 < judged["smallest_difference"] < 0.3  # type: ignore[operator]
    assert f"under {judged['smallest_difference']:.2f}" in judged["reason"]
    assert {row["verdict"] for row in judged["positions"]} == {verdict} and len(judged["positions"]) == 4


def test_a_file_of_few_requests_is_too_small_and_another_k_a_mismatch_never_below():
    few = judging.judge(vllm_results.read(encoded(bench_result(BELOW, completed=7)), name="r.json"), BAND)
    other_k = judging.judge(vllm_results.read(encoded(bench_result(BELOW[:3])), name="r.json"), BAND)
    assert (few["verdict"], other_k["verdict"]) == (live.TOO_SMALL, live.MISMATCH)
    assert {row["verdict"] for row in few["positions"]} == {live.TOO_SMALL}  # as AL: 7 requests judge no position
    assert "k=4" in other_k["reason"] and other_k["positions"] == []


def test_a_band_without_an_interval_reads_no_band():
    judged = judging.judge(vllm_results.read(encoded(bench_result(BELOW)), name="r.json"), judging.Band(3.4, None, k=4))
    assert judged["verdict"] == live.NO_BAND


def test_a_position_certified_without_an_interval_reads_no_band_not_below_a_point():
    band = judging.Band(3.4, (3.3, 3.5), per_position=BAND.per_position, k=4)
    judged = judging.judge(vllm_results.read(encoded(bench_result(BELOW)), name="r.json"), band)
    assert judged["verdict"] == live.BELOW and {row["verdict"] for row in judged["positions"]} == {live.NO_BAND}
    assert [row["certified"] for row in judged["positions"]] == list(BAND.per_position)


def test_append_result_lines_are_read_as_the_last_result_and_say_so():
    text = "\n".join(json.dumps(bench_result(counts)) for counts in (WITHIN, ABOVE, BELOW))
    observed = vllm_results.read(text.encode(), name="runs.json")
    assert observed.counts.per_position == BELOW and "last of 3" in observed.note


def test_a_saved_metrics_exposition_is_read_by_the_watchers_reader():
    lines = [f'vllm:spec_decode_num_drafts_total{{model_name="m"}} {DRAFTS}',
             f'vllm:spec_decode_num_draft_tokens_total{{model_name="m"}} {4 * DRAFTS}',
             f'vllm:spec_decode_num_accepted_tokens_total{{model_name="m"}} {sum(WITHIN)}',
             *(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{model_name="m",position="{i}"}} {n}'
               for i, n in enumerate(WITHIN)),
             f'vllm:request_success_total{{finished_reason="stop",model_name="m"}} {REQUESTS}']  # fmt: skip
    observed = vllm_results.read(("\n".join(lines) + "\n").encode(), name="metrics.txt")
    assert observed.source == vllm_results.METRICS and observed.counts.per_position == WITHIN
    assert judging.judge(observed, BAND)["verdict"] == "within"


DROP = object()


def edited(**fields: object) -> bytes:
    """The within result with `fields` changed (DROP: left out)."""
    changed = {**bench_result(WITHIN), **fields}
    return encoded({key: value for key, value in changed.items() if value is not DROP})


def _deep(depth: int) -> bytes:
    return ('{"a":' * depth + "1" + "}" * depth).encode()


@pytest.mark.parametrize(
    ("data", "code", "said"),
    [
        (encoded({"completed": 9, "output_throughput": 10.0, "mean_ttft_ms": 3.0}), "judge:no-spec-decode", "no spec-decode"),
        (b"# HELP vllm:num_requests_running x\nvllm:num_requests_running 0\n", "judge:no-spec-decode", "not on"),
        (encoded({**bench_result(WITHIN), "spec_decode_num_drafts": None}), "judge:bad-field", "not a count"),
        (encoded(bench_result(WITHIN)).replace(b'"burstiness": 1.0', b'"burstiness": NaN'), "judge:not-finite", "NaN"),
        (_deep(10_000), "judge:too-deep", "deeper"),
        (_deep(40), "judge:too-deep", "deeper"),
        (b"{" + b" " * vllm_results.MAX_BYTES + b"}", "judge:too-large", "MiB"),
        (b"[" + b"[]," * vllm_results.MAX_CONTAINERS + b"[]]", "judge:too-many-values", "objects and arrays"),
        (b"{}\n" * (vllm_results.MAX_RESULTS + 1), "judge:too-many-results", "one run's file"),
        (b"[" + b"1," * vllm_results.MAX_RESULTS + b"1]", "judge:too-many-results", "one run's file"),
        (b"vllm:x 1\n" * (vllm_results.MAX_METRICS_BYTES // 9 + 1), "judge:too-large", "/metrics"),
        (edited(spec_decode_num_drafts=[1] * 100_000), "judge:bad-field", "a JSON array, not a count"),
        (edited(spec_decode_num_drafts=10**400), "judge:bad-field", "401-digit number"),
        (b"\xff\xfe{}", "judge:not-text", "UTF-8"),
        (b'{"a": ', "judge:not-json", "not valid JSON"),
        (b"[1, 2]", "judge:not-a-result", "not a vllm bench serve result"),
        (edited(spec_decode_draft_tokens=DROP), "judge:incomplete", "lacks"),
        (edited(spec_decode_acceptance_length=9.0), "judge:inconsistent", "its counts give"),
        (edited(spec_decode_per_position_acceptance_rates=[0.1, 0.9]), "judge:impossible", "later position"),
        (edited(spec_decode_per_position_acceptance_rates=[2.0]), "judge:bad-field", "rates from 0 to 1"),
        (edited(spec_decode_accepted_tokens=10**9), "judge:inconsistent", "its counts give"),
    ],
)  # fmt: skip
def test_a_file_without_spec_decode_fields_or_a_hostile_one_is_refused_with_its_reason(data, code, said):
    with pytest.raises(vllm_results.Refused) as refused:
        vllm_results.read(data, name="result.json")
    assert refused.value.code == code and said in refused.value.message


# --- Out: a certified level as vLLM's own result file -----------------------------------------------------------------


def vllm_result_fields() -> tuple[set[str], re.Pattern[str]]:
    """The keys `vllm bench serve` writes, read from the installed vLLM's vllm/benchmarks/serve.py without importing
    it: string keys assigned into its result dicts, the keys of its result literals, and the percentile metrics its
    process_one_metric names (mean_/median_/std_/p<q>_<metric>_ms) for the metrics it is called with."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("vLLM is not installed here")
    tree = ast.parse((Path(spec.submodule_search_locations[0]) / "benchmarks" / "serve.py").read_text())
    keys: set[str] = set()
    metrics: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            target = node.targets[0]
            named = isinstance(target.value, ast.Name) and target.value.id in ("result", "result_json")
            if named and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
                keys.add(target.slice.value)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            if any(isinstance(t, ast.Name) and t.id == "result" for t in node.targets):
                keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "process_one_metric" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                metrics.add(first.value)
    assert set(vllm_results.SPEC_DECODE_FIELDS) <= keys and {"ttft", "e2el"} <= metrics, "vLLM's serve.py moved on"
    pattern = re.compile(rf"(?:mean|median|std|p\d+(?:\.\d+)?)_(?:{'|'.join(sorted(metrics))})_ms")
    return keys, pattern


def certified_document() -> dict[str, Any]:
    counts = {"drafts": 600, "draft_tokens": 2400, "accepted": 1440, "accepted_per_position": [480, 390, 330, 240]}
    acceptance = {"mean_acceptance_length": 3.4, "acceptance_rate": 0.6, "per_position": [0.8, 0.65, 0.55, 0.4],
                  "counts": counts, "mean_acceptance_length_interval": [3.3, 3.5]}  # fmt: skip
    latency = {name: {"p50": 10.0, "p90": 12.0, "p95": 13.0, "p99": 15.0} for name in ("ttft", "tpot", "itl", "e2e")}
    level = {"speedup": 1.5, "speedup_interval": [1.4, 1.6], "block_ratios": [1.5] * 6, "requests_per_block": 8,
             "baseline": {"tokens_per_second": 100.0, "requests_per_second": 1.0, "latency_ms": latency},
             "speculative": {"tokens_per_second": 150.0, "requests_per_second": 1.5, "latency_ms": latency}}  # fmt: skip
    return {"schema_version": 3, "stages": {"speculative": {"acceptance": acceptance},
                                            "throughput": {"levels": {"4": level}}}}  # fmt: skip


def test_a_certified_level_is_written_in_vllms_own_field_names_and_reads_back_as_the_certified_acceptance():
    keys, percentile = vllm_result_fields()
    written = vllm_results.level_file(certified_document(), 4, model_id="toy-org/verifier", label="c=4", date="20261205-101500")  # type: ignore[arg-type]
    assert [key for key in written if key not in keys and not percentile.fullmatch(key)] == []
    assert set(vllm_results.SPEC_DECODE_FIELDS) <= set(written) and written["max_concurrency"] == 4
    assert written["completed"] == 48 and written["p99_e2el_ms"] == 15.0 and written["median_ttft_ms"] == 10.0
    assert written["spec_decode_acceptance_rate"] == pytest.approx(60.0)
    back = vllm_results.read(encoded(written), name="level.json")
    assert back.counts.per_position == (480, 390, 330, 240) and back.counts.drafts == 600 and back.max_concurrency == 4
    with pytest.raises(KeyError):
        vllm_results.level_file(certified_document(), 8, model_id="m", label="", date="")  # type: ignore[arg-type]


def test_a_level_whose_client_latency_was_delayed_writes_the_engines_own_as_the_page_shows_it():
    document: Any = certified_document()
    served = document["stages"]["throughput"]["levels"]["4"]["speculative"]
    engine = {"p50": 4.0, "p90": 5.0, "p95": 5.5, "p99": 6.0}
    served["engine_latency_ms"] = {"ttft": engine, "itl": engine}
    served["delayed"] = ["ttft"]  # the itl agreed, so the client's is the one to read
    written = vllm_results.level_file(document, 4, model_id="m", label="c=4", date="")
    assert (written["p50_ttft_ms"], written["median_ttft_ms"], written["p99_ttft_ms"]) == (4.0, 4.0, 6.0)
    assert written["p50_itl_ms"] == 10.0 and written["p50_tpot_ms"] == 10.0
    assert "ttft are the engine's own" in written["label"] and "itl" not in written["label"].split("c=4")[1]
