"""The harness's own share of the spread (issue 38 §1): each choice of the speed harness measured on its own.

For each variant, the two servers of a toy certification (the verifier alone and the draft_model pair) start as
the throughput stage starts them; then the verifier alone is timed in blocks at c=1 and c=4, and each block's
tok/s, the blocks' CV and the requests' TTFT p90 are printed. A stalled request (TTFT over 3x the median) is
listed with what each process was doing while it waited: the CPU share of the client, each server's front end
(API server and engine core) and its worker, sampled every 20 ms; and any collection the client's garbage
collector ran in that window. A block under 0.8x the median's tok/s is listed with each process's share over it,
and at c=1 each prompt's median TTFT (a stall that belongs to a prompt comes back in every block).

H1  per variant: c=1 and c=4 block CV and TTFT p90 of the verifier alone (targets: none; the table of docs/measuring.md)
H2  c=1's unit: 6 paired blocks against 3 rounds of request quadruples (with and without a pause before each
    request), each unit's spread, the interval's half-width and the seconds it took (issue 38 §2)

Run: `python -m bench.harness [--variants current,no-pinning,...] [--blocks 8]`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from workers import certification, metrics, quadruples, serving, speed, timing
from workers.__main__ import parse, spec_from
from workers.engines import load_engine
from workers.engines.base import EngineConfig
from workers.workbench import Workbench
from zoo.localhub import LocalHub

DRAFT = "spechub-toy/llama-draft-1l"


@dataclass
class Sampler:
    """Every 20 ms, the CPU seconds each of our processes has used: (time, {role: seconds})."""

    roles: Callable[[], dict[str, list[psutil.Process]]]
    samples: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    collections: list[tuple[float, float, int]] = field(default_factory=list)  # (start, seconds, generation)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._gc_started = 0.0

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.monotonic()
        else:
            self.collections.append((self._gc_started, time.monotonic() - self._gc_started, info["generation"]))

    def _run(self) -> None:
        groups = self.roles()
        while not self._stop.wait(0.02):
            used = {}
            for role, processes in groups.items():
                total = 0.0
                for process in processes:
                    with contextlib.suppress(psutil.Error):
                        times = process.cpu_times()
                        total += times.user + times.system
                used[role] = total
            self.samples.append((time.monotonic(), used))

    @contextlib.contextmanager
    def running(self) -> Iterator[Sampler]:
        thread = threading.Thread(target=self._run, daemon=True)
        gc.callbacks.append(self._gc)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()
            gc.callbacks.remove(self._gc)

    def busy(self, start: float, end: float) -> dict[str, float]:
        """Each role's CPU share (1.0: one core) over [start, end], from the samples around it."""
        before = [s for s in self.samples if s[0] <= start][-1:] or self.samples[:1]
        after = [s for s in self.samples if s[0] >= end][:1] or self.samples[-1:]
        (t0, a), (t1, b) = before[0], after[0]
        return {role: (b[role] - a.get(role, 0.0)) / max(t1 - t0, 1e-3) for role in b}

    def collected(self, start: float, end: float) -> list[tuple[float, int]]:
        return [(seconds, generation) for at, seconds, generation in self.collections if start <= at <= end]


def roles(running: dict[str, serving.Server]) -> Callable[[], dict[str, list[psutil.Process]]]:
    def grouped() -> dict[str, list[psutil.Process]]:
        found: dict[str, list[psutil.Process]] = {"client": [psutil.Process()]}
        for name, server in running.items():
            root = psutil.Process(server.process.pid)
            for process in [root, *root.children(recursive=True)]:
                kind = "worker" if process.name().startswith("VLLM::Worker") else (
                    "core" if "EngineCore" in process.name() else "api")  # fmt: skip
                found.setdefault(f"{name}.{kind}", []).append(process)
        return found

    return grouped


# Issue 38 §3's candidate: above c=1 a block lasts about this long on the verifier alone, not a count of requests.
BLOCK_SECONDS = 4.0


def timed_prompts(bench: Workbench, pair: Mapping[str, serving.Server], model: str, concurrency: int) -> list[list[int]]:
    """The level's prompts, continued in sweep order until a block of them lasts about BLOCK_SECONDS on the verifier
    alone, a multiple of `concurrency`; one untimed block of the level's own prompts says how long they take, and
    warms the level's batch shapes on that server."""
    plan, base = bench.spec.plan, speed.level_prompts(bench, concurrency)
    timing.wait_quiet(pair)
    own = [bench.prompts[i] for i in base]
    probe = timing.run_block(pair["baseline"], model, own, plan.output_tokens, concurrency=concurrency)
    count = max(len(base), math.ceil(len(base) * BLOCK_SECONDS / probe.seconds))
    count += -count % concurrency
    order = speed.sweep_order(bench)
    return [bench.prompts[order[i % len(order)]] for i in range(count)]


@dataclass
class Figures:
    variant: str
    concurrency: int
    tok_s: list[float]
    ttft_ms: list[float]
    stalls: list[str]
    shares: list[dict[str, float]] = field(default_factory=list)  # each block's CPU share by role
    by_length: dict[int, list[float]] = field(default_factory=dict)  # c=1: prompt length -> its TTFTs (ms)

    @property
    def cv(self) -> float:
        return statistics.stdev(self.tok_s) / statistics.fmean(self.tok_s)

    @property
    def ttft_p90(self) -> float:
        return statistics.quantiles(self.ttft_ms, n=10)[-1]


def time_blocks(
    variant: str, bench: Workbench, running: dict[str, serving.Server], concurrency: int, blocks: int, sampler: Sampler,
    *, gc_off: bool,
) -> Figures:  # fmt: skip
    model = bench.config(speculative=False).verifier
    prompts = [bench.prompts[i] for i in speed.level_prompts(bench, concurrency)]
    if variant == "timed-blocks" and concurrency > 1:
        prompts = timed_prompts(bench, running, model, concurrency)
    server = running["baseline"]
    figures = Figures(variant, concurrency, [], [], [])
    for _ in range(blocks):
        time.sleep(max(0.0, max(s.finished_at for s in running.values()) + timing.QUIET_BEFORE_BLOCK - time.monotonic()))
        began = time.monotonic()
        if gc_off:
            gc.disable()
        try:
            block = timing.run_block(server, model, prompts, bench.spec.plan.output_tokens, concurrency=concurrency)
        finally:
            gc.enable()
        figures.tok_s.append(block.tokens_per_second)
        figures.shares.append(sampler.busy(began, time.monotonic()))
        figures.ttft_ms += [t * 1000 for t in block.ttft]
        for prompt, ttft in zip(prompts, block.ttft, strict=False):
            figures.by_length.setdefault(len(prompt), []).append(ttft * 1000)
        if concurrency == 1:  # one at a time: each request was sent when the one before it ended
            sent = began
            median = statistics.median(block.ttft)
            for ttft, e2e in zip(block.ttft, block.e2e, strict=True):
                if ttft > 3 * median:
                    busy = sampler.busy(sent, sent + ttft)
                    shares = ", ".join(f"{role} {share:.0%}" for role, share in sorted(busy.items()) if share >= 0.05)
                    gcs = sampler.collected(sent - 0.01, sent + ttft)
                    figures.stalls.append(f"TTFT {ttft * 1000:.0f} ms (median {median * 1000:.0f}): {shares}; client gc "
                                          f"{[f'gen{g} {s * 1000:.0f} ms' for s, g in gcs] or 'none'}")  # fmt: skip
                sent += e2e
    return figures


VARIANTS = {
    # name: (what it changes, how)
    "current": "the harness as it is: both servers up, front ends and client kept off the workers' core, 1.1 s quiet",
    "no-pinning": "front ends and client free to run on the workers' core",
    "no-quiet": "no wait for the servers to go idle before a block",
    "alone": "the verifier's server only: the pair's server never started",
    "gc-off": "the client's garbage collector off during each block",
    "gc-frozen": "the client's heap frozen (gc.freeze) before the blocks",
    "nobind": "VLLM_CPU_OMP_THREADS_BIND=nobind: the workers not bound to a core",
    "timed-blocks": f"above c=1, blocks of the requests that last {BLOCK_SECONDS:.0f} s on the verifier alone",
    "split": "each server's worker bound to a core of its own (0 and 1); nothing kept apart",
}


@contextlib.contextmanager
def variant_applied(name: str) -> Iterator[None]:
    saved_pin, saved_quiet = serving._frontends_off_the_engine_cores, timing.QUIET_BEFORE_BLOCK
    saved_env = dict(os.environ)
    try:
        if name in ("no-pinning", "split", "nobind"):
            serving._frontends_off_the_engine_cores = lambda servers: None
        if name == "no-quiet":
            timing.QUIET_BEFORE_BLOCK = 0.0
        if name == "nobind":
            os.environ["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"
        if name == "gc-frozen":
            gc.collect()
            gc.freeze()
        yield
    finally:
        serving._frontends_off_the_engine_cores = saved_pin
        timing.QUIET_BEFORE_BLOCK = saved_quiet
        os.environ.clear()
        os.environ.update(saved_env)
        gc.unfreeze()


def split(name: str, bench: Workbench, configs: dict[str, EngineConfig]) -> serving.Spawned | None:
    """For a "split" variant, each server's worker bound to a core of its own; else None (started as the stage does)."""
    if "split" not in name:
        return None
    engine = load_engine(bench.spec.engine)()
    spawned = serving.Spawned({}, tempfile.TemporaryDirectory(prefix="spechub-probe-"))
    for core, (side, config) in enumerate(configs.items()):
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = str(core)
        spawned.started[side] = serving._start(engine, side, config, Path(spawned.logs.name))
    del os.environ["VLLM_CPU_OMP_THREADS_BIND"]
    return spawned


def measure(name: str, bench: Workbench, blocks: int) -> list[Figures]:
    configs = speed.configs(bench)
    if name == "alone":
        configs = {"baseline": configs["baseline"]}
    engine = load_engine(bench.spec.engine)()
    with variant_applied(name), serving.servers(engine, configs, split(name, bench, configs)) as running:
        model = bench.config(speculative=False).verifier
        for server in running.values():
            timing.run_block(server, model, bench.prompts[:4], 16, concurrency=4)
        sampler = Sampler(roles(running))
        with sampler.running(), timing.LoadMeter() as load:
            figures = [time_blocks(name, bench, running, c, blocks, sampler, gc_off=name == "gc-off") for c in (1, 4)]
        print(f"   {name}: other processes used {load.record()['other_cpu_share']:.1%} of the CPU", flush=True)
    return figures


UNITS = {
    "c1-blocks": "c=1 in 6 paired blocks of 8 requests, as before issue 38",
    "c1-quadruples": "c=1 in 3 rounds of the 8 prompts' A B B A / B A A B quadruples, no pause",
    "c1-quadruples-paused": "the same, with a 1.1 s pause before every request",
    "c1-quadruples-split": "quadruples, no pause, each server's worker bound to a core of its own (0 and 1)",
    "c1-blocks-split": "c=1 in 6 paired blocks, each server's worker bound to a core of its own",
}


def compare_units(name: str, bench: Workbench) -> None:
    """H2: one c=1 measurement by `name`'s unit, on both servers, its figures printed."""
    engine = load_engine(bench.spec.engine)()
    model = bench.config(speculative=False).verifier
    prompts = [bench.prompts[i] for i in speed.level_prompts(bench, 1)]
    saved = serving._frontends_off_the_engine_cores
    if "split" in name:  # no core is free of a worker: nothing to keep apart
        serving._frontends_off_the_engine_cores = lambda servers: None
    with serving.servers(engine, speed.configs(bench), split(name, bench, speed.configs(bench))) as running:
        serving._frontends_off_the_engine_cores = saved
        for server in running.values():
            timing.run_block(server, model, bench.prompts[:4], 16, concurrency=4)
        began = time.monotonic()
        with timing.LoadMeter() as load:
            if name.startswith("c1-blocks"):
                rule: metrics.Stein = metrics.Stein(first=6, most=6, target=0.05)
                figures, _ = timing.precise_level(running, rule, lambda server, pair: timing.run_block(
                    server, model, prompts, bench.spec.plan.output_tokens, concurrency=1), timing.throughput_ratio)  # fmt: skip
                spread = statistics.stdev(math.log(r) for r in figures["block_ratios"])
            else:
                quadruples.PAUSE_BETWEEN_REQUESTS = timing.QUIET_BEFORE_BLOCK if name.endswith("paused") else 0.0
                rule = metrics.PromptStein(first=3 * len(prompts), most=3 * len(prompts), target=0.05, prompts=len(prompts))
                figures, _ = quadruples.precise_level(running, model, prompts, bench.spec.plan.output_tokens, rule)
                spread = rule.spread(figures["block_ratios"])
                quadruples.PAUSE_BETWEEN_REQUESTS = 0.0
        low, high = figures["speedup_interval"]
        print(f"H2 {name}: {len(figures['block_ratios'])} units, log spread {spread:.3f}, speedup {figures['speedup']:.3f} "
              f"[{low:.3f}, {high:.3f}], half-width {figures['stopping']['half_width']:.1%}, "
              f"{time.monotonic() - began:.0f} s; other processes {load.record()['other_cpu_share']:.1%} of the CPU",
              flush=True)  # fmt: skip


@contextlib.contextmanager
def prepared() -> Iterator[Workbench]:
    """The toy certification's workbench, fetched and gated through a local Hub, as the throughput stage gets it."""
    with tempfile.TemporaryDirectory() as scratch, LocalHub() as hub:
        os.environ.update(HF_ENDPOINT=hub.endpoint, SPECHUB_HUB_CACHE=str(Path(scratch) / "hub"),
                          HF_HUB_DISABLE_PROGRESS_BARS="1", VLLM_CPU_KVCACHE_SPACE="1")  # fmt: skip
        spec = spec_from(parse(["certify", "--draft", DRAFT, "--verifier", "spechub-toy/llama-verifier", "--out", "-"]))
        bench = Workbench.for_spec(spec)
        certification.fetch(bench, lambda p: None)
        certification.gate(bench, lambda p: None)
        yield bench


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.harness")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--blocks", type=int, default=8)
    args = parser.parse_args()
    with prepared() as bench:
        rows = []
        for name in args.variants.split(","):
            if name in UNITS:
                print(f"-- {name}: {UNITS[name]}", flush=True)
                compare_units(name, bench)
                continue
            print(f"-- {name}: {VARIANTS[name]}", flush=True)
            for figures in measure(name, bench, args.blocks):
                rows.append(figures)
                print(f"H1 {name} c={figures.concurrency}: block CV {figures.cv:.1%}, TTFT p90 {figures.ttft_p90:.0f} ms, "
                      f"tok/s {', '.join(f'{t:.0f}' for t in figures.tok_s)}", flush=True)  # fmt: skip
                if figures.concurrency == 1:
                    print(
                        "     TTFT median by prompt length: "
                        + ", ".join(f"{n}: {statistics.median(t):.0f} ms" for n, t in sorted(figures.by_length.items())),
                        flush=True,
                    )
                median = statistics.median(figures.tok_s)
                for rate, busy in zip(figures.tok_s, figures.shares, strict=True):
                    if rate < 0.8 * median:
                        shares = ", ".join(f"{role} {share:.0%}" for role, share in sorted(busy.items()) if share >= 0.05)
                        print(f"     slow block {rate:.0f} tok/s (median {median:.0f}): {shares}", flush=True)
                for stall in figures.stalls:
                    print(f"     stall: {stall}", flush=True)
    print("\n| variant | c=1 block CV | c=1 TTFT p90 | c=4 block CV | c=4 TTFT p90 |\n|---|---|---|---|---|")
    for name in dict.fromkeys(f.variant for f in rows):  # H1's table
        one, four = (f for f in rows if f.variant == name)
        print(f"| {name} | {one.cv:.1%} | {one.ttft_p90:.0f} ms | {four.cv:.1%} | {four.ttft_p90:.0f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
