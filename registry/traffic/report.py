"""A workload's report: each candidate pair's figures at one concurrency, and the recommendation among them."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from kernel import result, stats
from kernel.traffic import KINDS
from kernel.traffic.speed_bench import FIRST_TURN_ONLY
from kernel.traffic.speed_bench import FORMAT as SPEED_BENCH
from registry.charts import TIMES
from registry.models import CertificationRun, Pair, Workload
from registry.runs.selectors import PropertyRow, latest_finished_run, property_rows, run_document
from registry.states import RunState


class AtConcurrency(TypedDict):
    concurrency: int
    speedup: float
    interval: list[float]
    supports: str
    dof: int


class PublicFigures(TypedDict):
    """The same pair's latest figures on the public suite, on the same hardware class."""

    run: CertificationRun
    acceptance: result.Acceptance | None
    speed_c1: result.SpeedAtLevel | None


class AtCategory(TypedDict):
    """Acceptance on one category of the workload (SPEED-Bench's carry over as they are)."""

    category: str
    mean_acceptance_length: float | None
    acceptance_rate: float | None
    prompts: int | None  # prompts with their own counters; None where the engine did not count per request


class Candidate(TypedDict):
    pair: Pair
    run: CertificationRun
    acceptance: result.Acceptance | None
    by_category: list[AtCategory]
    speed: list[result.SpeedAtLevel]
    break_even: tuple[int | None, int | None]
    properties: list[PropertyRow]
    equivalent: bool  # no property failed that is the pair's fault
    at: AtConcurrency | None
    margin: float  # the practical margin its run was judged by: "faster" needs the interval wholly above it
    public: PublicFigures | None
    serve: str | None  # the command measured on this traffic: its batch-size schedule where that was measured better


class Choice(TypedDict):
    """The draft to serve on this traffic (None: serve the verifier alone, or nothing was measured) and why."""

    choice: Candidate | None
    reason: str
    best: NotRequired[Candidate]  # the best measured, when it is not measurably faster


class Report(TypedDict):
    hardware: str | None
    hardware_measured: list[str]  # every class a run on this workload finished on, newest first
    measured_levels: list[int]
    candidates: list[Candidate]  # the fastest at `concurrency` first
    going: list[CertificationRun]
    failed: list[CertificationRun]
    recommendation: Choice | None  # None when nothing ran
    concurrency: int


def workload_report(*, workload: Workload, concurrency: int, hardware: str | None = None) -> Report:
    """The comparison page's data: each candidate's latest finished run on the workload, on one hardware class
    (the newest run's unless asked: a CPU run and an H100 run do not compare), and the recommendation."""
    runs = workload.runs.select_related("pair__draft", "pair__verifier").order_by("-created_at", "-id")
    finished = runs.filter(state=RunState.FINISHED)
    classes = list(dict.fromkeys(finished.values_list("hardware", flat=True)))
    hardware = hardware if hardware in classes else (classes[0] if classes else hardware)
    latest: dict[int, CertificationRun] = {}
    for run in finished.filter(hardware=hardware):
        latest.setdefault(run.pair_id, run)
    candidates = [_candidate(run, concurrency) for run in latest.values()]
    candidates.sort(key=lambda c: -(c["at"]["speedup"] if c["at"] else 0.0))
    measured = sorted({row["concurrency"] for c in candidates for row in c["speed"] if row["interval"]})
    return {
        "hardware": hardware,
        "hardware_measured": classes,
        "measured_levels": measured,
        "candidates": candidates,
        "going": list(
            runs.exclude(state__in=[RunState.FINISHED, RunState.CANCELLED, RunState.FAILED_USER, RunState.FAILED_INFRA])
        ),
        "failed": list(runs.filter(state__in=[RunState.FAILED_USER, RunState.FAILED_INFRA])[:20]),
        "recommendation": recommend(candidates, concurrency),
        "concurrency": concurrency,
    }


def _candidate(run: CertificationRun, concurrency: int) -> Candidate:
    document = run_document(run)
    rows = property_rows(document)
    speed = result.speed_by_level(document)
    return {
        "pair": run.pair,
        "run": run,
        "acceptance": result.acceptance(document),
        "by_category": by_category(document),
        "speed": speed,
        "break_even": result.break_even_bounds(document),
        "properties": rows,
        "equivalent": not any(row["outcome"] == "fail" and row["fault"] == "pair" for row in rows),
        "at": at_concurrency(speed, concurrency),
        "margin": result.margin_of(document),
        "public": _public_figures(run.pair, run.hardware),
        "serve": result.serve_command(document),
    }


def by_category(document: result.ResultDocument | None) -> list[AtCategory]:
    """AL and rate on each category the run measured, in the order the workload's categories are listed."""
    measured = result.workloads(document)
    rows: list[AtCategory] = []
    for category in [kind for kind in KINDS if kind in measured]:
        accepted = measured[category].get("acceptance") or {}
        rows.append({"category": category, "mean_acceptance_length": accepted.get("mean_acceptance_length"),
                     "acceptance_rate": accepted.get("acceptance_rate"), "prompts": accepted.get("prompts")})  # fmt: skip
    return rows


def notes(workload: Workload) -> list[str]:
    """What the report must say of how the upload was read (only the first turn of SPEED-Bench's records is sent)."""
    return [FIRST_TURN_ONLY] if workload.format == SPEED_BENCH else []


def _public_figures(pair: Pair, hardware: str) -> PublicFigures | None:
    """The same pair's figures on the public suite, on the same hardware class, for side-by-side reading."""
    run = latest_finished_run(pair=pair, hardware=hardware)
    document = run_document(run)
    if run is None or document is None:
        return None
    accepted = result.acceptance(document)
    speed = {row["concurrency"]: row for row in result.speed_by_level(document)}
    return {"run": run, "acceptance": accepted, "speed_c1": speed.get(1)}


def at_concurrency(speed: list[result.SpeedAtLevel], concurrency: int) -> AtConcurrency | None:
    """The speedup and interval measured at `concurrency`; None where that level was not measured.

    Nothing is interpolated or extrapolated: a blend of two levels' interval ends is not a confidence
    interval, and the nearest level is not the level asked for.
    """
    row = next((row for row in speed if row["concurrency"] == concurrency and row["interval"]), None)
    if row is None:
        return None
    return {"concurrency": concurrency, "speedup": row["speedup"], "interval": row["interval"], "supports": row["supports"],
            "dof": row["dof"]}  # fmt: skip


def recommend(candidates: list[Candidate], concurrency: int) -> Choice | None:
    """The best draft for this traffic at `concurrency`, with the reason and the uncertainty; None when nothing ran.

    Only drafts whose outputs were not found to differ by their own fault are eligible. The best is picked by its
    point estimate among K eligible drafts, so its interval is widened to hold for all K at once (Bonferroni,
    each at 1 - 0.05/K): with K drafts and no real gain, the plain intervals recommended one up to K times 2.5 % of the
    time. A runner-up whose interval overlaps the best one's is named as a tie.
    """
    if not candidates:
        return None
    measured = [c for c in candidates if c["at"] is not None]
    if not measured:
        return {"choice": None, "reason": f"No draft was measured at concurrency {concurrency}. Pick a measured level."}
    eligible = [c for c in measured if c["equivalent"]]
    if not eligible:
        return {
            "choice": None,
            "reason": "Every candidate changed the verifier's outputs on this traffic; none is safe to deploy.",
        }
    best = max(eligible, key=lambda c: c["at"]["speedup"] if c["at"] else 0.0)
    at = best["at"]
    assert at is not None
    family = stats.widened(at["interval"], at["dof"], len(eligible))
    held = "the interval" if len(eligible) == 1 else f"the interval for {len(eligible)} drafts at once"
    figure = f"{at['speedup']:.2f}{TIMES} [{family[0]:.2f}, {family[1]:.2f}] at concurrency {concurrency} ({held})"
    margin = best["margin"]
    if result.speed_label(family, threshold=margin) != result.FASTER:
        reason = (f"No draft is measurably faster on this traffic: the best, {draft_name(best)}, is {figure}, an "
                  f"interval that does not lie wholly above the practical margin, {margin}{TIMES}. Serve the verifier "
                  "alone.")  # fmt: skip
        return {"choice": None, "best": best, "reason": reason}
    ties = [c for c in eligible if c is not best and c["at"] and c["at"]["interval"][1] >= at["interval"][0]]
    tie = f" It is not measurably faster than {', '.join(draft_name(c) for c in ties)}, whose intervals overlap." if ties else ""
    acceptance = best["acceptance"]
    al = (
        f", acceptance length {acceptance['mean_acceptance_length']:.2f}"
        if acceptance and acceptance["mean_acceptance_length"]
        else ""
    )
    return {"choice": best, "reason": f"{draft_name(best)}: {figure}{al}; {outputs(best)}.{tie}"}


def outputs(candidate: Candidate) -> str:
    """What the equivalence tests said, greedy and sampling apart: 'equal' only where a test showed it."""
    said = {row["title"]: row for row in candidate["properties"]}
    greedy, sampling = said.get("greedy equivalence"), said.get("sampling equivalence")
    greedy_text = "greedy outputs equal to the verifier's" if greedy and greedy["outcome"] == "pass" else (
        f"greedy outputs {greedy['outcome'] if greedy else 'not judged'}")  # fmt: skip
    sampling_text = "sampling keeps its distribution" if sampling and sampling["outcome"] == "pass" else (
        f"sampling {sampling['outcome'] if sampling else 'not judged'}")  # fmt: skip
    return f"{greedy_text}, {sampling_text}"


def draft_name(candidate: Candidate) -> str:
    pair = candidate["pair"]
    return pair.draft.repo_id if pair.draft else pair.method
