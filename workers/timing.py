"""Speed as pairs are served: paired blocks on the two servers, and the figures they give.

The servers (workers/serving.py) are driven with vLLM's own benchmark client, `vllm.benchmarks.serve`. That
client streams every request and times TTFT, ITL and end-to-end latency token by token. It was chosen over
guidellm because it ships with the engine it measures: the same version, no second environment, and the engine's
own reading of its spec-decode counters.

Each pair runs its two blocks back to back, in an order drawn at random (A B or B A), so the two share the machine's
momentary load and their ratio is a speedup with that load cancelled; the interval comes from those paired ratios
(metrics.paired_ratio), and a level stops by Stein's rule (metrics.Stein). No timing is kept from one run to the
next. The order is random, not a fixed A B B A: with load that lingers from block to block (AR(1) noise), a fixed
A B B A makes neighbouring pairs' ratios correlate (+0.125 at rho 0.5), which the interval does not see (coverage 0.937
at CV 3 %); a random order leaves them uncorrelated whatever the noise's memory (0.948-0.950), at the cost of
cancelling a steady drift only on average (docs/measuring.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
import os
import random
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kernel import result, stats
from kernel.errors import InfraError
from workers import engine_latency, metrics, serving
from workers.serving import SIDES, Server

# The other server is stopped (SIGSTOP) while a block runs, and continued after it (issue 51). On CPU both servers'
# workers are bound to the same core, and the front ends and engine cores share the other; an idle server is not
# idle there: vLLM's worker keeps polling its shared-memory queue for a second after its last step (SpinCondition's
# busy_loop_s in vllm/distributed/device_communicators/shm_broadcast.py). Until issue 51 every block waited
# QUIET_BEFORE_BLOCK for that poll to end; stopped, the other server takes no cycle at all, and no wait is needed.
# Measured on the 2-core AMD EPYC host (docs/measuring.md, issue 51): with the engine cores also niced below the
# front ends (serving.py), the verifier alone's c=1 blocks spread 5.8 % against 12-23 % before, and each level took
# a quarter to a half less time. What the servers compute is unchanged: a user's server has its machine to itself,
# which is what stopping the other one gives it.
QUIET_BEFORE_BLOCK = 1.1  # the pause where servers are not stopped (request quadruples, the prefill probe)


@dataclass(frozen=True)
class Block:
    """What one block of requests gave, request by request (in the order they were listed)."""

    seconds: float
    output_tokens: list[int]
    ttft: list[float]
    itl: list[list[float]]
    e2e: list[float]
    client_busy: float = 0.0  # the client's own CPU seconds over the block's wall time: 1.0 is a whole core
    # The engine's own latency histograms over the block (engine_latency.FAMILIES' keys): what it served, stamped by
    # its core, however late the front end delivered the stream.
    engine: Mapping[str, engine_latency.Histogram] = field(default_factory=dict)

    @property
    def tokens_per_second(self) -> float:
        return sum(self.output_tokens) / self.seconds

    @property
    def requests_per_second(self) -> float:
        return len(self.e2e) / self.seconds


def run_block(
    server: Server, model: str, prompts: Sequence[list[int]], output_tokens: int, *, concurrency: int | None,
    arrivals: Sequence[float] | None = None,
) -> Block:  # fmt: skip
    """Send `prompts` through vLLM's benchmark client: at most `concurrency` at a time, or at `arrivals` (s)."""
    from vllm.benchmarks.datasets import SampleRequest
    from vllm.benchmarks.serve import TaskType, benchmark

    times: Sequence[float | None] = arrivals if arrivals is not None else [None] * len(prompts)
    requests = [
        SampleRequest(prompt=prompt, prompt_len=len(prompt), expected_output_len=output_tokens, timestamp=at)
        for prompt, at in zip(prompts, times, strict=True)
    ]
    run = benchmark(
        task_type=TaskType.GENERATION, endpoint_type="vllm", api_url=f"{server.url}/v1/completions", base_url=server.url,
        model_id=model, model_name=model, tokenizer=None, input_requests=requests, logprobs=None,
        request_rate=float("inf"), burstiness=1.0, disable_tqdm=True, num_warmups=0, profile=False,
        selected_percentile_metrics=["e2el"], selected_percentiles=[50.0], ignore_eos=True, goodput_config_dict={},
        max_concurrency=concurrency, lora_modules=None, extra_headers=None, extra_body={"temperature": 0},
        ready_check_timeout_sec=0, self_timed=arrivals is not None,
    )  # fmt: skip
    # The client prints its own summary table; its event loop gets a thread of its own, since the
    # caller may already run one (a test session with Playwright's does).
    stamped = serving.served_histograms(server)
    before = time.process_time()  # every thread of this process: the client's event loop is one of them
    with contextlib.redirect_stdout(io.StringIO()), ThreadPoolExecutor(1) as loop:
        done: dict[str, Any] = loop.submit(asyncio.run, run).result()
    busy = (time.process_time() - before) / done["duration"] if done["duration"] else 0.0
    server.finished_at = time.monotonic()
    failed = [error for error in done["errors"] if error]
    if failed or done["completed"] != len(requests):
        raise InfraError("serve:request-failed", f"{server.name}: {len(failed)} of {len(requests)} failed: {failed[:1]}")
    engine = engine_latency.since(serving.served_histograms(server), stamped)
    return Block(done["duration"], list(done["output_lens"]), done["ttfts"], done["itls"], done["latencies"], busy, engine)


def poisson_arrivals(count: int, rate: float, seed: int) -> list[float]:
    """Arrival times (s) of a Poisson process: the same seed gives A and B the same arrivals."""
    rng = random.Random(seed)  # noqa: S311 - a load pattern, not a secret
    times, now = [], 0.0
    for _ in range(count):
        times.append(now)
        now += rng.expovariate(rate)
    return times


def baseline_first(pair: int) -> bool:
    """A fair coin for each pair's order, from the system's entropy: the order must not follow the machine's noise."""
    return _COIN.random() < 0.5


_COIN = random.SystemRandom()


def paired_blocks(
    servers: Mapping[str, Server], pairs: Iterable[int], run: Callable[[Server, int], Block],
    blocks: dict[str, list[Block]] | None = None, *, first: Callable[[int], bool] = baseline_first,
) -> dict[str, list[Block]]:  # fmt: skip
    """Run the numbered `pairs` of blocks, each pair's two in the order `first(pair)` draws (True: the baseline first),
    onto `blocks`; `run(server, pair)` times one block, with the other server stopped.
    """
    blocks = blocks or {side: [] for side in SIDES}
    for pair in pairs:
        for side in SIDES if first(pair) else tuple(reversed(SIDES)):
            with alone(servers, servers[side]):
                blocks[side].append(run(servers[side], pair))
    return blocks


@contextlib.contextmanager
def alone(servers: Mapping[str, Server], active: Server) -> Iterator[None]:
    """Stop every server but `active` for the time of the block, and continue them after it, whatever happens."""
    others = [server for server in servers.values() if server is not active]
    try:
        for server in others:
            server.pause()
        yield
    finally:
        for server in others:
            server.resume()


def wait_quiet(servers: Mapping[str, Server]) -> None:
    """Sleep until every server has been idle QUIET_BEFORE_BLOCK seconds."""
    last = max(server.finished_at for server in servers.values())
    time.sleep(max(0.0, last + QUIET_BEFORE_BLOCK - time.monotonic()))


# The measuring machine sets the pace when the client (one event loop, so one core at most) is this busy, or when
# a side's requests achieve less than this share of the concurrency asked: more pairs there measure the machine.
# Not the cores' load: vLLM's engine core spins on its message queue, so a client's core reads busy at any load.
CLIENT_SATURATED = 0.9


ACHIEVED_SHARE = 0.8


PROBE_PAIRS = 2  # the pairs that tell: a paced level's figures say nothing, so it costs no more than these


def precise_level(
    servers: Mapping[str, Server], rule: metrics.Stein, run: Callable[[Server, int], Block],
    ratio: Callable[[Block, Block], float], *, asked: int | None = None,
) -> tuple[result.Level, dict[str, list[Block]]]:  # fmt: skip
    """Time a level to its stated precision: Stein's first stage, then the pairs its spread asks for.

    With `asked` (a concurrency above 1), a level where the measuring machine sets the pace stops
    after its first PROBE_PAIRS and says so; it is kept out of verdicts and break-even.
    """
    blocks = paired_blocks(servers, range(PROBE_PAIRS), run)
    if asked is not None and asked > 1 and machine_limited(blocks, asked):
        figures = level(blocks, ratio, rule)
        figures["stopping"]["reason"] = result.MACHINE_LIMITED
        return figures, blocks
    paired_blocks(servers, range(PROBE_PAIRS, rule.first), run, blocks)
    ratios = [ratio(a, b) for a, b in zip(blocks["baseline"], blocks["speculative"], strict=True)]
    paired_blocks(servers, range(rule.first, rule.total(ratios)), run, blocks)
    figures = level(blocks, ratio, rule)
    if asked is not None and asked > 1 and (evidence := paced_by_the_machine(figures)):
        figures["limited_by"] = evidence  # the interval stands as measured; it is kept out of verdicts
    return figures, blocks


def achieved(block: Block) -> float:
    """The concurrency a block's requests achieved: their summed latency over its wall time."""
    return sum(block.e2e) / block.seconds


def machine_limited(blocks: Mapping[str, Sequence[Block]], asked: int) -> bool:
    busy = statistics.median(block.client_busy for side in SIDES for block in blocks[side])
    short = min(statistics.fmean(achieved(block) for block in blocks[side]) for side in SIDES) < ACHIEVED_SHARE * asked
    return busy >= CLIENT_SATURATED or short


# Above c=1, the same prompts at the same concurrency from the same client: where the verifier alone's blocks spread
# wider than the pair's by more than chance allows, and more than SPREAD_FLOOR, what spreads them is not the engine but
# what the verifier alone asks more of the machine: a stream message a token, where the pair sends one a step (issue
# 51: c=4 blocks at 466-1,075 tok/s beside the pair's 1,526-1,628). "More than chance": the two sides' variances of
# log tok/s differ beyond Fisher's F quantile at SPREAD_LEVEL each way. A fixed ratio of 3 between the sides' CVs
# discarded 8.7-11 % of healthy levels at 4 blocks a side (both at CV 8-15 %); this, at most SPREAD_LEVEL twice
# (tests/workers/test_limited_by_error_rates.py). SPREAD_FLOOR keeps two quiet sides from reading uneven.
SPREAD_LEVEL = 0.005


SPREAD_FLOOR = 0.08


NAMES = {"baseline": "verifier alone", "speculative": "pair"}


def paced_by_the_machine(figures: result.Level) -> str:
    """The evidence, from a level's timed blocks, that the measuring machine set its pace; "" where none shows."""
    sides = {"baseline": figures["baseline"], "speculative": figures["speculative"]}
    runs = {side: rates["tokens_per_second_runs"] for side, rates in sides.items()}
    if uneven(runs["baseline"], runs["speculative"]):
        spreads = {side: metrics.coefficient_of_variation(runs[side]) or 0.0 for side in SIDES}
        wide, narrow = sorted(SIDES, key=spreads.__getitem__, reverse=True)
        return (f"the {NAMES[wide]}'s blocks spread {spreads[wide]:.0%} (CV), "
                f"{spreads[wide] / max(spreads[narrow], 1e-9):.1f}x the {NAMES[narrow]}'s {spreads[narrow]:.0%}: the same "
                "prompts and client, so the measuring machine, not the engine, spread them")  # fmt: skip
    late = [NAMES[side] for side, rates in sides.items() if "e2e" in rates.get("delayed", [])]
    if late:
        return (f"the client saw the {' and '.join(late)} requests end later than the engine finished them "
                "(end-to-end beyond the tolerance of vLLM's own histogram): the front end paced them")  # fmt: skip
    return ""


def uneven(baseline: Sequence[float], speculative: Sequence[float]) -> bool:
    """Whether one side's blocks (tok/s) spread wider than the other's, beyond SPREAD_FLOOR and beyond chance."""
    if min(len(baseline), len(speculative)) < 2 or min(*baseline, *speculative) <= 0:
        return False
    (narrow, few), (wide, many) = sorted(
        (statistics.stdev(math.log(x) for x in runs), len(runs)) for runs in (baseline, speculative)
    )
    return wide > SPREAD_FLOOR and wide**2 > stats.f_quantile(1 - SPREAD_LEVEL, many - 1, few - 1) * narrow**2


def rates(blocks: Sequence[Block]) -> result.Rates:
    """One side's figures at one level: mean tok/s over blocks, and percentiles over all its requests."""
    ttft = [t for block in blocks for t in block.ttft]
    e2e = [t for block in blocks for t in block.e2e]
    itl = [t for block in blocks for gaps in block.itl for t in gaps]
    tpot = [
        (latency - first) / (tokens - 1)
        for block in blocks
        for latency, first, tokens in zip(block.e2e, block.ttft, block.output_tokens, strict=True)
        if tokens > 1
    ]
    runs = [block.tokens_per_second for block in blocks]
    figures: result.Rates = {
        "tokens_per_second": statistics.fmean(runs),
        "tokens_per_second_runs": runs,
        "requests_per_second": statistics.fmean(block.requests_per_second for block in blocks),
        "latency_ms": {name: _percentiles(values) for name, values in zip(result.LATENCIES, (ttft, tpot, itl, e2e), strict=True)},
    }
    engine = engine_percentiles(blocks)
    if engine:
        figures["engine_latency_ms"] = engine
        figures["delayed"] = engine_latency.delayed(figures["latency_ms"], engine)
    return figures


def engine_percentiles(blocks: Sequence[Block]) -> dict[str, dict[str, float | None]]:
    """The engine's own percentiles (ms) over `blocks`, from vLLM's histogram deltas; empty where a server had none."""
    summed: dict[str, engine_latency.Histogram] = {}
    for block in blocks:
        for name, histogram in block.engine.items():
            summed[name] = summed.get(name, engine_latency.Histogram()) + histogram
    return {name: engine_latency.percentiles_ms(h, result.PERCENTILES) for name, h in summed.items() if h.count}


def _percentiles(seconds: Sequence[float]) -> dict[str, float | None]:
    milliseconds = [s * 1000 for s in seconds]
    return {f"p{q}": metrics.percentile(milliseconds, q) for q in result.PERCENTILES}


def level(blocks: Mapping[str, Sequence[Block]], ratio: Callable[[Block, Block], float], rule: metrics.Stein) -> result.Level:
    """Both sides' figures and the speedup from the paired ratios `ratio(baseline block, speculative block)`."""
    ratios = [ratio(a, b) for a, b in zip(blocks["baseline"], blocks["speculative"], strict=True)]
    # Short of Stein's first stage (a paced level's probe), the plain t interval of the pairs there are.
    speedup, low, high, half = rule.interval(ratios) if len(ratios) >= rule.first else _plain(ratios)
    return {
        "baseline": rates(blocks["baseline"]),
        "speculative": rates(blocks["speculative"]),
        "speedup": speedup,
        "speedup_interval": [low, high],
        "speedup_cv": metrics.coefficient_of_variation(ratios),
        "block_ratios": ratios,
        "requests_per_block": len(blocks["baseline"][0].e2e),
        "stopping": stopping(rule, len(ratios), half),
        "client_busy": statistics.median(block.client_busy for side in SIDES for block in blocks[side]),
        "achieved_concurrency": {side: statistics.fmean(achieved(block) for block in blocks[side]) for side in SIDES},
    }  # fmt: skip


def stopping(rule: metrics.Stein, pairs: int, half: float) -> result.Stopping:
    figures: result.Stopping = {"first_pairs": rule.first, "most_pairs": rule.most, "target_half_width": rule.target,
                                "half_width": half, "reason": stopped_by(rule, pairs, half)}  # fmt: skip
    if isinstance(rule, metrics.PromptStein):  # units by prompt: the spread's dof are first - prompts
        figures["prompts"] = rule.prompts
    return figures


def stopped_by(rule: metrics.Stein, pairs: int, half: float) -> str:
    """Which limit ended the level: the precision, the most pairs, or Stein's count with a wider spread after it."""
    if half <= rule.target:
        return result.REACHED
    return result.NOT_REACHED if pairs >= rule.most else result.SPREAD_LATER


def _plain(ratios: Sequence[float]) -> tuple[float, float, float, float]:
    centre, low, high = metrics.paired_ratio(ratios)
    return centre, low, high, high / centre - 1


def throughput_ratio(baseline: Block, speculative: Block) -> float:
    return speculative.tokens_per_second / baseline.tokens_per_second


def latency_ratio(baseline: Block, speculative: Block) -> float:
    """At a fixed arrival rate both sides serve the same tokens/s; the gain shows as shorter requests."""
    return statistics.fmean(baseline.e2e) / statistics.fmean(speculative.e2e)


def category_speedups(blocks: Mapping[str, Sequence[Block]], categories: Sequence[str]) -> dict[str, float]:
    """Per category, speculative over baseline tok/s, from single-request blocks listed in `categories` order."""

    def per_category(side: str) -> dict[str, float]:
        tokens: dict[str, float] = {}
        seconds: dict[str, float] = {}
        for block in blocks[side]:
            for category, count, latency in zip(categories, block.output_tokens, block.e2e, strict=True):
                tokens[category] = tokens.get(category, 0) + count
                seconds[category] = seconds.get(category, 0) + latency
        return {category: tokens[category] / seconds[category] for category in tokens}

    base, spec = per_category("baseline"), per_category("speculative")
    return {category: spec[category] / base[category] for category in base}


class LoadMeter:
    """The machine around the timed blocks: load average, and CPU time that other processes used."""

    def __enter__(self) -> LoadMeter:
        self.before = list(os.getloadavg())
        self.busy, self.ours, self.started = _busy_seconds(), _our_seconds(), time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.monotonic() - self.started
        self.other = max(0.0, (_busy_seconds() - self.busy) - (_our_seconds() - self.ours))
        self.after = list(os.getloadavg())

    def record(self) -> result.MachineLoad:
        cores = os.cpu_count() or 1
        return {
            "load_average_before": self.before,
            "load_average_after": self.after,
            "wall_seconds": self.wall,
            "other_cpu_seconds": self.other,
            "other_cpu_share": self.other / (self.wall * cores) if self.wall else 0.0,
            "cpu_count": cores,
        }


def _busy_seconds() -> float:
    import psutil

    times = psutil.cpu_times()
    return float(times.user + times.system + getattr(times, "nice", 0) + getattr(times, "irq", 0)
                 + getattr(times, "softirq", 0) + getattr(times, "steal", 0))  # fmt: skip


def _our_seconds() -> float:
    """CPU seconds of this process and every descendant alive now (the servers and their engines)."""
    import psutil

    total = 0.0
    me = psutil.Process()
    for process in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            used = process.cpu_times()
            total += used.user + used.system
    return total
