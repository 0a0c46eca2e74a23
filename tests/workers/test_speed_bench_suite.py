"""A bundled suite may be SPEED-Bench's records (workers/suites/<name>.jsonl): public, its categories as they are."""

from __future__ import annotations

import shutil
from pathlib import Path

from kernel.traffic.requests import SPEED_BENCH_CATEGORIES
from workers import suites

RECORDS = Path(__file__).parents[1] / "fixtures/speed_bench_qualitative.jsonl"


def test_a_bundled_speed_bench_suite_is_public_with_its_11_categories(tmp_path, monkeypatch):
    shutil.copy(RECORDS, tmp_path / "speed-mini.jsonl")
    monkeypatch.setattr(suites, "SUITES", tmp_path)
    suite = suites.load_suite("speed-mini")
    assert not suite.private and suite.label == "speed-mini-v1"  # its baselines may be cached, as the toy suites' are
    assert suite.pending is not None and suite.pending.format == "speed-bench"
    assert suite.pending.categories == dict.fromkeys(SPEED_BENCH_CATEGORIES, 1)
    assert suite.sha256 == suite.pending.sha256
