from __future__ import annotations

import pytest

from tests.support.factories import HubModelFactory, PairFactory


@pytest.fixture
def pair(db):
    return PairFactory.create()


@pytest.fixture
def verifier(db):
    return HubModelFactory.create(role="verifier")
