"""What `make demo` prints at the end: per pair, figures with their interval, or what was not measured."""

from __future__ import annotations

import pytest

from registry.management.commands.demo import _summary
from tests.registry.test_pair_and_run_pages import result_document
from tests.support.factories import RunFactory

pytestmark = pytest.mark.django_db


def test_the_summary_prints_the_c1_speedup_with_its_interval_and_what_the_interval_supports():
    run = RunFactory.create(state="finished", result=result_document())
    run.pair.mean_acceptance_length = 3.2
    run.pair.verifier.family = "qwen3"
    header, row = _summary([run])[1:]
    assert header.split()[:3] == ["family", "pair", "AL"] and header.rstrip().endswith("verdict")
    assert row.startswith(f"qwen3   {run.pair}") and " 3.20 " in row and "1.40 [1.30, 1.50] faster" in row


def test_a_run_without_serving_says_its_speed_was_not_measured_rather_than_failing():
    document = result_document()
    del document["stages"]["throughput"]
    run = RunFactory.create(state="finished", result=document)
    run.pair.mean_acceptance_length = None
    row = _summary([run])[2]
    assert "speed not measured" in row and " - " in row
