from __future__ import annotations

from typing import Any

from kernel.spec import ModelRef, Plan, RunSpec
from workers.reproduce import compare, spec_from_certificate

SPEC = RunSpec(
    run_id=9, attempt=2, verifier=ModelRef("org/verifier", "a" * 40), draft=ModelRef("org/draft", "b" * 40),
    method="draft_model", num_speculative_tokens=4, engine="vllm", hardware="cpu", plan=Plan(concurrency=(1, 4)),
)  # fmt: skip


def document(al: float, exact: float, speedup: float) -> Any:
    acceptance = {"mean_acceptance_length": al, "acceptance_rate": (al - 1) / 4}
    return {
        "stages": {"speculative": {"acceptance": acceptance}, "throughput": {"levels": {"1": {"speedup": speedup}}}},
        "workloads": {"code": {"acceptance": acceptance, "equivalence": {"greedy_exact_match": exact}}},
    }


def certified(al: float = 4.0, exact: float = 1.0, speedup: float = 1.2) -> Any:
    measured = document(al, exact, speedup)
    return {**measured["stages"], "workloads": measured["workloads"]}


def test_the_spec_a_certificate_pins_is_the_spec_that_was_run():
    inputs = {key: value for key, value in SPEC.as_dict().items() if key not in ("run_id", "attempt")}
    rebuilt = spec_from_certificate({"inputs": inputs})  # type: ignore[typeddict-item]  # only the inputs are read
    assert rebuilt == RunSpec(**{**SPEC.__dict__, "run_id": 0, "attempt": 1})


def test_acceptance_within_tolerance_matches_and_speedup_is_only_reported_by_default():
    rows = compare(certified(), document(4.1, 1.0, 0.5), rtol=0.05, speedup_rtol=None)
    assert all(row.matches for row in rows)
    assert any(row.figure == "speedup:concurrency 1" and row.tolerance is None for row in rows)


def test_acceptance_beyond_tolerance_or_a_changed_exact_match_differs():
    differing = {
        row.figure for row in compare(certified(), document(3.5, 0.9, 1.2), rtol=0.05, speedup_rtol=None) if not row.matches
    }
    assert differing == {
        "acceptance:mean_acceptance_length", "acceptance:acceptance_rate", "acceptance:code AL", "exact:code greedy exact match",
    }  # fmt: skip
    judged = compare(certified(), document(4.0, 1.0, 0.9), rtol=0.05, speedup_rtol=0.1)
    assert [row.figure for row in judged if not row.matches] == ["speedup:concurrency 1"]


def test_a_reproduction_starts_servers_only_when_it_judges_speed():
    import io
    from argparse import Namespace

    from workers.__main__ import _stages

    payload: Any = {"inputs": {}}
    err = io.StringIO()
    names = [stage.name for stage in _stages(Namespace(speedup_rtol=None), payload, err)]
    assert names == ["fetch", "gate", "baseline", "speculative", "equivalence", "verdict"]
    assert "--speedup-rtol" in err.getvalue()  # says how to have speed measured too
    assert [stage.name for stage in _stages(Namespace(speedup_rtol=0.1), payload, err)][5:7] == ["throughput", "smoke"]
    assert len(_stages(Namespace(speedup_rtol=None), None, err)) == 8  # `certify` always runs every stage
