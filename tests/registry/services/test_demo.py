from __future__ import annotations

import pytest

from registry.models import HubModel, Pair
from registry.runs.demo import demo_catalog_load
from tests.support.processes import ROOT

pytestmark = pytest.mark.django_db
ZOO = ROOT / "zoo" / "models"


def test_the_demo_registers_the_zoo_pairs_once_including_ngram_and_the_self_draft():
    pairs = demo_catalog_load(zoo_dir=ZOO)
    again = demo_catalog_load(zoo_dir=ZOO)
    assert [p.pk for p in pairs] == [p.pk for p in again] and Pair.objects.count() == 9
    methods = sorted((p.method, p.draft.repo_id if p.draft else None) for p in pairs)
    assert ("ngram", None) in methods
    assert ("draft_model", "spechub-toy/llama-verifier") in methods


def test_zoo_models_are_pinned_to_the_commits_the_local_hub_serves(local_hub, hub_client):
    demo_catalog_load(zoo_dir=ZOO)
    for model in HubModel.objects.all():
        assert hub_client.resolve(model.repo_id, "main") == model.sha


def test_zoo_models_carry_their_metadata():
    demo_catalog_load(zoo_dir=ZOO)
    verifier = HubModel.objects.get(repo_id="spechub-toy/llama-verifier")
    head = HubModel.objects.get(repo_id="spechub-toy/eagle3-head")
    assert (verifier.architecture, verifier.license, verifier.dtype) == ("LlamaForCausalLM", "apache-2.0", "bfloat16")
    assert 3_000_000 < (verifier.parameter_count or 0) < 6_000_000
    assert head.role == "speculator" and head.tokenizer_hash == verifier.tokenizer_hash


def test_the_demo_lists_one_pair_of_each_family_before_any_second_pair_of_one():
    """The demo certifies in this order (issue 60): a newcomer sees Llama, Qwen3, gpt-oss and Gemma 4 certified early."""
    families = [pair.verifier.family for pair in demo_catalog_load(zoo_dir=ZOO)]
    assert families[:4] == ["llama", "qwen3", "gpt-oss", "gemma4"] and families[4:] == ["gemma4"] + ["llama"] * 4
    heads = HubModel.objects.filter(repo_id__endswith="-eagle3-head").exclude(repo_id="spechub-toy/eagle3-head")
    for head in heads:
        verifier = HubModel.objects.get(repo_id=head.repo_id.replace("-eagle3-head", "-verifier"))
        assert (head.family, head.tokenizer_hash) == (verifier.family, verifier.tokenizer_hash)
    assert {m.architecture for m in HubModel.objects.filter(role="verifier")} == {
        "LlamaForCausalLM", "Qwen3ForCausalLM", "GptOssForCausalLM", "Gemma4ForCausalLM"
    }  # fmt: skip


def test_the_demo_stores_the_gates_passing_judgement_and_recipe_on_every_zoo_pair():
    for pair in demo_catalog_load(zoo_dir=ZOO):
        pair.refresh_from_db()
        assert pair.compatibility["compatible"] is True, pair.compatibility["findings"]
        assert pair.compatibility["method"] == pair.method
        recipe = pair.compatibility["recipe"]
        assert recipe["speculative_config"]["num_speculative_tokens"] == 4
        assert f"--revision {pair.verifier.sha}" in recipe["serve"]
        if pair.draft:
            assert recipe["speculative_config"]["revision"] == pair.draft.sha
        expected_kind = {"draft_model": "causal_lm", "eagle3": "speculators", "ngram": "none", "mtp": "gemma4_assistant"}[
            pair.method
        ]
        assert pair.format_metadata["kind"] == expected_kind
