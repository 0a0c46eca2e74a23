"""An engine over one of the run's two published servers, already started (issue 62 §1).

The offline stages (the verifier alone's greedy outputs; the pair's greedy outputs, counters, sampling probes,
temperatures and thinking modes) take their figures from the servers the throughput stage times, through this
adapter of the engine contract (workers/engines/base.py), instead of starting offline engines of their own.

- One prompt a request: vLLM gives a request its own spec-decode counters only when it carries one sequence
  (`metrics.speculative_decoding`, which the server fills under `--per-request-spec-decode-metrics`). The greedy
  outputs equivalence compares go one request at a time (workers/certification.py), so that batching cannot change
  the arithmetic; counters alone (temperatures, thinking modes) go a category at once, as the offline engine took them.
- Every sampling field is sent: a server otherwise takes the model's generation_config.json defaults, which the
  offline API never did, and the sampling test compares against the verifier's plain distribution.
- No per-request seed: the server is seeded once by `--seed`, as the offline engine was by `LLM(seed=...)`.
- The stage owns the servers while it counts (nothing else sends them requests before the throughput stage), so a
  /metrics delta around a call is that call's.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from kernel.errors import InfraError, UserError
from workers import serving
from workers.engines import load_engine
from workers.engines.base import Completion, Engine, EngineConfig, Sampling, SpecCounters
from workers.workbench import Workbench

REQUEST_TIMEOUT = 600.0  # seconds: one request carries at most the sampling probe's samples


def on_server(bench: Workbench, speculative: bool) -> ServedEngine | None:
    """The published server of that side, where the gate started the throughput stage's servers; else None."""
    if bench.early is None:
        return None
    engine, server = load_engine(bench.spec.engine)(), bench.early.started[serving.SIDES[speculative]]
    facts = {**engine.build_facts(), "served_by": server.command, "env": engine.published_environment(bench.config(speculative))}
    return ServedEngine(server, bench.config(speculative=False).verifier, facts)


class ServedEngine(Engine):
    """The engine contract over a running server: `start` waits for it, `stop` leaves it to the throughput stage."""

    def __init__(self, server: serving.Server, model: str, manifest: dict[str, object]) -> None:
        self.server, self.model, self._manifest = server, model, manifest
        self.name = f"served {server.name}"
        self.client = httpx.Client(timeout=REQUEST_TIMEOUT)  # one connection pool for every call, closed by `stop`

    def start(self, config: EngineConfig) -> None:
        try:
            serving.ready([self.server])
        except serving.Exited as failed:  # the offline engine's contract: a pair vLLM refuses is the pair's fault
            if config.speculative_config and failed.refused_config:
                raise UserError("engine:refused-pair", f"the pair's server refused it: {failed.cause}") from failed
            raise

    def generate(self, prompts: list[list[int]], sampling: Sampling) -> list[Completion]:
        """All prompts at once, as the contract has it: one request each, sent together (the caller sends the greedy
        outputs equivalence compares one prompt a call)."""
        with ThreadPoolExecutor(max(1, len(prompts))) as pool:
            return [done for answer in pool.map(lambda prompt: self._one(prompt, sampling), prompts) for done in answer]

    def _one(self, prompt: list[int], sampling: Sampling) -> list[Completion]:
        body = {"model": self.model, "prompt": prompt, "max_tokens": sampling.max_tokens, "n": sampling.n,
                "temperature": sampling.temperature, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
                "repetition_penalty": 1.0, "return_token_ids": True}  # fmt: skip
        answer = self.client.post(f"{self.server.url}/v1/completions", json=body)
        if answer.status_code != 200:
            raise InfraError("serve:request-failed", f"{self.server.name}: HTTP {answer.status_code}: {answer.text[:500]}")
        found = answer.json()
        own = request_counters((found.get("metrics") or {}).get("speculative_decoding"))
        return [Completion(token_ids=tuple(choice["token_ids"]), counters=own) for choice in found["choices"]]

    def counters(self) -> SpecCounters:
        return serving.served_counters(self.server)

    def manifest(self) -> dict[str, object]:
        return {**self._manifest, "model_runner": serving.model_runner(self.server)}

    def stop(self) -> None:
        """Close this side's connections; the server itself the throughput stage times next, and stops."""
        self.client.close()


def request_counters(metrics: dict[str, Any] | None) -> SpecCounters | None:
    """One request's counters from the server's per-request histogram: `acceptance_histogram[j]` verify steps accepted
    j draft tokens."""
    if not metrics or not metrics.get("acceptance_histogram"):
        return None
    return SpecCounters.from_histogram([int(n) for n in metrics["acceptance_histogram"]], int(metrics["num_draft_tokens"]))
