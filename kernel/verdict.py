"""A pair's verdict: each property judged on its own, each failure attributed, the label derived.

Pure: the worker's verdict stage and the registry (when a run finishes, and again when its
engine build is qualified) call `judge_document` on the same figures, so they cannot disagree.

Properties:
- acceptance: measured or not (a figure, not a pass mark);
- greedy: pass or fail against the verifier alone on the same build (the pair's fault);
- sampling: pass (no rejection, and the power to detect the stated TV); inconclusive (no rejection,
  short of that power); fail (the pair's fault: the build's controls for its method pass);
  not judgeable (the build fails its own control, or has none for the method); not run;
- speed at concurrency 1: faster, no measurable difference or slower, by its interval, as its level row claims it
  (the fixed sequence over the levels: result.level_claims).
The label: failed when the pair fails greedy or sampling; certified when greedy and sampling
pass and it is faster; provisional otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, Unpack, cast

from kernel import diagnosis, result, stats
from kernel import qualification as q
from kernel.spec import Thresholds

PAIR, ENGINE = "pair", "engine"


def judge_document(
    stages: Mapping[str, Any],
    *,
    method: str,
    thresholds: Thresholds,
    qualification: q.Record | None,
    spec: Mapping[str, Any] | None = None,
) -> tuple[str, list[str], result.Properties]:
    """Return the label, its reasons and the per-property verdicts for a run's stages; with the run's `spec`, a low
    acceptance names its likely causes (kernel/diagnosis.py)."""
    equivalence: Mapping[str, Any] = stages.get("equivalence") or {}
    throughput: Mapping[str, Any] = stages.get("throughput") or {}
    levels = throughput.get("levels", {})
    level_1 = levels.get("1")
    # Documents older than intervals (version 1) have a speedup without one: not a measured gain.
    measured = (level_1["speedup"], level_1["speedup_interval"]) if level_1 and level_1.get("speedup_interval") else None
    served = diagnosis.served_by(spec, stages) if spec is not None else None
    properties: result.Properties = {
        "acceptance": acceptance(stages.get("speculative", {}).get("acceptance"), served),
        "greedy": greedy(equivalence.get("greedy") or {}, thresholds),
        "sampling": sampling(equivalence.get("sampling") or [], method, thresholds, qualification),
        "speed": speed(measured, thresholds, claimed=result.level_claims(levels, thresholds.min_speedup).get("1")),
    }
    named = [properties["acceptance"]["reason"]] if properties["acceptance"]["evidence"].get("causes") else []
    return label(properties), [p["reason"] for p in each(properties) if p["outcome"] not in GOOD] + named, properties


GOOD = ("measured", "pass", result.FASTER)


def each(properties: result.Properties) -> list[result.PropertyVerdict]:
    return [properties["acceptance"], properties["greedy"], properties["sampling"], properties["speed"]]


def label(properties: result.Properties) -> str:
    if any(p["outcome"] == "fail" for p in each(properties)):
        return "failed"
    return "certified" if all(p["outcome"] in GOOD for p in each(properties)) else "provisional"


class _Cited(TypedDict):
    """The evidence every sampling verdict cites: the lowest p, the level it was held to, and the qualification."""

    p_value: float
    level: float
    qualification: dict[str, str] | None


def _verdict(outcome: str, reason: str, fault: str | None = None, **evidence: Unpack[result.Evidence]) -> result.PropertyVerdict:
    return {"outcome": outcome, "fault": fault, "reason": reason, "evidence": evidence}


def acceptance(measured: Mapping[str, Any] | None, served: diagnosis.Setup | None = None) -> result.PropertyVerdict:
    """The figure; where it reads near 1 (or almost nothing is accepted), the causes SpecHub checked, named."""
    length, rate = (measured or {}).get("mean_acceptance_length"), (measured or {}).get("acceptance_rate")
    if length is None:
        return _verdict("not-run", "acceptance was not measured")
    shown = f"acceptance length {length:.2f} (vLLM's own counters)"
    if served is None or not diagnosis.is_low(length, rate):
        return _verdict("measured", shown)
    causes = diagnosis.diagnose(length, rate, served)
    return _verdict("measured", f"{shown}; low, likely causes: {diagnosis.causes_text(causes)}", causes=causes)


def greedy(per_category: Mapping[str, Mapping[str, Any]], thresholds: Thresholds) -> result.PropertyVerdict:
    if not per_category:
        return _verdict("not-run", "greedy equivalence was not measured")
    exact = min(v.get("exact_match") or 0.0 for v in per_category.values())
    divergences: list[result.DivergenceIn] = [
        {"category": c, "prompt": d["prompt"], "token": d["token"]}
        for c, v in per_category.items()
        for d in v.get("divergences", [])
    ]
    if exact < thresholds.greedy_exact_match:
        first = ", ".join(f"{d['category']} prompt {d['prompt']} at token {d['token']}" for d in divergences[:3])
        return _verdict("fail", f"greedy output differs from the verifier alone (the pair's fault): exact match "
                        f"{exact:.3f} < {thresholds.greedy_exact_match}; first divergences: {first}",
                        PAIR, exact_match=exact, divergences=divergences)  # fmt: skip
    return _verdict("pass", f"greedy output equals the verifier alone's (exact match {exact:.3f})", exact_match=exact)


def sampling(
    tests: list[Mapping[str, Any]], method: str, thresholds: Thresholds, qualification: q.Record | None
) -> result.PropertyVerdict:
    if not tests:
        return _verdict("not-run", "the sampling test was not run")
    level = thresholds.sampling_alpha / len(tests)  # Bonferroni over the prefixes
    p_value = min(t.get("p_value", 1.0) for t in tests)
    cited: _Cited = {"p_value": p_value, "level": level,
                              "qualification": q.reference(qualification) if qualification else None}  # fmt: skip
    failing = q.failing_controls(qualification, method) if qualification else []
    if failing:
        control = failing[0]
        return _verdict("not-judgeable", f"sampling not judgeable on this engine build (engine control fails: "
                        f"{control['name']}: {control['summary']})", ENGINE, control=control["name"], **cited)  # fmt: skip
    if p_value >= level:
        return _consistent(tests, p_value, level, thresholds, cited)
    over = f"{thresholds.sampling_alpha} over {len(tests)} prefixes"
    rejects = f"the sampling test rejects (p = {p_value:.1e} < {level:.2g}, the level {over})"
    if qualification is None:
        return _verdict("not-judgeable", f"{rejects}, but this engine build has no qualification to tell an "
                        "engine defect from the pair's", None, **cited)  # fmt: skip
    if not q.has_method_control(qualification, method):
        return _verdict("not-judgeable", f"{rejects}, but this engine build has no passing {method} control to tell an "
                        "engine defect from the pair's", None, **cited)  # fmt: skip
    return _verdict("fail", f"{rejects} while the build's {method} controls pass (the pair's fault)", PAIR, **cited)


def _consistent(
    tests: list[Mapping[str, Any]], p_value: float, level: float, thresholds: Thresholds, cited: _Cited
) -> result.PropertyVerdict:
    """No rejection: a pass only when every test could reject, and could detect the stated deviation over its bins
    (within stats.POWER_SLACK)."""
    blind = [t for t in tests if degrees_of_freedom(t) < 1]
    if blind:
        return _verdict("inconclusive", "sampling inconclusive: the test could not reject anything here "
                        f"({_where(blind[0])}all its outcomes fell in one pooled bin, so p = 1 whatever was sampled)",
                        None, detectable_tv=1.0, **cited)  # fmt: skip
    reach = max(detectable_tv(t, level, thresholds.sampling_power) for t in tests)
    said = f"a total variation over the binned outcomes ≥ {thresholds.sampling_tv} with power {thresholds.sampling_power}"
    if reach > thresholds.sampling_tv * stats.POWER_SLACK:
        return _verdict("inconclusive", f"sampling consistent with the verifier's distribution (p = {p_value:.2g}), but "
                        f"its samples detect only TV ≥ {reach:.2f}, not {said}", None, detectable_tv=reach, **cited)  # fmt: skip
    return _verdict("pass", f"sampling pass: no difference found (p = {p_value:.2g}); this test detects, with power "
                    f"{thresholds.sampling_power}, a total variation of {thresholds.sampling_tv} or more over {covered(tests)}",
                    detectable_tv=reach, **cited)  # fmt: skip


def _where(test: Mapping[str, Any]) -> str:
    return f"prefix {test['prefix']}: " if "prefix" in test else ""


def covered(tests: list[Mapping[str, Any]]) -> str:
    """What a pass covers: the bins of the test whose own outcomes hold least of the verifier's mass (tests before
    issue 39 recorded no more than their bins)."""
    if not all("own_mass" in t for t in tests):
        return "the binned outcomes"
    least = min(tests, key=lambda t: float(t["own_mass"]))
    rest = {0: "", 1: ", the rest pooled in one bin"}.get(
        least["bands"], f", the rest in {least['bands']} bands by the verifier's probability of the second token"
    )
    which = " (on the prefix they cover least)" if len(tests) > 1 else ""
    return (f"these {least['bins']} bins{which}: {least['own_outcomes']} two-token outcomes of their own "
            f"({100 * least['own_mass']:.0f} % of the verifier's probability mass){rest}")  # fmt: skip


def degrees_of_freedom(test: Mapping[str, Any]) -> int:
    """The degrees of freedom the test's bins had; documents before issue 39 stated 1 for a single bin."""
    stated = int(test.get("dof", 1))
    return min(stated, int(test["bins"]) - 1) if "bins" in test else stated


def detectable_tv(test: Mapping[str, Any], level: float, power: float) -> float:
    """The test's own figure, when its bins had the degrees of freedom it was computed for; else (documents before the
    joint test stated none) computed from its samples on the bins it used."""
    stated, used = test.get("detectable_tv"), degrees_of_freedom(test)
    if stated is not None and used >= test.get("dof", 1):
        return float(stated)
    return stats.detectable_tv(test.get("samples", 0), used, level, power)


def speed(
    speedup_c1: tuple[float, list[float]] | None, thresholds: Thresholds, *, claimed: str | None = None
) -> result.PropertyVerdict:
    """Speed at concurrency 1, as its row in the level table claims it (`claimed`, result.level_claims): one
    procedure for both, so the verdict never says "slower" beside a row that does not claim it (issue 56)."""
    if speedup_c1 is None:
        return _verdict("not-run", "speedup at concurrency 1 was not measured with an interval")
    point, (low, high) = speedup_c1[0], speedup_c1[1]
    outcome = claimed or result.speed_label([low, high], threshold=thresholds.min_speedup)
    reason = (f"speed at concurrency 1: {outcome} (speedup {point:.2f}, 95 % interval [{low:.2f}, {high:.2f}]; "
              f"a certified gain needs the whole interval above the margin, {thresholds.min_speedup})")  # fmt: skip
    return _verdict(outcome, reason, speedup=point, interval=[low, high])


def rejudge(document: result.ResultDocument, qualification: q.Record | None) -> result.ResultDocument:
    """Return `document` judged again with `qualification` (the figures are untouched, only the verdict changes)."""
    before = result.verdict(document)
    if before is None:
        return document
    level, reasons, properties = judge_document(
        document["stages"],
        method=document["spec"]["method"],
        thresholds=Thresholds(**before["thresholds"]),
        qualification=qualification,
        spec=document["spec"],
    )
    cited = q.reference(qualification) if qualification else None
    judged: result.Verdict = {**before, "verdict": level, "reasons": reasons, "properties": properties, "qualification": cited}
    stages = cast(result.Stages, {**document["stages"], "verdict": judged})
    return {**document, "stages": stages}
