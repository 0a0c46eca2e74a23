"""factory_boy factories; pairs go through the service so identity is real."""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from factory.base import Factory
from factory.declarations import Sequence, SubFactory
from factory.django import DjangoModelFactory

from registry.catalog.services import pair_get_or_create
from registry.models import CertificationRun, HubModel, Pair


def client_of(user: User | None) -> Client:
    """A test client signed in as `user`, or anonymous for None."""
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def fake_sha(seed: object) -> str:
    return hashlib.sha1(str(seed).encode()).hexdigest()  # noqa: S324 - a fake commit id, not security


class HubModelFactory(DjangoModelFactory[HubModel]):
    class Meta:
        model = HubModel

    repo_id = Sequence(lambda n: f"toy-org/model-{n}")
    sha = Sequence(fake_sha)
    role = "draft"


class PairFactory(Factory[Pair]):
    class Meta:
        model = Pair

    verifier = SubFactory(HubModelFactory, role="verifier")
    draft = SubFactory(HubModelFactory, role="draft")
    method = "draft_model"
    num_speculative_tokens = 4

    @classmethod
    def _create(cls, model_class: type[Pair], *args: Any, **kwargs: Any) -> Pair:
        pair, _ = pair_get_or_create(**kwargs)
        return pair

    _build = _create


class RunFactory(DjangoModelFactory[CertificationRun]):
    class Meta:
        model = CertificationRun

    pair = SubFactory(PairFactory)
    engine = "vllm"
    hardware = "cpu"
