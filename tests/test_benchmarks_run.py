"""Every benchmark runs, at a tiny scale (issue 64: `make bench` stopped at bench/workers for two rounds, its
qualification records refused by the registry's typed check, and nothing in the suite noticed).

The figures come only from the full-size runs (`make bench`); these runs assert that each benchmark still reaches its
end and prints its figures. Each is the real command, on the embedded default (a SQLite file of its own) or, where it
needs PostgreSQL, a database of its own on DATABASE_URL's server, and the toy zoo. The benchmarks that start vLLM
engines (certify, qualify, frontend, harness) take minutes at any scale: here they are imported and parse their
options, which catches a module that no longer loads. The log runs here with 300 entries; the listing's smallest
scale (10,000 pairs) is `make bench`'s.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.process


def bench(*command: str, timeout: int = 240, embedded: bool = False) -> str:
    """Run `python -m bench.<command>` as `make bench` does; return what it printed, failing with it where it failed.
    `embedded`: without DATABASE_URL, so that a benchmark that would migrate that database itself takes its own
    temporary SQLite file instead (bench/live.py's setup)."""
    env = {**os.environ, "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    if embedded:
        env.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)  # fmt: skip
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_worker_claim_benchmark_claims_every_run_once_with_a_few_workers():
    printed = bench("bench.workers", "--workers", "4", "--runs", "8", "--seconds", "2", "--poll", "0.5", "--hold", "0.5")
    assert "web tier: gunicorn" in printed and "storm (all at once, back to back):" in printed
    assert "claimed twice: 0 (answers), 0 (runs past attempt 1)" in printed and "CPU over" in printed


def test_the_log_benchmark_appends_and_proves_at_a_few_hundred_entries():
    printed = bench("bench.transparency", "--entries", "300")
    assert "appended through log_append, up to 300 entries" in printed and "T2 inclusion proofs at 300 entries" in printed


@pytest.mark.parametrize(
    ("command", "printed"),
    [
        (("bench.gate", "--repeats", "1"), "gate per pair, cold cache"),
        (("bench.traffic", "--repeats", "1"), "W3 render"),
        (("bench.live", "--repeats", "1"), "deployment page over 7 days"),
        (("bench.hostile", "--repeats", "1"), "of 9 over the target"),
    ],
)
def test_each_registry_benchmark_reaches_its_figures_at_its_smallest(command, printed):
    assert printed in bench(*command, embedded=True)


@pytest.mark.parametrize("module", ["bench.certify", "bench.qualify", "bench.frontend", "bench.harness"])
def test_each_engine_benchmark_loads_and_reads_its_options(module):
    assert "usage:" in bench(module, "--help", timeout=120)
