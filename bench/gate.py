"""Benchmark: the compatibility gate per pair against olah, metadata only (target ≤ 2 s).

Each pair is judged with an empty download cache, as a first submission would
be, through the real huggingface_hub client. Run: `make bench` or
`python -m bench.gate [--repeats N]`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kernel.hub import HubClient
from kernel.repos import HubRepo, gate_check
from zoo import ORG
from zoo.localhub import LocalHub
from zoo.pairs import BROKEN, ZOO_PAIRS

TARGET_SECONDS = 2.0
VERIFIER = f"{ORG}/llama-verifier"


def judge_once(
    endpoint: str, draft: str | None, method: str | None, options: dict[str, object], verifier: str = VERIFIER
) -> tuple[float, bool]:
    """Return (seconds, compatible) for one cold judgement."""
    with tempfile.TemporaryDirectory() as cache:
        client = HubClient(endpoint=endpoint, cache_dir=Path(cache))
        started = time.perf_counter()
        report = gate_check(
            verifier=HubRepo(client, verifier),
            verifier_id=verifier,
            draft=HubRepo(client, f"{ORG}/{draft}") if draft else None,
            method=method,
            options=options,
        )
        return time.perf_counter() - started, report.compatible


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats
    cases: list[tuple[str | None, str | None, dict[str, object], str]] = [
        (p.draft, p.method, p.options, f"{ORG}/{p.verifier}") for p in ZOO_PAIRS
    ] + [(name, None, {}, VERIFIER) for name in BROKEN]
    worst: list[float] = []
    with LocalHub() as hub:
        judge_once(hub.endpoint, "llama-draft-1l", None, {})  # olah's first request warms its caches
        for draft, method, options, verifier in cases:
            timings = [judge_once(hub.endpoint, draft, method, options, verifier) for _ in range(repeats)]
            seconds = [t for t, _ in timings]
            worst.append(max(seconds))
            verdict = "compatible" if timings[0][1] else "refused"
            print(f"{draft or method:34s} {verdict:10s} median {statistics.median(seconds):.2f} s  max {max(seconds):.2f} s")
    figure = max(worst)
    print(
        f"gate per pair, cold cache, {len(cases)} pairs x {repeats}: median {statistics.median(worst):.2f} s, "
        f"worst {figure:.2f} s (target <= {TARGET_SECONDS:.1f} s): {'OK' if figure <= TARGET_SECONDS else 'OVER TARGET'}"
    )
    return 0 if figure <= TARGET_SECONDS else 1


if __name__ == "__main__":
    raise SystemExit(main())
