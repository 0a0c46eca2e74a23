"""What `make demo` prints for each pair it certified: figures with their interval, or what was not measured."""

from __future__ import annotations

import pytest

from registry.management.commands.demo import _figures
from tests.registry.test_pair_and_run_pages import result_document
from tests.support.factories import RunFactory

pytestmark = pytest.mark.django_db


def test_the_c1_speedup_is_printed_with_its_interval_and_what_the_interval_supports():
    run = RunFactory.create(state="finished", result=result_document())
    run.pair.mean_acceptance_length = 3.2
    assert _figures(run) == "AL 3.20, speedup at c=1 1.40 [1.30, 1.50] (faster)"


def test_a_run_without_serving_says_its_speed_was_not_measured_rather_than_failing():
    document = result_document()
    del document["stages"]["throughput"]
    run = RunFactory.create(state="finished", result=document)
    run.pair.mean_acceptance_length = None
    assert _figures(run) == "AL not measured, speed not measured"
