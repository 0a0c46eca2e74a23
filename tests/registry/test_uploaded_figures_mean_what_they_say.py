"""A self-hosted upload is held to what its figures mean (issue 61 §3): the probe's hostile documents were typed, and
24 of 27 were kept and published. Each here is a whole document (tests/support/documents.py) with one figure made
to say what it cannot, or one required field taken out deep inside: each is a 400 naming the field, and nothing is
kept. The labels the registry can work out from the figures (the engine-latency agreement, the served counters'
agreement) it works out again, whatever the upload said, and the pages show its own."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from registry.fleet.services import upload_finish
from registry.models import CertificationRun, Pair, Worker
from registry.runs.services import run_create
from registry.states import RunState
from tests.support.documents import changed, whole_document
from tests.support.factories import PairFactory, client_of

pytestmark = pytest.mark.django_db
API = "/api/v1/workers"
Document = dict[str, Any]
ACCEPTANCE = ("stages", "speculative", "acceptance")
LEVEL = ("stages", "throughput", "levels", "1")


@pytest.fixture
def uploader(db) -> Callable[[Document], Any]:
    """Send a document as the result of a run a public-approved worker has claimed (k = 4); the answer."""
    owner = User.objects.create_user("team", password="pw")
    token = client_of(owner).post(f"{API}/tokens/", {"labels": ["gpu.h100"]}, content_type="application/json").json()
    body = {"registration_token": token["registration_token"], "name": "box-1", "engine_build": "0.32.0",
            "evidence": {"devices": ["cpu"]}}  # fmt: skip
    registered = Client().post(f"{API}/register/", body, content_type="application/json").json()
    Worker.objects.filter(pk=registered["worker"]).update(public_approved=True)
    worker = Client(headers={"Authorization": f"Worker {registered['credential']}"})
    pair: Pair = PairFactory.create()
    run_create(pair=pair, hardware="gpu.h100")
    claim = worker.post(f"{API}/claim/").json()
    assert claim["spec"]["num_speculative_tokens"] == 4

    def upload(document: Document) -> Any:
        body = {"attempt": claim["attempt"], "document": {**document, "spec": claim["spec"]}}
        return worker.post(f"{API}/runs/{claim['run']}/result/", json.dumps(body), content_type="application/json")

    upload.run_id = claim["run"]  # type: ignore[attr-defined]
    upload.attempt = claim["attempt"]  # type: ignore[attr-defined]
    return upload


def without(document: Document, path: tuple[Any, ...]) -> Document:
    """`document` with the field at `path` taken out."""
    found = copy.deepcopy(document)
    place = found
    for step in path[:-1]:
        place = place[step]
    del place[path[-1]]
    return found


def inverted(p50: float) -> dict[str, float]:
    return {"p50": p50, "p90": p50 / 2, "p95": p50 * 1.1, "p99": p50 * 1.2}


WHOLE = whole_document()
HOSTILE: list[tuple[str, Document, str]] = [
    # Percentiles: never negative, rising with their rank, the client's and the engine's alike.
    ("a negative percentile", changed(WHOLE, (*LEVEL, "baseline", "latency_ms", "ttft", "p50"), -5.0),
     "stages.throughput.levels.1.baseline.latency_ms.ttft.p50 must be 0 or more, not -5.0"),
    ("inverted percentiles", changed(WHOLE, (*LEVEL, "speculative", "latency_ms", "e2e"), inverted(300.0)),
     "stages.throughput.levels.1.speculative.latency_ms.e2e.p90 (150.0) is below "
     "stages.throughput.levels.1.speculative.latency_ms.e2e.p50 (300.0)"),
    ("the engine's percentiles inverted", changed(WHOLE, (*LEVEL, "baseline", "engine_latency_ms", "itl"), inverted(2.0)),
     "stages.throughput.levels.1.baseline.engine_latency_ms.itl.p90 (1.0) is below"),
    ("a negative percentile of the rate point's engine",
     changed(WHOLE, ("stages", "throughput", "rate_point", "speculative", "engine_latency_ms", "tpot", "p99"), -1.0),
     "stages.throughput.rate_point.speculative.engine_latency_ms.tpot.p99 must be 0 or more"),
    # AL from 1 to k + 1, its interval [low, high] holding it.
    ("AL -4", changed(WHOLE, (*ACCEPTANCE, "mean_acceptance_length"), -4.0),
     "stages.speculative.acceptance.mean_acceptance_length must be from 1 to 5"),
    ("AL's interval [5, -5]", changed(WHOLE, (*ACCEPTANCE, "mean_acceptance_length_interval"), [5.0, -5.0]),
     "stages.speculative.acceptance.mean_acceptance_length_interval is an interval, [low, high], but its low end 5.0 is "
     "above its high end -5.0"),
    ("AL past k + 1", changed(WHOLE, ("workloads", "chat", "acceptance", "mean_acceptance_length"), 7.5),
     "workloads.chat.acceptance.mean_acceptance_length must be from 1 to 5 (a step yields its own token and at most "
     "the k = 4 drafted ones), not 7.5"),
    ("AL below 1 at a temperature", changed(WHOLE, (*ACCEPTANCE, "by_temperature", 1, "mean_acceptance_length"), 0.5),
     "stages.speculative.acceptance.by_temperature[1].mean_acceptance_length must be from 1 to 5"),
    ("AL at k = 1 past 2", changed(WHOLE, (*ACCEPTANCE, "by_k", 0, "mean_acceptance_length"), 2.5),
     "stages.speculative.acceptance.by_k[0].mean_acceptance_length must be from 1 to 2"),
    ("an interval that leaves out its AL", changed(WHOLE, (*ACCEPTANCE, "mean_acceptance_length_interval"), [3.5, 3.9]),
     "stages.speculative.acceptance.mean_acceptance_length_interval [3.5, 3.9] does not hold its point, "
     "stages.speculative.acceptance.mean_acceptance_length = 3.0"),
    ("a position's interval that leaves out its rate",
     changed(WHOLE, (*ACCEPTANCE, "by_temperature", 1, "per_position_interval", 0), [0.9, 1.0]),
     "stages.speculative.acceptance.by_temperature[1].per_position_interval[0] [0.9, 1.0] does not hold its point"),
    ("two modes' ALs further apart than k",
     changed(WHOLE, (*ACCEPTANCE, "by_mode", "difference", "mean_acceptance_length"), -6.0),
     "stages.speculative.acceptance.by_mode.difference.mean_acceptance_length, one AL less another, must be from -4 to 4"),
    # Rates and shares from 0 to 1.
    ("an acceptance rate of 2.0", changed(WHOLE, (*ACCEPTANCE, "acceptance_rate"), 2.0),
     "stages.speculative.acceptance.acceptance_rate must be from 0 to 1, not 2.0"),
    ("a negative acceptance rate", changed(WHOLE, ("workloads", "chat", "acceptance", "acceptance_rate"), -0.1),
     "workloads.chat.acceptance.acceptance_rate must be from 0 to 1, not -0.1"),
    ("a position accepted 1.5 times a step", changed(WHOLE, (*ACCEPTANCE, "per_position", 0), 1.5),
     "stages.speculative.acceptance.per_position[0] must be from 0 to 1, not 1.5"),
    ("an exact match of 1.5", changed(WHOLE, ("stages", "equivalence", "greedy", "chat", "exact_match"), 1.5),
     "stages.equivalence.greedy.chat.exact_match must be from 0 to 1"),
    ("a negative p-value", changed(WHOLE, ("stages", "equivalence", "sampling", 0, "p_value"), -0.2),
     "stages.equivalence.sampling[0].p_value must be from 0 to 1"),
    ("more positions than the run drafted", changed(WHOLE, (*ACCEPTANCE, "per_position"), [0.5, 0.4, 0.3, 0.2, 0.1]),
     "stages.speculative.acceptance.per_position has 5 positions; the run drafted k = 4 a step"),
    ("more tokens accepted than drafted", changed(WHOLE, (*ACCEPTANCE, "counts", "accepted"), 241),
     "stages.speculative.acceptance.counts.accepted (241) is more than stages.speculative.acceptance.counts.draft_tokens (240)"),
    ("a negative count", changed(WHOLE, (*ACCEPTANCE, "counts", "drafts"), -3),
     "stages.speculative.acceptance.counts.drafts must be 0 or more, not -3"),
    # Speed: a ratio is more than 0, its interval ordered and holding it.
    ("a speedup interval inverted", changed(WHOLE, (*LEVEL, "speedup_interval"), [1.6, 1.4]),
     "stages.throughput.levels.1.speedup_interval is an interval, [low, high], but its low end 1.6 is above its high end 1.4"),
    ("a speedup its interval leaves out", changed(WHOLE, ("stages", "throughput", "levels", "4", "speedup"), 3.0),
     "stages.throughput.levels.4.speedup_interval"),
    ("a negative speedup", changed(WHOLE, (*LEVEL, "speedup"), -1.5), "stages.throughput.levels.1.speedup must be more than 0"),
    ("a block ratio of 0", changed(WHOLE, (*LEVEL, "block_ratios", 0), 0),
     "stages.throughput.levels.1.block_ratios[0] must be more than 0, not 0"),
    ("negative tokens a second", changed(WHOLE, (*LEVEL, "speculative", "tokens_per_second"), -10.0),
     "stages.throughput.levels.1.speculative.tokens_per_second must be 0 or more"),
    # Every field the readers require, at every depth.
    ("a temperature's row without per_position", without(WHOLE, (*ACCEPTANCE, "by_temperature", 0, "per_position")),
     "stages.speculative.acceptance.by_temperature[0] lacks per_position"),
    ("acceptance without its counts", without(WHOLE, ("workloads", "chat", "acceptance", "counts")),
     "workloads.chat.acceptance lacks counts"),
    ("a level's side without its latencies", without(WHOLE, (*LEVEL, "baseline", "latency_ms")),
     "stages.throughput.levels.1.baseline lacks latency_ms"),
    ("a sampling test without its p-value", without(WHOLE, ("stages", "equivalence", "sampling", 0, "p_value")),
     "stages.equivalence.sampling[0] lacks p_value"),
    ("a property without its evidence", without(WHOLE, ("stages", "verdict", "properties", "speed", "evidence")),
     "stages.verdict.properties.speed lacks evidence"),
    ("a schedule's level without its baseline",
     without(WHOLE, ("stages", "throughput", "choice_of_k", "schedule", "levels", "4", "baseline")),
     "stages.throughput.choice_of_k.schedule.levels.4 lacks baseline"),
    ("a mode without its drafts", without(WHOLE, (*ACCEPTANCE, "by_mode", "modes", 1, "drafts")),
     "stages.speculative.acceptance.by_mode.modes[1] lacks drafts"),
    ("the rate point without its request rate", without(WHOLE, ("stages", "throughput", "rate_point", "request_rate")),
     "stages.throughput.rate_point lacks request_rate"),
    # Numbers no measurement is.
    ("a 400-digit AL", changed(WHOLE, (*ACCEPTANCE, "mean_acceptance_length"), 10**400),
     "stages.speculative.acceptance.mean_acceptance_length must be a number"),
    ("a 400-digit acceptance rate", changed(WHOLE, ("workloads", "chat", "acceptance", "acceptance_rate"), -(10**400)),
     "workloads.chat.acceptance.acceptance_rate must be a number"),
]  # fmt: skip


@pytest.mark.parametrize(("document", "named"), [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE])
def test_a_figure_that_cannot_mean_what_it_says_or_a_missing_field_is_a_400_naming_it_and_nothing_is_kept(
    uploader, document, named
):
    answer = uploader(document)
    error = answer.json()["error"]
    assert answer.status_code == 400 and error["code"] == "refused" and named in error["message"], answer.content.decode()
    run = CertificationRun.objects.get(pk=uploader.run_id)
    assert run.result is None and run.state != RunState.PUBLISHING


def test_the_probes_count_of_hostile_uploads_is_covered():
    assert len(HOSTILE) >= 27 and len({name for name, *_ in HOSTILE}) == len(HOSTILE)


def test_a_whole_document_as_a_worker_writes_it_is_kept(uploader):
    assert uploader(WHOLE).status_code == 202


def stored(uploader: Any, document: Document) -> tuple[CertificationRun, Document]:
    """Upload `document`, finish it where the signing key is; the run as published and its document as stored."""
    answer = uploader(document)
    assert answer.status_code == 202, answer.json()
    assert upload_finish(run_id=uploader.run_id, attempt=uploader.attempt) is not None
    run = CertificationRun.objects.get(pk=uploader.run_id)
    assert run.state == RunState.FINISHED and run.result is not None
    return run, run.result


def test_engine_latency_45_times_the_clients_uploaded_as_agreeing_is_shown_as_delayed(uploader):
    engine = WHOLE["stages"]["throughput"]["levels"]["1"]["speculative"]["engine_latency_ms"]
    slow = {name: {q: value * 45 for q, value in figures.items()} for name, figures in engine.items()}
    document = changed(WHOLE, (*LEVEL, "speculative", "engine_latency_ms"), slow)
    assert document["stages"]["throughput"]["levels"]["1"]["speculative"]["delayed"] == []  # the upload's claim
    run, kept = stored(uploader, document)
    level = kept["stages"]["throughput"]["levels"]["1"]
    assert level["speculative"]["delayed"] == ["ttft", "tpot", "itl", "e2e"] and level["baseline"]["delayed"] == []
    rows = [row for row in Client().get(f"/api/v1/runs/{run.pk}/").json()["latency"] if row["where"] == "c=1"]
    assert rows and all(row["delayed"] == ["speculative"] for row in rows), rows
    ttft = next(row for row in rows if row["metric"] == "ttft")
    assert ttft["speculative"]["p50"] == slow["ttft"]["p50"]  # the engine's own figure, not the client's
    assert "delayed by the measuring machine" in Client().get(f"/pairs/{run.pair_id}/").content.decode()


def test_a_delay_the_figures_do_not_show_is_dropped_and_the_served_counters_agreement_is_worked_out(uploader):
    document = changed(WHOLE, (*LEVEL, "baseline", "delayed"), ["ttft", "e2e"])
    served = {**document["stages"]["throughput"]["counters"]["served"], "accepted": 100}
    document = changed(document, ("stages", "throughput", "counters", "served"), served)
    assert document["stages"]["throughput"]["counters"]["agree"] is True  # the upload's claim
    run, kept = stored(uploader, document)
    throughput = kept["stages"]["throughput"]
    assert throughput["levels"]["1"]["baseline"]["delayed"] == [] and throughput["counters"]["agree"] is False
    assert Client().get(f"/api/v1/runs/{run.pk}/").json()["measurement"]["counters_agree"] is False
