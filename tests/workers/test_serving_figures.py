"""The serving measurement's figures: paired ratios, their interval, block order, latencies (no engine)."""

from __future__ import annotations

import itertools
import math
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from kernel import result
from kernel.formats import Conditions, serve_arguments
from workers import engine_latency, metrics, serving, timing
from workers.engines.base import EngineConfig
from workers.engines.vllm import VllmEngine

STEIN = metrics.Stein(first=3, most=12, target=0.05)


def block(tokens_per_request: int, seconds: float, requests: int = 2, ttft: float = 0.01) -> timing.Block:
    each = seconds / requests
    return timing.Block(
        seconds=seconds,
        output_tokens=[tokens_per_request] * requests,
        ttft=[ttft] * requests,
        itl=[[(each - ttft) / (tokens_per_request - 1)] * (tokens_per_request - 1)] * requests,
        e2e=[each] * requests,
    )


def test_the_paired_interval_is_student_t_on_the_log_ratios_constructed():
    ratios = [1.50, 1.55, 1.45, 1.52, 1.48]
    centre, low, high = metrics.paired_ratio(ratios)
    logs = [math.log(r) for r in ratios]
    half = 2.776 * statistics.stdev(logs) / math.sqrt(5)  # t(0.975, 4 degrees of freedom)
    assert centre == pytest.approx(math.exp(statistics.fmean(logs)))
    assert (low, high) == pytest.approx((centre * math.exp(-half), centre * math.exp(half)))
    assert low < min(ratios) or low < centre < high


def test_noisy_pairs_around_one_give_an_interval_that_straddles_one_constructed():
    _, low, high = metrics.paired_ratio([1.10, 0.92, 1.05, 0.97, 1.02])
    assert low < 1 < high and result.speed_label([low, high]) == result.NO_DIFFERENCE
    with pytest.raises(ValueError, match="two paired ratios"):
        metrics.paired_ratio([1.2])


def test_a_level_pairs_each_baseline_block_with_its_speculative_neighbour_constructed():
    # Load drifts: both sides slow down together over the run, and the paired ratio stays 1.5.
    baseline = [block(128, seconds) for seconds in (1.0, 1.2, 1.4)]
    speculative = [block(128, seconds / 1.5) for seconds in (1.0, 1.2, 1.4)]
    level = timing.level({"baseline": baseline, "speculative": speculative}, timing.throughput_ratio, STEIN)
    assert level["block_ratios"] == pytest.approx([1.5, 1.5, 1.5])
    assert level["speedup"] == pytest.approx(1.5) and level["speedup_interval"] == pytest.approx([1.5, 1.5])
    assert level["requests_per_block"] == 2
    assert level["baseline"]["tokens_per_second_runs"] == pytest.approx([256 / 1.0, 256 / 1.2, 256 / 1.4])
    e2e = level["baseline"]["latency_ms"]["e2e"]
    assert e2e["p50"] == pytest.approx(600.0) and e2e["p99"] == pytest.approx(700.0 - 0.02 * 100, rel=0.01)
    assert set(level["baseline"]["latency_ms"]) == set(result.LATENCIES)
    tpot = level["speculative"]["latency_ms"]["tpot"]["p50"]
    assert tpot == pytest.approx((1.2 / 1.5 / 2 - 0.01) / 127 * 1000)


def test_at_a_fixed_arrival_rate_the_gain_is_read_from_end_to_end_latency_constructed():
    baseline, speculative = block(128, 4.0), block(128, 4.0)
    faster = timing.Block(4.0, [128, 128], [0.01, 0.01], [[0.001] * 127] * 2, [0.5, 0.7])
    assert timing.latency_ratio(baseline, faster) == pytest.approx(2.0 / 0.6)
    assert timing.latency_ratio(baseline, speculative) == pytest.approx(1.0)


def test_each_pair_runs_in_the_order_drawn_each_block_with_the_other_server_stopped():
    """Real processes in sessions of their own, as the servers are: the one not timed is stopped, then continued."""
    servers = {side: serving.Server(side, ["sleep", "60"], 0, subprocess.Popen(["sleep", "60"], start_new_session=True),
                                    Path("/dev/null")) for side in serving.SIDES}  # fmt: skip
    order: list[tuple[str, str]] = []

    def status(server: serving.Server) -> str:
        for _ in range(100):  # a signal lands asynchronously: give it up to a second
            if (found := str(psutil.Process(server.process.pid).status())) == psutil.STATUS_STOPPED:
                break
            time.sleep(0.01)
        return found

    def run(server: serving.Server, repeat: int) -> timing.Block:
        other = next(s for s in servers.values() if s is not server)
        order.append((server.name, status(other)))
        assert psutil.Process(server.process.pid).status() != psutil.STATUS_STOPPED
        return block(128, 1.0)

    try:
        blocks = timing.paired_blocks(servers, range(3), run, first=lambda pair: pair != 1)
        assert order == [(side, psutil.STATUS_STOPPED) for side in
                         ["baseline", "speculative", "speculative", "baseline", "baseline", "speculative"]]  # fmt: skip
        assert {side: len(found) for side, found in blocks.items()} == {"baseline": 3, "speculative": 3}
        assert all(psutil.Process(s.process.pid).status() != psutil.STATUS_STOPPED for s in servers.values())
        with pytest.raises(RuntimeError), timing.alone(servers, servers["baseline"]):
            raise RuntimeError("a block that fails")
        assert psutil.Process(servers["speculative"].process.pid).status() != psutil.STATUS_STOPPED  # continued all the same
    finally:
        for server in servers.values():
            server.stop()
    assert all(server.process.returncode is not None for server in servers.values())


def test_the_order_of_a_pair_is_a_fair_coin_not_a_fixed_pattern():
    draws = [timing.baseline_first(pair) for pair in range(2000)]
    assert 0.45 < sum(draws) / len(draws) < 0.55
    assert draws[0::2] != [True] * 1000  # not A B B A


def quiet_servers() -> dict[str, serving.Server]:
    idle = subprocess.Popen(["true"])
    idle.wait()
    return {side: serving.Server(side, ["true"], 0, idle, Path("/dev/null")) for side in serving.SIDES}


def scripted(ratios: list[float], busy: float = 0.3) -> Callable[[serving.Server, int], timing.Block]:
    """Blocks whose pair `i` has speculative/baseline tok/s `ratios[i]`, at concurrency 2 with the client `busy`."""

    def run(server: serving.Server, pair: int) -> timing.Block:
        seconds = 1.0 if server.name == "baseline" else 1.0 / ratios[pair]
        return timing.Block(seconds, [64, 64], [0.01] * 2, [[0.001]] * 2, [seconds] * 2, client_busy=busy)

    return run


def test_a_level_adds_pairs_until_its_interval_is_as_tight_as_stated_constructed(monkeypatch):
    monkeypatch.setattr(timing, "QUIET_BEFORE_BLOCK", 0.0)
    rule = metrics.Stein(first=4, most=12, target=0.05)
    clean, _ = timing.precise_level(
        quiet_servers(), rule, scripted([1.5, 1.51, 1.49, 1.5] + [9.0] * 8), timing.throughput_ratio, asked=2
    )
    assert len(clean["block_ratios"]) == 4 and clean["stopping"]["reason"] == result.REACHED
    noisy_ratios = [1.5, 1.65, 1.35, 1.55, 1.45, 1.5, 1.6, 1.4, 1.5, 1.52, 1.48, 1.5]
    noisy, blocks = timing.precise_level(quiet_servers(), rule, scripted(noisy_ratios), timing.throughput_ratio, asked=2)
    assert len(noisy["block_ratios"]) == rule.total(noisy_ratios[:4]) > 4 and len(blocks["baseline"]) == len(
        noisy["block_ratios"]
    )
    assert noisy["stopping"]["half_width"] == pytest.approx(rule.interval(noisy["block_ratios"])[3])
    assert noisy["achieved_concurrency"] == pytest.approx({"baseline": 2.0, "speculative": 2.0})


def test_a_level_the_measuring_machine_paces_stops_after_its_probe_and_is_no_label_constructed(monkeypatch):
    monkeypatch.setattr(timing, "QUIET_BEFORE_BLOCK", 0.0)
    rule = metrics.Stein(first=4, most=12, target=0.05)
    wild = [1.5, 3.0, 0.8, 2.2] * 3
    figures, _ = timing.precise_level(quiet_servers(), rule, scripted(wild, busy=0.97), timing.throughput_ratio, asked=8)
    assert len(figures["block_ratios"]) == timing.PROBE_PAIRS == 2 and figures["stopping"]["reason"] == result.MACHINE_LIMITED
    low, high = figures["speedup_interval"]  # the plain t interval of the two pairs there are: t(1) = 12.71
    assert (low, high) == pytest.approx(metrics.paired_ratio(wild[:2])[1:])
    # At c=1 the same client load is not the machine's pace: c=1 is what the verdict reads, and is always measured.
    single, _ = timing.precise_level(quiet_servers(), rule, scripted(wild, busy=0.97), timing.throughput_ratio, asked=1)
    assert single["stopping"]["reason"] == result.NOT_REACHED and len(single["block_ratios"]) == 12
    # Asked for 8 at a time, requests that achieve 2 show the client could not keep them in flight.
    short, _ = timing.precise_level(quiet_servers(), rule, scripted([1.5] * 12), timing.throughput_ratio, asked=8)
    assert short["stopping"]["reason"] == result.MACHINE_LIMITED
    document = {"schema_version": result.SCHEMA_VERSION, "stages": {"throughput": {"levels": {"1": single, "8": figures}}}}
    rows = result.speed_by_level(document)  # type: ignore[arg-type]
    assert [row["supports"] for row in rows] == [result.speed_label(single["speedup_interval"]), result.MACHINE_LIMITED]
    assert rows[0]["supports"] != result.FASTER  # so wild a spread claims no gain
    assert result.break_even_bounds(document) == (None, None)  # type: ignore[arg-type]


def sides_at(baseline: list[float], speculative: list[float]) -> Callable[[serving.Server, int], timing.Block]:
    """Blocks of 4 requests of 32 tokens, all four in flight throughout (c=4), whose pair `i` ran at baseline[i] and
    speculative[i] tok/s."""

    def run(server: serving.Server, pair: int) -> timing.Block:
        seconds = 128 / (baseline if server.name == "baseline" else speculative)[pair]
        return timing.Block(seconds, [32] * 4, [0.01] * 4, [[0.001]] * 4, [seconds] * 4, client_busy=0.05)

    return run


def test_a_level_whose_verifier_alone_blocks_spread_far_wider_than_the_pairs_is_the_machines_constructed(monkeypatch):
    """Issue 51's c=4: the verifier alone's blocks at 466-1,075 tok/s beside the pair's 1,526-1,628."""
    monkeypatch.setattr(timing, "QUIET_BEFORE_BLOCK", 0.0)
    rule = metrics.Stein(first=4, most=6, target=0.10)
    alone, pair = [744.0, 1075, 1049, 1053, 976, 466], [1628.0, 1579, 1612, 1583, 1540, 1526]
    figures, _ = timing.precise_level(quiet_servers(), rule, sides_at(alone, pair), timing.throughput_ratio, asked=4)
    assert "verifier alone's blocks spread 27% (CV)" in figures["limited_by"] and "the pair's 3%" in figures["limited_by"]
    assert figures["stopping"]["reason"] != result.MACHINE_LIMITED  # Stein's own reason stands beside the evidence
    steady, _ = timing.precise_level(quiet_servers(), rule, sides_at([1000.0, 1040, 980, 1010, 990, 1020], pair),
                                     timing.throughput_ratio, asked=4)  # fmt: skip
    assert "limited_by" not in steady  # the control: both sides as steady, the level is the pair's
    single, _ = timing.precise_level(quiet_servers(), rule, sides_at(alone, pair), timing.throughput_ratio, asked=1)
    assert "limited_by" not in single  # c=1 is what the verdict reads: it is always measured, never set aside
    document = {"schema_version": result.SCHEMA_VERSION,
                "stages": {"throughput": {"levels": {"1": steady, "4": figures}}}}  # fmt: skip
    rows = result.speed_by_level(document)  # type: ignore[arg-type]
    assert [row["supports"] for row in rows] == [result.FASTER, result.MACHINE_LIMITED]
    assert rows[1]["limited_by"] == figures["limited_by"] and rows[0]["limited_by"] == ""


def test_poisson_arrivals_repeat_for_a_seed_and_keep_the_rate():
    arrivals = timing.poisson_arrivals(4000, rate=8.0, seed=3)
    assert arrivals == timing.poisson_arrivals(4000, rate=8.0, seed=3) != timing.poisson_arrivals(4000, rate=8.0, seed=4)
    assert arrivals[0] == 0 and all(b >= a for a, b in itertools.pairwise(arrivals))
    assert len(arrivals) / arrivals[-1] == pytest.approx(8.0, rel=0.05)


def test_per_category_speedups_come_from_the_single_request_blocks_constructed():
    categories = ["code", "chat"]
    baseline = [timing.Block(2.0, [128, 128], [0.01] * 2, [[0.001]] * 2, [1.0, 1.0])]
    speculative = [timing.Block(1.25, [128, 128], [0.01] * 2, [[0.001]] * 2, [0.5, 0.75])]
    found = timing.category_speedups({"baseline": baseline, "speculative": speculative}, categories)
    assert found == pytest.approx({"code": 2.0, "chat": 1 / 0.75})


def test_the_server_command_carries_the_published_flags_with_the_snapshots_in_place_of_the_repos():
    config = EngineConfig(verifier="/snap/verifier", speculative_config={"method": "ngram", "num_speculative_tokens": 4})
    command = VllmEngine().server_command(config, 4321)
    published = serve_arguments("org/verifier", "a" * 40, config.speculative_config, Conditions())
    assert command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert command[3:5] == ["--model", "/snap/verifier"]
    # Measurement-only, nothing served: finer latency histograms on /metrics, and each answer's own spec-decode
    # counters for the pair (workers/served.py).
    measuring = [*engine_latency.buckets_flag(), "--per-request-spec-decode-metrics", "summary"]
    assert command[5:-8] == published[3:]  # after `org/verifier --revision <sha>`
    assert command[-8:] == [*measuring, "--host", "127.0.0.1", "--port", "4321"]
    alone = VllmEngine().server_command(EngineConfig(verifier="/snap/verifier"), 4321)
    assert "--per-request-spec-decode-metrics" not in alone  # the verifier alone drafts nothing to count
    assert "--enforce-eager" in published and published[published.index("--dtype") + 1] == "float32"


def test_a_version_2_document_reads_as_offline_with_its_percentiles_in_ms():
    level = {
        "speedup": 1.4, "speedup_interval": [1.2, 1.6], "speedup_cv": 0.05,
        "baseline": {"tokens_per_second": 100.0, "tokens_per_second_runs": [100.0], "ttft_p50": 0.02, "itl_p50": 0.01,
                     "itl_p95": 0.015},
        "speculative": {"tokens_per_second": 140.0, "tokens_per_second_runs": [140.0], "ttft_p50": 0.03, "itl_p50": 0.007,
                        "itl_p95": 0.009},
    }  # fmt: skip
    old = {"schema_version": 2, "stages": {"throughput": {"levels": {"1": level}, "per_category_speedup": {}}}}
    document = result.load(old)
    assert document is not None and document["schema_version"] == result.SCHEMA_VERSION
    measured = result.throughput(document)
    assert measured is not None and measured["mode"] == "offline" and measured["servers"] is None
    rows = {row["metric"]: row for row in result.latency_rows(document)}
    assert set(rows) == {"ttft", "itl"}
    assert rows["ttft"]["baseline"]["p50"] == pytest.approx(20.0) and rows["itl"]["speculative"]["p95"] == pytest.approx(9.0)
    assert result.speed_by_level(document)[0]["pairs"] == 0
    assert result.measurement(document) == {
        "mode": "offline", "recipe": None, "baseline_recipe": None, "output_tokens": None, "request_rate": None,
        "latency_speedup": None, "latency_speedup_interval": [], "counters_agree": None, "load": None,
    }  # fmt: skip
