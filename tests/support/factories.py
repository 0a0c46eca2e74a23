"""factory_boy factories; pairs go through the service so identity is real."""

from __future__ import annotations

import hashlib
from typing import Any

import factory

from registry.models import CertificationRun, HubModel, Pair
from registry.services.pairs import pair_get_or_create


def fake_sha(seed: object) -> str:
    return hashlib.sha1(str(seed).encode()).hexdigest()  # noqa: S324 - a fake commit id, not security


class HubModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = HubModel

    repo_id = factory.Sequence(lambda n: f"toy-org/model-{n}")
    sha = factory.Sequence(fake_sha)
    role = "draft"


class PairFactory(factory.Factory):
    class Meta:
        model = Pair

    verifier = factory.SubFactory(HubModelFactory, role="verifier")
    draft = factory.SubFactory(HubModelFactory, role="draft")
    method = "draft_model"
    num_speculative_tokens = 4

    @classmethod
    def _create(cls, model_class: type[Pair], *args: Any, **kwargs: Any) -> Pair:
        pair, _ = pair_get_or_create(**kwargs)
        return pair

    _build = _create


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = CertificationRun

    pair = factory.SubFactory(PairFactory)
    engine = "vllm"
    hardware = "cpu"
