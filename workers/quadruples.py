"""Speed at concurrency 1, paired request by request (issue 38 §2): measured beside c=1's paired blocks by
`python -m bench.harness` (H2), and not the stage's unit on the CPU class, where it lost (docs/measuring.md).

One request at a time, a block adds nothing that a request does not already have, and two blocks a few seconds
apart let the machine drift between them. So the unit here is a quadruple: one prompt sent to the verifier
alone (A) and to the pair (B) back to back, in A B B A or B A A B order (a fair coin each), and the unit's ratio
is B's tok/s over A's, each side's two requests together. Drift between A and B is then a second, and linear
drift within the unit cancels; the coin keeps neighbouring units' ratios uncorrelated (issue 39 §4).

The units visit the level's prompts in rounds; a prompt's own speedup is a fixed effect of the prompt set, and
Stein's rule reads the units' scatter about their own prompt's mean (metrics.PromptStein).

Each request is vLLM's own (`vllm.benchmarks.lib.endpoint_request_func`, what `vllm bench serve` sends for the
`vllm` backend), over one keep-alive session per server.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kernel import result
from kernel.errors import InfraError
from workers import metrics, timing
from workers.serving import SIDES, Server

if TYPE_CHECKING:  # imported where the client opens its sessions: aiohttp comes with the engine
    import aiohttp

T = TypeVar("T")

# A pause before each request (bench/harness.py sets it). The idle server's worker polls for a second after its last
# step; where both servers' workers share a core (the CPU class), a request that follows the other server's runs
# beside that poll: with no pause, c=1's ratios scattered with a log spread of 1.0, and with a pause of
# timing.QUIET_BEFORE_BLOCK, 0.155, at three times the seconds (docs/measuring.md, issue 38 §2).
PAUSE_BETWEEN_REQUESTS = 0.0


ORDERS = {
    True: ("baseline", "speculative", "speculative", "baseline"),
    False: ("speculative", "baseline", "baseline", "speculative"),
}


class Client:
    """vLLM's request function on an event loop of its own thread (the caller may run one already), with one
    keep-alive session per server."""

    def __init__(self, servers: Mapping[str, Server], model: str, output_tokens: int) -> None:
        self.servers, self.model, self.output_tokens = servers, model, output_tokens
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.sessions: dict[str, aiohttp.ClientSession] = {}

    def __enter__(self) -> Client:
        self.thread.start()
        self.sessions = self.run(self._open())
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.run(self._close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def _open(self) -> dict[str, aiohttp.ClientSession]:
        import aiohttp

        return {side: aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) for side in self.servers}

    async def _close(self) -> None:
        for session in self.sessions.values():
            await session.close()

    async def _send(self, side: str, prompt: list[int]) -> Any:
        from vllm.benchmarks.lib.endpoint_request_func import RequestFuncInput, async_request_openai_completions

        server = self.servers[side]
        asked = RequestFuncInput(
            prompt=prompt, api_url=f"{server.url}/v1/completions", prompt_len=len(prompt), output_len=self.output_tokens,
            model=self.model, model_name=self.model, ignore_eos=True, extra_body={"temperature": 0},
        )  # fmt: skip
        done = await async_request_openai_completions(asked, self.sessions[side])
        if not done.success:
            raise InfraError("serve:request-failed", f"{server.name}: {done.error[:500]}")
        return done

    def quadruple(self, prompt: list[int], baseline_first: bool) -> dict[str, timing.Block]:
        """One unit: the prompt to each side twice, in A B B A (baseline first) or B A A B order."""
        before, began = time.process_time(), time.perf_counter()
        done = []
        for side in ORDERS[baseline_first]:
            time.sleep(PAUSE_BETWEEN_REQUESTS)
            done.append((side, self.run(self._send(side, prompt))))
        busy = (time.process_time() - before) / (time.perf_counter() - began)
        return {side: _block([out for named, out in done if named == side], busy) for side in SIDES}


def _block(outputs: Sequence[Any], busy: float) -> timing.Block:
    """One side's two requests of a unit, as a block of two: its seconds are their latencies added."""
    return timing.Block(
        seconds=sum(out.latency for out in outputs), output_tokens=[out.output_tokens for out in outputs],
        ttft=[out.ttft for out in outputs], itl=[list(out.itl) for out in outputs], e2e=[out.latency for out in outputs],
        client_busy=busy,
    )  # fmt: skip


def units(client: Client, prompts: Sequence[list[int]], count: int, blocks: dict[str, list[timing.Block]]) -> None:
    """Add units onto `blocks` until there are `count`, unit i on prompt i modulo the prompts."""
    for index in range(len(blocks["baseline"]), count):
        for side, block in client.quadruple(prompts[index % len(prompts)], timing.baseline_first(index)).items():
            blocks[side].append(block)


def precise_level(
    servers: Mapping[str, Server], model: str, prompts: Sequence[list[int]], output_tokens: int, rule: metrics.PromptStein
) -> tuple[result.Level, dict[str, list[timing.Block]]]:
    """Time c=1 to the rule's precision: its first rounds of units, then the units their spread asks for."""
    blocks: dict[str, list[timing.Block]] = {side: [] for side in SIDES}
    timing.wait_quiet(servers)
    with Client(servers, model, output_tokens) as client:
        units(client, prompts, rule.first, blocks)
        ratios = [timing.throughput_ratio(a, b) for a, b in zip(blocks["baseline"], blocks["speculative"], strict=True)]
        units(client, prompts, rule.total(ratios), blocks)
    for server in servers.values():
        server.finished_at = time.monotonic()
    return timing.level(blocks, timing.throughput_ratio, rule), blocks
