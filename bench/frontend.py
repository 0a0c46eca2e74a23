"""Whose latency and whose noise (issue 51 §1): each choice of the speed harness measured on its own, both sides.

For each variant, the two servers of a toy certification (the verifier alone and the draft_model pair) start as the
throughput stage starts them; then c=1, c=2 and c=4 are each timed in paired blocks (a random order per pair, as the
stage does), and for each side it prints the block tok/s and their CV, the client's TTFT p50/p90 and the engine's own
(vLLM's histogram deltas over the same blocks), and the paired interval's half-width, with the CPU share other
processes took.

H3  per variant, per level, per side: block CV; client TTFT p50/p90 against the engine's (docs/measuring.md's table)

Run: `python -m bench.frontend [--variants current,stream-interval,...] [--pairs 6]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import psutil

from bench.harness import prepared
from kernel.errors import InfraError
from workers import engine_latency, metrics, serving, speed, timing
from workers.engines import load_engine
from workers.engines.base import EngineConfig
from workers.workbench import Workbench

VARIANTS = {
    "before": "the harness before issue 51: streamed blocks, front ends and client off the workers' core, 1.1 s quiet",
    "stream-interval": "before, with --stream-interval 8 on both servers: a chunk every 8 tokens",
    "unstreamed": "before, with blocks sent unstreamed (one answer per request); latency only from the engine",
    "priority": "before, with the front ends and the client at nice -10, above the engine cores (needs privilege)",
    "engine-niced": "before, with the engine cores (EngineCore) at nice +10, below the front ends and the client",
    "frozen": "before, with the other server stopped (SIGSTOP) while a block runs, and no quiet wait",
    "frozen-unstreamed": "frozen and unstreamed together",
    "landed": "the harness as it is since issue 51: frozen and engine-niced together",
}


def _frozen(name: str) -> bool:
    return name in ("frozen", "frozen-unstreamed", "landed")


@contextlib.contextmanager
def _quiet_instead(servers: Mapping[str, serving.Server], active: serving.Server) -> Iterator[None]:
    """The harness before issue 51: no server stopped; every block waits until both have stopped polling."""
    timing.wait_quiet(servers)
    yield


@contextlib.contextmanager
def applied(name: str) -> Iterator[None]:
    saved = timing.alone, serving._engine_cores_below_the_front_ends
    try:
        if not _frozen(name):
            timing.alone = _quiet_instead
        if name != "landed" and name != "engine-niced":
            serving._engine_cores_below_the_front_ends = lambda servers: None
        yield
    finally:
        timing.alone, serving._engine_cores_below_the_front_ends = saved


def _configs(name: str, bench: Workbench) -> dict[str, EngineConfig]:
    configs = speed.configs(bench)
    if name == "stream-interval":
        configs = {side: dataclasses.replace(c, server_flags=(*c.server_flags, "--stream-interval", "8"))
                   for side, c in configs.items()}  # fmt: skip
    return configs


def _threads_niced(pids: list[int], value: int) -> None:
    for pid in pids:
        serving._nice_threads(pid, value)


def _front_ends(running: Mapping[str, serving.Server]) -> list[int]:
    pids = [os.getpid()]
    for server in running.values():
        root = psutil.Process(server.process.pid)
        pids += [p.pid for p in [root, *root.children(recursive=True)]
                 if not p.name().startswith("VLLM::Worker") and "EngineCore" not in p.name()]  # fmt: skip
    return pids


def _block(name: str, bench: Workbench, concurrency: int) -> Callable[[serving.Server, int], timing.Block]:
    model = bench.config(speculative=False).verifier
    prompts = [bench.prompts[i] for i in speed.level_prompts(bench, concurrency)]
    tokens = bench.spec.plan.output_tokens

    def run(server: serving.Server, pair: int) -> timing.Block:
        send = run_unstreamed if "unstreamed" in name else timing.run_block
        return send(server, model, prompts, tokens, concurrency=concurrency)

    return run


def run_unstreamed(
    server: serving.Server, model: str, prompts: Sequence[list[int]], output_tokens: int, *, concurrency: int
) -> timing.Block:
    """Send `prompts` unstreamed, at most `concurrency` at a time: one answer per request, so the front end and the
    client do a request's work once, not a token's; its latencies are the engine's (Block.engine), none the client's."""
    stamped = serving.served_histograms(server)
    before = time.process_time()
    with ThreadPoolExecutor(1) as loop:
        seconds, answers = loop.submit(asyncio.run, _unstreamed(server, model, prompts, output_tokens, concurrency)).result()
    busy = (time.process_time() - before) / seconds if seconds else 0.0
    server.finished_at = time.monotonic()
    engine = engine_latency.since(serving.served_histograms(server), stamped)
    return timing.Block(seconds, [tokens for tokens, _ in answers], [], [], [e2e for _, e2e in answers], busy, engine)


async def _unstreamed(
    server: serving.Server, model: str, prompts: Sequence[list[int]], output_tokens: int, concurrency: int
) -> tuple[float, list[tuple[int, float]]]:
    import aiohttp

    gate = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=600)

    async def one(session: aiohttp.ClientSession, prompt: list[int]) -> tuple[int, float]:
        body = {"model": model, "prompt": prompt, "max_tokens": output_tokens, "temperature": 0, "ignore_eos": True}
        async with gate:
            began = time.perf_counter()
            async with session.post(f"{server.url}/v1/completions", json=body) as answer:
                data = await answer.json(content_type=None)
                if answer.status != 200:
                    raise InfraError("serve:request-failed", f"{server.name}: HTTP {answer.status}: {str(data)[:300]}")
            return int(data["usage"]["completion_tokens"]), time.perf_counter() - began

    async with aiohttp.ClientSession(timeout=timeout) as session:
        began = time.perf_counter()
        answers = await asyncio.gather(*(one(session, prompt) for prompt in prompts))
        return time.perf_counter() - began, list(answers)


def _ttft(blocks: list[timing.Block]) -> tuple[str, str]:
    client = [t * 1000 for b in blocks for t in b.ttft]
    engine = engine_latency.Histogram()
    for b in blocks:
        engine = engine + b.engine.get("ttft", engine_latency.Histogram())
    seen = f"{metrics.percentile(client, 50):.0f}/{metrics.percentile(client, 90):.0f}" if client else "-"
    p50, p90 = engine.quantile(0.5), engine.quantile(0.9)
    stamped = f"{p50 * 1000:.0f}/{p90 * 1000:.0f}" if p50 is not None and p90 is not None else "-"
    return seen, stamped


def measure(name: str, bench: Workbench, pairs: int) -> list[str]:
    engine = load_engine(bench.spec.engine)()
    rows = []
    with applied(name), serving.servers(engine, _configs(name, bench)) as running:
        model = bench.config(speculative=False).verifier
        for server in running.values():
            timing.run_block(server, model, bench.prompts[:4], 16, concurrency=4)
        if name == "priority":
            _threads_niced(_front_ends(running), -10)
        for concurrency in (1, 2, 4):
            began = time.monotonic()
            with timing.LoadMeter() as load:
                blocks = timing.paired_blocks(running, range(pairs), _block(name, bench, concurrency))
            rows += _rows(name, concurrency, blocks, load, time.monotonic() - began)
    return rows


def _rows(
    name: str, concurrency: int, blocks: dict[str, list[timing.Block]], load: timing.LoadMeter, seconds: float
) -> list[str]:
    ratios = [b.tokens_per_second / a.tokens_per_second for a, b in zip(blocks["baseline"], blocks["speculative"], strict=True)]
    centre, low, high = metrics.paired_ratio(ratios)
    rows = []
    for side in serving.SIDES:
        rates = [b.tokens_per_second for b in blocks[side]]
        seen, stamped = _ttft(blocks[side])
        cv = statistics.stdev(rates) / statistics.fmean(rates)
        busy = statistics.median(b.client_busy for b in blocks[side])
        rows.append(f"| {name} | c={concurrency} | {side} | {cv:.1%} | {seen} | {stamped} | "
                    f"{', '.join(f'{r:.0f}' for r in rates)} | {centre:.2f} [{low:.2f}, {high:.2f}] ±{(high / centre - 1):.0%} | "
                    f"{busy:.0%} | {load.record()['other_cpu_share']:.1%} | {seconds:.0f} s |")  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.frontend")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--pairs", type=int, default=6)
    args = parser.parse_args()
    header = ("| variant | level | side | block CV | client TTFT p50/p90 ms | engine TTFT p50/p90 ms | tok/s per block | "
              "speedup [95 %] | client busy | other CPU | seconds |\n|---|---|---|---|---|---|---|---|---|---|---|")  # fmt: skip
    rows = []
    with prepared() as bench:
        for name in args.variants.split(","):
            print(f"-- {name}: {VARIANTS[name]}", flush=True)
            rows += measure(name, bench, args.pairs)
    print(header)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
