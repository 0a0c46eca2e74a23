"""pair_judge runs the gate on a pair's pinned commits through the Hub and stores the report."""

from __future__ import annotations

import pytest

from kernel.errors import InfraError
from kernel.hub import HubClient
from registry.catalog.gate import pair_judge
from registry.runs.demo import demo_catalog_load
from tests.services import free_port
from tests.support.processes import ROOT

pytestmark = pytest.mark.django_db


@pytest.fixture
def reduced_pair():
    pairs = demo_catalog_load(zoo_dir=ROOT / "zoo" / "models")
    pair = next(p for p in pairs if p.draft and p.draft.repo_id.endswith("eagle3-head-reduced"))
    pair.compatibility, pair.format_metadata = {}, {}
    pair.save()
    return pair


def test_it_stores_the_judgement_made_at_the_pinned_commits(reduced_pair, hub_client):
    report = pair_judge(pair=reduced_pair, client=hub_client)
    reduced_pair.refresh_from_db()
    assert report.compatible and reduced_pair.compatibility == report.as_dict()
    assert reduced_pair.format_metadata["draft_vocab_size"] == 1024
    assert reduced_pair.compatibility["recipe"]["speculative_config"]["revision"] == reduced_pair.draft.sha


def test_an_unreachable_hub_raises_and_leaves_the_pair_as_it_was(reduced_pair, tmp_path):
    down = HubClient(endpoint=f"http://127.0.0.1:{free_port()}", cache_dir=tmp_path, retries=1)
    with pytest.raises(InfraError) as raised:
        pair_judge(pair=reduced_pair, client=down)
    assert raised.value.code == "hub:unreachable"
    reduced_pair.refresh_from_db()
    assert reduced_pair.compatibility == {} and reduced_pair.format_metadata == {}
