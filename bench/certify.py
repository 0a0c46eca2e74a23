"""Benchmarks P1-P5 for a toy certification on this machine; each prints its figure.

P1  full toy certification wall time (cold baseline cache), engine start shown apart (target ≤ 60 s)
P2  a second draft on the same verifier, against the first (target ≤ 60 %)
P3  the harness's overhead against a bare vLLM script making the same generate calls (target ≤ 5 %)
P4  the speedup's coefficient of variation over the 3 repeats, per concurrency level
P5  peak RSS of the certification, process tree included (target ≤ 4 GiB)

Run: `make bench` or `python -m bench.certify`.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

import psutil

from kernel import result
from kernel.director import Director
from workers import certification
from workers.__main__ import parse, spec_from
from workers.engines.vllm import engine_arguments
from workers.stages import default_stages
from zoo.localhub import LocalHub

GIB = 2**30


class PeakRss:
    """Samples this process and all its children every 0.2 s; keeps the largest total."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(0.2):
            total = 0
            for process in [me, *me.children(recursive=True)]:
                try:
                    total += process.memory_info().rss
                except psutil.Error:
                    continue
            self.peak = max(self.peak, total)


def certify(draft: str) -> tuple[float, result.ResultDocument]:
    spec = spec_from(parse(["certify", "--draft", draft, "--verifier", "spechub-toy/llama-verifier", "--out", "-"]))
    started = time.perf_counter()
    document = Director(default_stages()).run(spec, lambda stage, percent: None)
    return time.perf_counter() - started, document


def bare_vllm(bench: certification.Workbench) -> float:
    """The speculative engine's generate calls, as a plain vLLM script would make them."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    started = time.perf_counter()
    llm = LLM(**engine_arguments(bench.config(speculative=True)))
    greedy = SamplingParams(temperature=0, max_tokens=32)
    for category in dict.fromkeys(bench.categories):
        batch = [p for p, c in zip(bench.prompts, bench.categories, strict=True) if c == category]
        llm.generate([TokensPrompt(prompt_token_ids=p) for p in batch], greedy, use_tqdm=False)
    plan = bench.spec.plan
    for prefix in certification.sampling_prefixes(bench):
        params = SamplingParams(temperature=plan.sampling_temperature, max_tokens=2, n=plan.sampling_samples)
        llm.generate([TokensPrompt(prompt_token_ids=prefix)], params, use_tqdm=False)
    prompts = [bench.prompts[i] for i in certification.sweep_order(bench)]
    for _ in range(plan.repeats):
        for level in plan.concurrency:
            for i in range(0, len(prompts), level):
                llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts[i : i + level]], greedy, use_tqdm=False)
    llm.llm_engine.engine_core.shutdown()
    return time.perf_counter() - started


def harness_vs_bare(draft: str) -> tuple[float, float]:
    spec = spec_from(parse(["certify", "--draft", draft, "--verifier", "spechub-toy/llama-verifier", "--out", "-"]))
    bench = certification.Workbench.for_spec(spec)
    certification.fetch(bench, lambda p: None)
    certification.gate(bench, lambda p: None)
    started = time.perf_counter()
    certification.measure(bench, speculative=True, report=lambda p: None)
    harness = time.perf_counter() - started
    return harness, bare_vllm(bench)


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch, LocalHub() as hub:
        os.environ.update(
            HF_ENDPOINT=hub.endpoint,
            SPECHUB_HUB_CACHE=str(Path(scratch) / "hub"),
            SPECHUB_BASELINE_CACHE=str(Path(scratch) / "baselines"),
            HF_HUB_DISABLE_PROGRESS_BARS="1",
            VLLM_CPU_KVCACHE_SPACE="1",
        )
        with PeakRss() as rss:
            first_seconds, first = certify("spechub-toy/llama-draft-1l")
        second_seconds, second = certify("spechub-toy/eagle3-head")
        harness, bare = harness_vs_bare("spechub-toy/llama-draft-1l")
    report(first_seconds, first, second_seconds, second, harness, bare, rss.peak)
    return 0


def report(
    first_seconds: float,
    first: result.ResultDocument,
    second_seconds: float,
    second: result.ResultDocument,
    harness: float,
    bare: float,
    peak: int,
) -> None:
    starts = result.stage(first, "baseline")["start_seconds"] + result.stage(first, "speculative")["start_seconds"]
    print(
        f"P1 full toy certification (draft_model, cold baseline): {first_seconds:.1f} s wall, "
        f"of which engine starts {starts:.1f} s (enforce_eager, nothing compiled); without them {first_seconds - starts:.1f} s "
        f"(target <= 60 s): {'OK' if first_seconds <= 60 else 'OVER TARGET'}"
    )
    hit = result.stage(second, "baseline")["cache"]["hit"]
    print(
        f"P2 second draft (eagle3 head) on the same verifier: {second_seconds:.1f} s = {second_seconds / first_seconds:.0%} "
        f"of the first (baseline reused: {hit}) (target <= 60 %): "
        f"{'OK' if second_seconds <= 0.6 * first_seconds else 'OVER TARGET'}"
    )
    overhead = harness / bare - 1
    print(
        f"P3 harness {harness:.1f} s vs bare vLLM {bare:.1f} s for the same calls: overhead {overhead:+.1%} "
        f"(target <= 5 %, timing noise here is about 20 %): {'OK' if overhead <= 0.05 else 'OVER TARGET'}"
    )
    for name, document in (("draft_model", first), ("eagle3", second)):
        measured = result.throughput(document)
        levels = measured["levels"] if measured else {}
        cvs = ", ".join(
            f"c={level}: {figures['speedup_cv']:.3f} (speedup {figures['speedup']:.2f})" for level, figures in levels.items()
        )
        print(f"P4 speedup CV over 3 repeats, {name}: {cvs}")
    print(
        f"P5 peak RSS of the first certification, process tree: {peak / GIB:.2f} GiB (target <= 4 GiB): "
        f"{'OK' if peak <= 4 * GIB else 'OVER TARGET'}"
    )
    for name, document in (("draft_model", first), ("eagle3", second)):
        summary, verdict = result.summary(document), result.verdict(document)
        al = summary["mean_acceptance_length"] if summary else None
        print(f"   {name}: AL {al}, verdict {verdict['verdict'] if verdict else None} {verdict['reasons'] if verdict else ''}")


if __name__ == "__main__":
    raise SystemExit(main())
