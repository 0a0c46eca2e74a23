"""On a fresh machine nothing is configured: the test session starts its own real servers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.support.processes import ROOT, process_env

pytestmark = pytest.mark.process

SUBSET = [
    "tests/registry/services/test_runs.py",
    "tests/workers/test_certify_worker.py::test_a_real_worker_certifies_a_queued_run_to_its_final_state",
]


def test_a_session_without_configured_services_starts_and_removes_throwaway_ones():
    env = process_env(drop=("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_BROKER_KEY_PREFIX"))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *SUBSET],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    header = re.search(r"spechub services: (.*); database (\S+); broker (\S+)", result.stdout)
    assert header, result.stdout[:2000]
    origin, database, broker = header.groups()
    assert origin == "throwaway postgres, redis"
    assert database.startswith("postgres://") and broker.startswith("redis://127.0.0.1:")
    assert re.search(r"\d+ passed", result.stdout) and "skipped" not in result.stdout
    socket_dir = Path(unquote(database.split("@", 1)[1].rsplit("/", 1)[0]))
    assert not socket_dir.exists(), "the throwaway Postgres left its data behind"
