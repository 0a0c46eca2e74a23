"""Speed as pairs are served: two servers side by side, driven in paired blocks.

The verifier alone (A) and the pair (B) are started at the same time, each with the
command the pair page publishes (the engine's `server_command`), and driven with
vLLM's own benchmark client, `vllm.benchmarks.serve`. That client streams every
request and times TTFT, ITL and end-to-end latency token by token. It was chosen
over guidellm because it ships with the engine it measures: the same version, no
second environment, and the engine's own reading of its spec-decode counters.

Blocks alternate A B B A A B ... at every level, so two neighbouring blocks share
the machine's momentary load and their ratio is a speedup with that load cancelled;
the interval comes from those paired ratios (metrics.paired_ratio). No timing is
kept from one run to the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from kernel import children, result, settings
from kernel.errors import InfraError
from workers import audit, metrics
from workers.engines.base import Engine, EngineConfig, SpecCounters

SIDES = ("baseline", "speculative")
# Every block starts on a quiet machine: 1.1 s after the last block ended, on either server.
# vLLM's worker keeps polling its shared-memory queue for a second after its last step
# (SpinCondition's busy_loop_s in vllm/distributed/device_communicators/shm_broadcast.py),
# and on CPU both servers' workers are bound to the same core; a block started sooner
# shares the machine with the tail of the one before. Measured here: with no pause the
# baseline's c=1 tok/s swung 330-545; pausing only when switching servers, the second of
# two back-to-back blocks on one server ran at a fraction of the first (c=16: 550 against
# 1100 tok/s); with a pause before every block, 3382-3972 over 8 blocks.
QUIET_BEFORE_BLOCK = 1.1
START_TIMEOUT = 900.0  # seconds for both servers: a cold compile on a loaded machine takes minutes
LOG_TAIL = 2000


@dataclass
class Server:
    """One server process, in its own process group so that stopping it stops its engine too."""

    name: str
    command: list[str]
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    finished_at: float = 0.0  # time.monotonic() at the end of its last block

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self) -> str:
        return self.log_text()[-LOG_TAIL:]

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        children.forget(self.process.pid)


@contextlib.contextmanager
def servers(engine: Engine, configs: Mapping[str, EngineConfig]) -> Iterator[dict[str, Server]]:
    """Start one server per config, all at once; wait until every one answers; stop them all on the way out.

    Their logs live as long as they do; an error carries the tail of the log that explains it.
    """
    started: dict[str, Server] = {}
    own_cores = os.sched_getaffinity(0)
    with tempfile.TemporaryDirectory(prefix="spechub-servers-") as logs:
        try:
            for name, config in configs.items():
                started[name] = _start(engine, name, config, Path(logs))
            _wait_ready(list(started.values()))
            _frontends_off_the_engine_cores(list(started.values()))
            yield started
        finally:
            for server in started.values():
                server.stop()
            _pin_threads(os.getpid(), own_cores)


def _start(engine: Engine, name: str, config: EngineConfig, log_dir: Path) -> Server:
    port = _free_port()
    command = engine.server_command(config, port)
    log = log_dir / f"{name}.log"
    audit.record("server", f"{name} {' '.join(config.server_flags)}".strip())
    with log.open("wb") as out:
        process = children.spawn(command, out, settings.child_environment(engine.server_environment(config)))
    return Server(name=name, command=command, port=port, process=process, log=log)


class Exited(InfraError):
    """A server exited while it started; `server` names it, and the message leads with the engine's own reason."""

    def __init__(self, server: Server) -> None:
        cause = engine_error(server.log_text())  # often far above the tail, under the wrappers' tracebacks
        super().__init__(
            "serve:start-failed", f"{server.name} exited ({server.process.returncode}): {cause}\n{server.log_tail()}"
        )
        self.server = server.name


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_ready(waiting: list[Server]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    with httpx.Client(timeout=2) as client:
        while waiting:
            for server in list(waiting):
                if server.process.poll() is not None:
                    raise Exited(server)
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{server.url}/health").status_code == 200:
                        waiting.remove(server)
            if waiting and time.monotonic() > deadline:
                raise InfraError("serve:start-failed", f"{waiting[0].name} not ready after {START_TIMEOUT:.0f} s")
            time.sleep(0.5)


# An exception line, as Python prints it (after vLLM's "(Process pid=N) ERROR ..." prefix, if any), or argparse's.
ERROR_LINE = re.compile(r"\b[A-Z]\w*(Error|Exception): |^\S+: error: |\berror: ")
# vLLM's wrappers around the real failure: they point back at it and name nothing themselves.
WRAPPER = re.compile(r"See root cause above|Failed core proc")


def engine_error(log: str) -> str:
    """Return the engine's own error line from a server's log: the first one that is not a wrapper pointing at it, or
    else the log's last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if ERROR_LINE.search(line) and not WRAPPER.search(line)]
    return (errors[:1] or lines[-1:] or ["the server exited without a message"])[0][:500]


def _frontends_off_the_engine_cores(servers: list[Server]) -> None:
    """Keep this process (the client) and the servers' front ends on the cores vLLM left to them.

    vLLM's CPU backend binds each engine worker to its cores and reserves the rest for the
    front end, but leaves the front-end processes free to run on the worker's core, where
    they preempt it at random. Measured here with one server, baseline tok/s over 8 blocks:
    c=4 664-1753 free, 1345-1705 kept apart; c=16 997-3667 free, 3382-3972 kept apart.
    Where the workers are not bound (GPU builds), nothing changes.
    """
    import psutil

    with contextlib.suppress(psutil.Error):
        processes = [psutil.Process()]  # this one, the client; other children of ours (a web server) stay put
        for server in servers:
            root = psutil.Process(server.process.pid)
            processes += [root, *root.children(recursive=True)]
        workers = [p for p in processes if p.name().startswith("VLLM::Worker")]
        bound = set().union(*(p.cpu_affinity() for p in workers))
        free = sorted(set(range(psutil.cpu_count() or 1)) - bound)
        if not workers or not free:
            return
        for process in processes:
            if process not in workers:
                _pin_threads(process.pid, free)


def _pin_threads(pid: int, cores: Collection[int]) -> None:
    """Set the affinity of every thread of `pid`: Linux keeps one per thread, and a process's is its main thread's."""
    import psutil

    with contextlib.suppress(psutil.Error):
        for thread in psutil.Process(pid).threads():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(thread.id, cores)


# --- the served counters ---------------------------------------------------------------

COUNTER_FAMILIES = {
    "vllm:spec_decode_num_drafts": "drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted",
}
PER_POSITION_FAMILY = "vllm:spec_decode_num_accepted_tokens_per_pos"


def served_counters(server: Server) -> SpecCounters:
    """Read the server's cumulative spec-decode counters from its Prometheus /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    found: dict[str, int] = {}
    per_position: dict[int, int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            if family.name in COUNTER_FAMILIES:
                key = COUNTER_FAMILIES[family.name]
                found[key] = found.get(key, 0) + int(sample.value)
            elif family.name == PER_POSITION_FAMILY:
                position = int(sample.labels.get("position", 0))
                per_position[position] = per_position.get(position, 0) + int(sample.value)
    positions = tuple(per_position.get(i, 0) for i in range(max(per_position, default=-1) + 1))
    return SpecCounters(per_position=positions, **found)


def served_total(server: Server, family: str) -> float:
    """Return a counter family's total on the server's /metrics (summed over its labels)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return sum(s.value for f in text_string_to_metric_families(text) if f.name == family for s in f.samples
               if s.name.endswith("_total"))  # fmt: skip


def complete(server: Server, model: str, prompts: list[list[int]], max_tokens: int) -> None:
    """One greedy completions request carrying `prompts` together, as the offline engine takes a batch."""
    body = {"model": model, "prompt": prompts, "max_tokens": max_tokens, "temperature": 0}
    answer = httpx.post(f"{server.url}/v1/completions", json=body, timeout=600)
    if answer.status_code != 200:
        raise InfraError("serve:request-failed", f"{server.name}: HTTP {answer.status_code}: {answer.text[:500]}")


# --- timed blocks ----------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """What one block of requests gave, request by request (in the order they were listed)."""

    seconds: float
    output_tokens: list[int]
    ttft: list[float]
    itl: list[list[float]]
    e2e: list[float]
    client_busy: float = 0.0  # the client's own CPU seconds over the block's wall time: 1.0 is a whole core

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
    before = time.process_time()  # every thread of this process: the client's event loop is one of them
    with contextlib.redirect_stdout(io.StringIO()), ThreadPoolExecutor(1) as loop:
        done: dict[str, Any] = loop.submit(asyncio.run, run).result()
    busy = (time.process_time() - before) / done["duration"] if done["duration"] else 0.0
    server.finished_at = time.monotonic()
    failed = [error for error in done["errors"] if error]
    if failed or done["completed"] != len(requests):
        raise InfraError("serve:request-failed", f"{server.name}: {len(failed)} of {len(requests)} failed: {failed[:1]}")
    return Block(done["duration"], list(done["output_lens"]), done["ttfts"], done["itls"], done["latencies"], busy)


def poisson_arrivals(count: int, rate: float, seed: int) -> list[float]:
    """Arrival times (s) of a Poisson process: the same seed gives A and B the same arrivals."""
    rng = random.Random(seed)  # noqa: S311 - a load pattern, not a secret
    times, now = [], 0.0
    for _ in range(count):
        times.append(now)
        now += rng.expovariate(rate)
    return times


def paired_blocks(
    servers: Mapping[str, Server], pairs: Iterable[int], run: Callable[[Server, int], Block],
    blocks: dict[str, list[Block]] | None = None,
) -> dict[str, list[Block]]:  # fmt: skip
    """Run the numbered `pairs` of blocks in A B B A order, onto `blocks`; `run(server, pair)` times one block.

    A block starts only once both servers have been idle long enough to stop polling.
    """
    blocks = blocks or {side: [] for side in SIDES}
    for pair in pairs:
        for side in SIDES if pair % 2 == 0 else tuple(reversed(SIDES)):
            last = max(server.finished_at for server in servers.values())
            time.sleep(max(0.0, last + QUIET_BEFORE_BLOCK - time.monotonic()))
            blocks[side].append(run(servers[side], pair))
    return blocks


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
    return level(blocks, ratio, rule), blocks


def achieved(block: Block) -> float:
    """The concurrency a block's requests achieved: their summed latency over its wall time."""
    return sum(block.e2e) / block.seconds


def machine_limited(blocks: Mapping[str, Sequence[Block]], asked: int) -> bool:
    busy = statistics.median(block.client_busy for side in SIDES for block in blocks[side])
    short = min(statistics.fmean(achieved(block) for block in blocks[side]) for side in SIDES) < ACHIEVED_SHARE * asked
    return busy >= CLIENT_SATURATED or short


# --- figures ---------------------------------------------------------------------------


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
    return {
        "tokens_per_second": statistics.fmean(runs),
        "tokens_per_second_runs": runs,
        "requests_per_second": statistics.fmean(block.requests_per_second for block in blocks),
        "latency_ms": {name: _percentiles(values) for name, values in zip(result.LATENCIES, (ttft, tpot, itl, e2e), strict=True)},
    }


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
        "stopping": {"first_pairs": rule.first, "most_pairs": rule.most, "target_half_width": rule.target,
                     "half_width": half, "reason": result.REACHED if half <= rule.target else result.NOT_REACHED},
        "client_busy": statistics.median(block.client_busy for side in SIDES for block in blocks[side]),
        "achieved_concurrency": {side: statistics.fmean(achieved(block) for block in blocks[side]) for side in SIDES},
    }  # fmt: skip


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


# --- the machine's load ----------------------------------------------------------------


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
