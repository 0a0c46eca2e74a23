"""The gate on the toy zoo, read through olah with huggingface_hub and from the folders on disk."""

from __future__ import annotations

import json

import pytest

from kernel.formats import Report, Severity
from kernel.hub import HubClient
from kernel.repos import HubRepo, LocalRepo, RepoSource, gate_check
from tests.support.processes import ROOT
from zoo import ORG
from zoo.pairs import BROKEN as BROKEN_REPOS
from zoo.pairs import ZOO_PAIRS

ZOO = ROOT / "zoo" / "models" / ORG
VERIFIER = f"{ORG}/llama-verifier"
# Each broken repo, and the error codes of the one rule meant to refuse it.
BROKEN = {
    "broken-tokenizer-shuffled": {"gate:tokenizer-content"},
    "broken-vocab-mismatch": {"gate:tokenizer-vocab-size"},
    "broken-eagle3-hidden": {"gate:geometry-hidden-size"},
    "broken-eagle3-t2d": {"gate:mapping-t2d", "gate:mapping-d2t"},
    "broken-eagle3-local-path": {"gate:verifier-local-path"},
    "broken-custom-code": {"gate:safety-remote-code"},
    "broken-pickle-only": {"gate:safety-no-safetensors"},
    "broken-config-not-json": {"gate:format-config-invalid"},
}


def test_every_broken_repo_in_the_zoo_has_an_expected_judgement():
    assert set(BROKEN) | {"broken-eagle3-no-architectures"} == set(BROKEN_REPOS)


def source(kind: str, name: str, hub_client: HubClient | None) -> RepoSource:
    if kind == "hub":
        assert hub_client is not None
        return HubRepo(hub_client, f"{ORG}/{name}")
    return LocalRepo(ZOO / name, f"{ORG}/{name}")


def check(kind: str, draft: str | None, hub_client: HubClient | None, verifier: str = "llama-verifier", **kwargs) -> Report:
    return gate_check(
        verifier=source(kind, verifier, hub_client),
        verifier_id=f"{ORG}/{verifier}",
        draft=source(kind, draft, hub_client) if draft else None,
        **kwargs,
    )


@pytest.fixture(params=["hub", "local"])
def kind(request):
    return request.param


@pytest.fixture
def client(kind, request):
    return request.getfixturevalue("hub_client") if kind == "hub" else None


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_each_broken_toy_repo_is_refused_by_exactly_the_rule_meant_for_it(kind, client, name):
    report = check(kind, name, client)
    errors = {f.code for f in report.findings if f.severity == Severity.ERROR}
    assert errors == BROKEN[name], [f.as_dict() for f in report.findings]
    assert len({f.rule for f in report.findings if f.severity == Severity.ERROR}) == 1
    assert not report.compatible and report.recipe is None


def test_a_head_with_empty_verifier_architectures_is_warned_about_not_refused(kind, client):
    report = check(kind, "broken-eagle3-no-architectures", client)
    assert report.compatible
    assert [f.code for f in report.findings if f.severity == Severity.WARNING] == ["gate:verifier-architectures-empty"]


@pytest.mark.parametrize("pair", ZOO_PAIRS, ids=lambda p: f"{p.method}-{p.draft}")
def test_the_good_toy_pairs_pass(kind, client, pair):
    report = check(kind, pair.draft, client, pair.verifier, method=pair.method, k=4, options=pair.options)
    assert report.compatible, [f.as_dict() for f in report.findings]
    family = next(f.message for f in report.findings if f.code == "gate:family-named")
    assert family.endswith(f"({json.loads((ZOO / pair.verifier / 'config.json').read_text())['architectures'][0]}).")
    assert not [f for f in report.findings if f.severity == Severity.WARNING]
    assert report.recipe is not None and report.recipe.speculative_config["method"] == pair.method


def test_the_reduced_head_is_judged_from_its_real_t2d_and_d2t_read_by_range_requests(hub_client):
    report = check("hub", "eagle3-head-reduced", hub_client)
    assert report.compatible and report.format.draft_vocab_size == 1024
    meta = hub_client.metadata(f"{ORG}/eagle3-head-reduced", "main")
    read = hub_client.tensors(meta)
    local = LocalRepo(ZOO / "eagle3-head-reduced", "x")
    assert read == local.tensors(local.metadata())
    assert read["t2d"].shape == (2048,) and sum(read["t2d"].values) == 1024
    assert read["d2t"].dtype == "I64" and len(read["d2t"].values) == 1024
    cached = [p.name for p in hub_client.cache_dir.rglob("*") if p.is_file()]
    assert not [name for name in cached if name.endswith(".safetensors")], cached


def test_judging_the_custom_code_repo_never_downloads_its_code(local_hub, hub_client):
    report = check("hub", "broken-custom-code", hub_client)
    assert not report.compatible
    fetched = local_hub.fetched(f"{ORG}/broken-custom-code")
    assert "config.json" in fetched and not [name for name in fetched if name.endswith(".py")], fetched


def test_a_speculator_recipe_pins_both_commits_and_offers_the_short_form(local_hub, hub_client):
    report = check("hub", "eagle3-head", hub_client)
    assert report.recipe is not None
    draft_sha = hub_client.resolve(f"{ORG}/eagle3-head", "main")
    verifier_sha = hub_client.resolve(VERIFIER, "main")
    config = report.recipe.speculative_config
    assert config == {"method": "eagle3", "num_speculative_tokens": 4, "model": f"{ORG}/eagle3-head", "revision": draft_sha}
    conditions = "--dtype float32 --max-model-len 512 --seed 0 --enforce-eager"  # what a default certification measures
    assert report.recipe.serve == (
        f"vllm serve {VERIFIER} --revision {verifier_sha} --speculative-config "
        f"'{json.dumps(config, separators=(',', ':'))}' {conditions}"
    )
    assert report.recipe.serve_short == f"vllm serve {ORG}/eagle3-head --revision {draft_sha} {conditions}"
    other_k = check("hub", "eagle3-head", hub_client, k=3)
    assert other_k.recipe is not None and other_k.recipe.serve_short is None  # the short form would serve k=4


def test_a_symlink_out_of_a_local_folder_is_an_unsafe_file(tmp_path):
    folder = tmp_path / "draft"
    folder.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((ZOO / "llama-draft-1l" / name).read_bytes())
    (tmp_path / "secret").write_text("x")
    (folder / "notes.txt").symlink_to(tmp_path / "secret")
    report = gate_check(
        verifier=LocalRepo(ZOO / "llama-verifier", VERIFIER), verifier_id=VERIFIER, draft=LocalRepo(folder, "org/draft")
    )
    assert {f.code for f in report.errors} == {"gate:safety-unsafe-filename"}
    assert "notes.txt" in report.errors[0].message
