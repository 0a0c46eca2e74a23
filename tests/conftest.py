from __future__ import annotations

import pytest

from kernel.hub import HubClient
from tests.support.factories import HubModelFactory, PairFactory
from zoo.localhub import LocalHub


@pytest.fixture
def pair(db):
    return PairFactory.create()


@pytest.fixture
def verifier(db):
    return HubModelFactory.create(role="verifier")


@pytest.fixture(scope="session")
def local_hub():
    """olah serving the toy zoo on loopback, for the whole session; HF_ENDPOINT points at it."""
    with LocalHub() as hub, pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_ENDPOINT", hub.endpoint)
        yield hub


@pytest.fixture
def hub_settings(settings, local_hub, tmp_path):
    """Point the registry's Hub reads (the gate, submissions) at olah for one test."""
    settings.SPECHUB_HUB_ENDPOINT = local_hub.endpoint
    settings.SPECHUB_HUB_CACHE = tmp_path / "hub-cache"
    return local_hub


@pytest.fixture
def hub_client(local_hub, tmp_path):
    return HubClient(endpoint=local_hub.endpoint, cache_dir=tmp_path / "hub-cache", backoff=0.05)
