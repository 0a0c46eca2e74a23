"""The reference engine: plain PyTorch speculative decoding, the independent oracle."""

from __future__ import annotations

import itertools

import pytest

from kernel.errors import UserError
from tests.workers.engines.toy import DRAFT, VERIFIER, draft_model, suite_prompts
from workers import metrics
from workers.engines import load_engine
from workers.engines.base import EngineConfig, Sampling, SpecCounters
from workers.exact import next_token_distributions

pytestmark = pytest.mark.engine  # the reference engine runs on torch, from the cpu extra

GREEDY = Sampling(temperature=0, max_tokens=24)


def started(speculative=None, **extra):
    engine = load_engine("reference")()
    engine.start(EngineConfig(verifier=VERIFIER, speculative_config=speculative, extra=extra))
    return engine


@pytest.fixture(scope="module")
def prompts():
    return suite_prompts()[::3]


@pytest.fixture(scope="module")
def verifier_alone(prompts):
    return [c.token_ids for c in started().generate(prompts, GREEDY)]


def test_greedy_speculation_with_the_trained_draft_reproduces_the_verifier_exactly(prompts, verifier_alone):
    engine = started(draft_model(DRAFT))
    done = engine.generate(prompts, GREEDY)
    assert [c.token_ids for c in done] == verifier_alone
    assert sum((c.counters for c in done if c.counters), SpecCounters()) == engine.counters()  # each prompt its own
    found = metrics.acceptance(engine.counters())
    assert (found["mean_acceptance_length"] or 0.0) > 2.0, found
    rates = found["per_position"]
    assert all(later <= earlier for earlier, later in itertools.pairwise(rates)), rates


def test_the_self_draft_accepts_every_token(prompts, verifier_alone):
    engine = started(draft_model(VERIFIER))
    assert [c.token_ids for c in engine.generate(prompts, GREEDY)] == verifier_alone
    found = metrics.acceptance(engine.counters())
    assert found["acceptance_rate"] == 1.0 and found["mean_acceptance_length"] == 5.0


def first_tokens(rule: str, prefix: list[int], samples: int) -> list[int]:
    engine = started(draft_model(DRAFT), accept_rule=rule)
    done = engine.generate([prefix], Sampling(temperature=1.0, max_tokens=1, n=samples, seed=11))
    return [c.token_ids[0] for c in done]


def test_the_sampling_test_passes_rejection_sampling_and_catches_a_sampler_that_always_accepts():
    """On a code prompt the draft's first-token distribution is far from the verifier's (TV ≈ 0.97),
    so accepting every draft token samples the draft's distribution instead of the verifier's."""
    prefix = suite_prompts()[0]
    (exact,) = next_token_distributions(VERIFIER, [prefix], 1.0)
    fair = metrics.chi_square_test(first_tokens("rejection", prefix, 400), exact)
    biased = metrics.chi_square_test(first_tokens("always", prefix, 400), exact)
    assert fair["p_value"] > 0.01, fair
    assert biased["p_value"] < 1e-4, biased  # 2e-5 is the least the Monte Carlo p-value's 200,000 null draws can say


def test_it_refuses_methods_it_does_not_implement():
    with pytest.raises(UserError) as refused:
        started({"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 4})
    assert refused.value.code == "engine:refused-pair"


def test_it_stops_where_vllm_does_on_the_eos_tokens_of_generation_config_too():
    """Qwen3's toy ends a turn with `<|im_end|>`, listed only in generation_config.json, as Qwen3's is; vLLM stops
    there, and before this the reference ran on to the config's eos and diverged from vLLM on every code prompt."""
    from tests.support.processes import ROOT
    from workers.suites import load_suite, tokenize

    qwen3 = ROOT / "zoo" / "models" / "spechub-toy" / "qwen3-verifier"
    code = [prompt for category, prompt in load_suite("toy-v2").prompts() if category == "code"][:2]
    engine = load_engine("reference")()
    engine.start(EngineConfig(verifier=str(qwen3)))
    try:
        im_end = 1284  # appended to the zoo's BPE with Qwen3's other chat tokens
        assert engine.eos == {2, im_end}  # type: ignore[attr-defined]
        for done in engine.generate(tokenize(qwen3, code), Sampling(temperature=0, max_tokens=64)):
            assert done.token_ids[-1] == im_end and len(done.token_ids) < 64  # measured: 11 tokens, as vLLM gives
    finally:
        engine.stop()
