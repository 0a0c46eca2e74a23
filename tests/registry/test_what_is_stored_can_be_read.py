"""What a worker or a user stores can be read (issue 52 §1): every JSON object sent is read as the pages and the API
will read it before it is kept, and a document no reader takes is a 400 naming the field.

The fuzz sends a full result document with each of its fields, section by section, of the wrong type or null, and
each section with NaN, an overflowing number, a huge one and half a surrogate pair; the same for qualification
records and hardware evidence. Each is refused with a 4xx, or, kept, every page and endpoint that shows it answers
200: the run's, its pair's, the listings, the engines', and at the end every route without a parameter.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from kernel import qualification as q
from kernel.spec import Thresholds, spec_of
from kernel.verdict import judge_document
from registry.fleet.services import upload_finish
from registry.models import CertificationRun, EngineQualification, Worker
from registry.runs.services import run_create
from registry.states import RunState
from tests.registry.test_every_url_answers import ROUTES
from tests.registry.test_pair_and_run_pages import choice_of_k, schedule_of, serving_document
from tests.support import qualification
from tests.support.documents import changed
from tests.support.factories import PairFactory, client_of

pytestmark = pytest.mark.django_db
API = "/api/v1/workers"
HUGE_FLOAT = "__overflows__"  # replaced by 1e400 in the body's text: Python reads it as infinity
SURROGATE = "\ud800"


# -- the worker, its runs and what it sends --------------------------------------------------------------------------


@pytest.fixture
def owner(db, settings) -> User:
    # The fuzz registers a machine for each record and each evidence it sends: past the caps a team works under.
    settings.SPECHUB_REGISTRATION_TOKENS_PER_USER = settings.SPECHUB_WORKERS_PER_USER = 10_000
    return User.objects.create_user("team", password="pw")


def registered(owner: User, evidence: Any = None, label: str = "gpu.h100") -> tuple[Client, Any]:
    """A public-approved worker (its runs publish to the pair pages), registered with `evidence`; the answer too."""
    token = client_of(owner).post(f"{API}/tokens/", {"labels": [label]}, content_type="application/json").json()
    body = {"registration_token": token["registration_token"], "name": "box-1", "engine_build": "0.32.0",
            "evidence": {"devices": [{"name": "H100", "memory": 80 << 30}]} if evidence is None else evidence}  # fmt: skip
    answer = sent(Client(), f"{API}/register/", body)
    if answer.status_code != 201:
        return Client(), answer
    Worker.objects.filter(pk=answer.json()["worker"]).update(public_approved=True)
    return Client(headers={"Authorization": f"Worker {answer.json()['credential']}"}), answer


def sent(client: Client, url: str, body: Any) -> Any:
    """POST `body` as JSON text as a hostile client writes it: NaN as NaN, and HUGE_FLOAT as 1e400."""
    text = json.dumps(body).replace(json.dumps(HUGE_FLOAT), "1e400")
    return client.post(url, text, content_type="application/json")


def claimed(worker: Client) -> dict[str, Any]:
    """A public run of a pair of its own, claimed by `worker`."""
    run_create(pair=PairFactory.create(), hardware="gpu.h100")
    answer = worker.post(f"{API}/claim/")
    assert answer.status_code == 200, answer.content
    found: dict[str, Any] = answer.json()
    return found


def full_document(claim: dict[str, Any]) -> dict[str, Any]:
    """A version-3 document with every section a page shows: serving figures, which k and its schedule, acceptance by k
    and temperature, equivalence, the smoke grid, per-workload figures, the environment and the judged verdict."""
    document = serving_document()
    stages = document["stages"]
    schedule = schedule_of(True)
    timed = stages["throughput"]["levels"]
    schedule["levels"] = {level: {**timed[level], **drafted} for level, drafted in schedule["levels"].items()}
    stages["throughput"]["choice_of_k"] = {**choice_of_k(document), "schedule": schedule}
    stages["throughput"]["levels"]["1"]["stopping"] = {"first_pairs": 5, "most_pairs": 20, "target_half_width": 0.05,
                                                       "half_width": 0.04, "reason": "precision reached"}  # fmt: skip
    stages["speculative"].update(start_seconds=2.0, manifest={"engine": "vllm"})  # whole, as a worker writes it
    equivalence = stages["equivalence"]
    for greedy in [*equivalence["greedy"].values(), *equivalence["reference"].values()]:
        greedy.update(prompts=4, divergences=greedy.get("divergences", []))
    equivalence["sampling"] = [{**test, "prefix": 0, "bins": 9, "statistic": 7.5, "dof": 8} for test in equivalence["sampling"]]
    acceptance = stages["speculative"]["acceptance"]
    acceptance.update(counts={"drafts": 60, "draft_tokens": 240, "accepted": 130, "accepted_per_position": [50, 40, 25, 15]},
                      prompts=12, mean_acceptance_length_interval=[3.0, 3.4], by_k=[{"k": 1, "mean_acceptance_length": 1.8}],
                      by_temperature=[{"temperature": 0.7, "mean_acceptance_length": 3.0, "per_position": [0.7],
                                       "per_position_interval": [[0.6, 0.8]], "drafts": 30}])  # fmt: skip
    stages["smoke"] = {"features": [{"feature": "json", "outcome": "differs", "detail": "first differs",
                                     "divergence": {"request": 1, "token": 3}}], "seconds": 4.5}  # fmt: skip
    spec = spec_of(claim["spec"], run_id=claim["run"], attempt=claim["attempt"])
    level, reasons, properties = judge_document(stages, method=spec.method, thresholds=Thresholds(), qualification=None)
    stages["verdict"] = {"verdict": level, "reasons": reasons, "thresholds": asdict(Thresholds()), "workloads": {},
                         "environment": {}, "properties": properties, "qualification": None}  # fmt: skip
    figures = {"acceptance": {**acceptance}, "equivalence": {"greedy_exact_match": 0.75, "divergences": [
        {"prompt": 2, "token": 7}], "reference_exact_match": 1.0}, "throughput": {"speedup": 1.2}}  # fmt: skip
    environment = {"engine_build": "0.32.0", "versions": {"vllm": "0.32.0"}, "hardware_class": "gpu.h100", "cpu": "x86",
                   "cpu_count": 2, "dtype": "float32", "k": 4, "seed": 0, "engine": {"max_model_len": 512},
                   "workloads": {"suite": "public", "sha256": "a" * 64, "prompts": 12}}  # fmt: skip
    return {**document, "spec": claim["spec"], "workloads": {"math": figures}, "environment": environment}


# -- mutations -------------------------------------------------------------------------------------------------------


def nodes(value: Any, path: tuple[Any, ...] = (), seen: set[Any] | None = None) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every field under `value` with its path, each shape once: a list's first item stands for its others, an
    object's first for the rest where all are objects of the same keys (levels by concurrency, latencies by name),
    and an object met before under the same name (a level's `baseline` in the rate point) is not entered again."""
    seen = set() if seen is None else seen
    yield path, value
    if isinstance(value, dict) and (shape := (path[-1:], tuple(value))) not in seen:
        seen.add(shape)
        shapes = {tuple(child) if isinstance(child, dict) else None for child in value.values()}
        alike = len(shapes) == 1 and None not in shapes
        for key, child in list(value.items())[: 1 if alike else None]:
            yield from nodes(child, (*path, key), seen)
    elif isinstance(value, list) and value:
        yield from nodes(value[0], (*path, 0), seen)


def wrong_types(value: Any) -> list[Any]:
    """A field's wrong types: another scalar or a container, and null."""
    if isinstance(value, bool):
        return ["yes", None]
    if isinstance(value, int | float):
        return ["many", None]
    if isinstance(value, str):
        return [7, None]
    return ["many", None, [] if isinstance(value, dict) else {}]


def hostile() -> list[Any]:
    """What a section is replaced by: NaN, an overflowing number, a huge one, true for a number, half a surrogate pair
    (as a value and as a key)."""
    return [float("nan"), HUGE_FLOAT, 10**30, True, f"a{SURROGATE}b", {SURROGATE: 1}]


def everywhere(value: Any, number: float | None, text: str | None) -> Any:
    """`value` with every number (not a bool) replaced by `number`, and every string by `text`, where given."""
    if isinstance(value, dict):
        return {key: everywhere(child, number, text) for key, child in value.items()}
    if isinstance(value, list):
        return [everywhere(child, number, text) for child in value]
    if isinstance(value, int | float) and not isinstance(value, bool) and number is not None:
        return number
    return text if isinstance(value, str) and text is not None else value


def mutations(document: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(what changed, the document): every number at once huge, zero or negative, every string empty or long; then
    every field's wrong types, and every section's hostile values."""
    for number, text in ((1e15, None), (0, None), (-1, None), (None, ""), (None, "x" * 5000)):
        found = {**everywhere(document, number, text), "schema_version": document["schema_version"]}
        found["environment"]["engine_build"] = document["environment"]["engine_build"]  # the worker's, or a 403
        found["stages"]["verdict"]["verdict"] = document["stages"]["verdict"]["verdict"]  # a label the registry files
        yield f"every number {number}, every string {text!r:.10}", found
    sections: set[tuple[Any, ...]] = set()
    for path, value in nodes(document):
        if not path or path[0] == "spec":
            continue
        for wrong in wrong_types(value):
            yield f"{'.'.join(map(str, path))} = {wrong!r}", changed(document, path, wrong)
        if path[:3] not in sections:  # each section, down to a stage's parts
            sections.add(path[:3])
            for bad in hostile():
                yield f"{'.'.join(map(str, path))} = {bad!r}", changed(document, path, bad)


# -- what shows a run ------------------------------------------------------------------------------------------------


def shows(run: CertificationRun) -> list[str]:
    """The pages and endpoints that show one run's document: its own, its pair's (it is the pair's latest), its
    certificate's."""
    urls = [f"/runs/{run.pk}/", f"/api/v1/runs/{run.pk}/", f"/pairs/{run.pair_id}/", f"/api/v1/pairs/{run.pair_id}/"]
    if hasattr(run, "certificate"):
        urls += [f"/api/v1/certificates/{run.certificate.pk}/", f"/api/v1/certificates/{run.certificate.pk}/download/"]
    return urls


def listings(verifier: str) -> list[str]:
    """The pages and endpoints that list every run or pair, with their figures."""
    return ["/api/v1/runs/", "/runs/", "/", "/api/v1/pairs/", "/api/v1/export/?format=json", "/api/v1/export/?format=csv",
            "/matrix/", "/engines/", "/api/v1/engines/", f"/api/v1/recommendations/?verifier={verifier}"]  # fmt: skip


def answered(urls: list[str], *users: User | None) -> list[tuple[str, str, int]]:
    """The (url, who, status) of every answer that is not a 200 (a redirect to sign in aside)."""
    odd = []
    for user in users:
        client = client_of(user)
        for url in urls:
            status = client.get(url, HTTP_ACCEPT="*/*").status_code
            if status != 200 and not (user is None and status in (302, 403, 404)):
                odd.append((url, getattr(user, "username", "anonymous"), status))
    return odd


def every_route_without_a_parameter(*users: User | None) -> list[tuple[str, str, int]]:
    urls = [reverse(name) for name, parameters in ROUTES if not parameters and not name.startswith("admin:")]
    odd = []
    for user in users:
        client = client_of(user)
        odd += [(url, getattr(user, "username", "anonymous"), status) for url in urls
                if (status := client.get(url, HTTP_ACCEPT="text/html,application/json").status_code) >= 500]  # fmt: skip
    return odd


# -- the fuzz --------------------------------------------------------------------------------------------------------


def test_every_result_document_a_worker_uploads_is_refused_naming_why_or_every_page_that_shows_it_answers(owner):
    staff = User.objects.create_user("staff", password="pw", is_staff=True, is_superuser=True)
    worker, _ = registered(owner)
    claim = claimed(worker)
    base = full_document(claim)
    kept: list[str] = []
    odd: list[tuple[Any, ...]] = []
    for what, document in [("the whole document, as written", base), *mutations(base)]:
        answer = sent(worker, f"{API}/runs/{claim['run']}/result/",
                      {"attempt": claim["attempt"], "document": {**document, "spec": claim["spec"]}})  # fmt: skip
        if answer.status_code == 202:
            run = _finished(claim)
            kept.append(what)
            odd += [(what, *found) for found in answered(shows(run), owner)]
            claim = claimed(worker)
        elif not 400 <= answer.status_code < 500 or not answer.json()["error"]["message"]:
            odd.append((what, "upload", answer.status_code))
    # Every kept run is public: the listings show them all at once, to everyone.
    odd += answered(listings(run.pair.verifier.repo_id), owner, staff, None)
    assert kept[0] == "the whole document, as written", kept
    assert not odd, odd[:20]
    assert not every_route_without_a_parameter(owner, staff, None)


def _finished(claim: dict[str, Any]) -> CertificationRun:
    """The kept upload, finished where the signing key is: judged, stored and published."""
    assert upload_finish(run_id=claim["run"], attempt=claim["attempt"]) is not None
    run = CertificationRun.objects.select_related("pair__verifier").get(pk=claim["run"])
    assert run.state == RunState.FINISHED, run.error_message
    return run


def test_every_qualification_record_a_worker_sends_is_refused_naming_why_or_the_engines_pages_answer(owner, settings):
    staff = User.objects.create_user("staff", password="pw", is_staff=True, is_superuser=True)
    base = dict(qualification.record(hardware="gpu.h100", names=settings.SPECHUB_QUALIFY_CONTROLS))
    odd: list[tuple[Any, ...]] = []
    kept = 0
    worker, _ = registered(owner)
    for path, value in [p for p in nodes(base) if p[0] and p[0][0] not in ("digest", "kind", "schema_version")]:
        for wrong in [*wrong_types(value), *(hostile() if len(path) == 1 else [])]:
            record = changed(base, path, wrong)
            record["digest"] = q.digest_of(record) if wrong is not HUGE_FLOAT else "0" * 64
            answer = sent(worker, f"{API}/qualification/", {"document": record})
            if answer.status_code == 201:
                kept += 1
                digest = answer.json()["digest"]
                urls = [f"/api/v1/engines/{digest}/", "/engines/", "/api/v1/engines/", "/workers/"]
                odd += [(path, wrong, *found) for found in answered(urls, owner, staff, None)]
                worker, _ = registered(owner)
            elif not 400 <= answer.status_code < 500:
                odd.append((path, wrong, "upload", answer.status_code))
    assert 0 < kept < 10 and not odd, (kept, odd[:20])  # kept: a control's method or draft named "many"


def test_every_hardware_evidence_a_worker_registers_with_is_refused_naming_why_or_its_pages_answer(owner):
    staff = User.objects.create_user("staff", password="pw", is_staff=True, is_superuser=True)
    worker, _ = registered(owner)
    claim = claimed(worker)
    assert sent(worker, f"{API}/runs/{claim['run']}/result/", {"attempt": 1, "document": full_document(claim)}).status_code == 202
    run = _finished(claim)
    base = {"platform": "Linux-6.8-x86_64", "cpus": 16, "engine_build": "0.32.0",
            "devices": [{"name": "NVIDIA H100 80GB HBM3", "memory": 85_899_345_920}]}  # fmt: skip
    odd: list[tuple[Any, ...]] = []
    for path, value in [p for p in nodes(base) if p[0]]:
        for wrong in [*wrong_types(value), *hostile()]:
            again, answer = registered(owner, changed(base, path, wrong))
            if answer.status_code == 201:
                CertificationRun.objects.filter(pk=run.pk).update(worker_id=answer.json()["worker"])
                odd += [(path, wrong, *found) for found in answered([*shows(run), "/workers/"], owner, staff)]
                if (standing := again.get(f"{API}/me/").status_code) != 200:
                    odd.append((path, wrong, "me", standing))
            elif not 400 <= answer.status_code < 500:
                odd.append((path, wrong, "register", answer.status_code))
    assert not odd, odd[:20]


# -- the probe's two defects (issue 52 #1 and #2) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "value", "named"),
    [
        (("stages", "throughput", "levels", "1", "speedup_interval"), ["a", "b"],
         "stages.throughput.levels.1.speedup_interval[0] must be a number, not 'a'"),
        (("stages", "speculative", "acceptance", "mean_acceptance_length"), "many",
         "stages.speculative.acceptance.mean_acceptance_length must be a number or null, not 'many'"),
        (("schema_version",), True, "schema_version must be a whole number, not true"),
    ],
)  # fmt: skip
def test_an_upload_the_readers_trip_on_is_a_400_naming_the_field_and_nothing_is_kept(owner, where, value, named):
    worker, _ = registered(owner)
    claim = claimed(worker)
    document = changed(full_document(claim), where, value)
    answer = sent(worker, f"{API}/runs/{claim['run']}/result/", {"attempt": claim["attempt"], "document": document})
    assert answer.status_code == 400 and named in json.dumps(answer.json()["error"]), answer.json()
    run = CertificationRun.objects.get(pk=claim["run"])
    assert run.result is None and run.state != RunState.PUBLISHING
    assert not answered([f"/runs/{run.pk}/", "/api/v1/runs/", f"/pairs/{run.pair_id}/"], owner, None)


@pytest.mark.parametrize("where", ["document.stages.smoke.features[0].detail", "document.environment.engine.a\\ud800"])
def test_half_a_surrogate_pair_in_a_result_document_is_a_400_naming_where(owner, where):
    worker, _ = registered(owner)
    claim = claimed(worker)
    document = full_document(claim)
    if "smoke" in where:
        document["stages"]["smoke"]["features"][0]["detail"] = f"first {SURROGATE} differs"
    else:
        document["environment"]["engine"][f"a{SURROGATE}"] = 1
    answer = sent(worker, f"{API}/runs/{claim['run']}/result/", {"attempt": claim["attempt"], "document": document})
    message = answer.json()["error"]["message"]
    assert answer.status_code == 400 and where in message and "half of a UTF-16 surrogate pair (U+D800)" in message, message
    assert CertificationRun.objects.get(pk=claim["run"]).result is None


def test_half_a_surrogate_pair_in_evidence_or_a_qualification_record_is_a_400_and_the_engine_record_still_reads(owner, settings):
    _, refused = registered(owner, {"platform": f"Linux{SURROGATE}", "devices": []})
    assert refused.status_code == 400 and "evidence.platform holds half of a UTF-16" in refused.json()["error"]["message"]
    assert not Worker.objects.exists()
    worker, _ = registered(owner)
    record: dict[str, Any] = dict(qualification.record(hardware="gpu.h100", names=settings.SPECHUB_QUALIFY_CONTROLS))
    record["controls"][0]["summary"] = f"passes {SURROGATE}"
    record["digest"] = q.digest_of(record)
    answer = sent(worker, f"{API}/qualification/", {"document": record})
    assert answer.status_code == 400, answer.content
    assert "document.controls[0].summary holds half of a UTF-16 surrogate pair" in answer.json()["error"]["message"]
    assert not EngineQualification.objects.exists()
    assert Client().get(f"/api/v1/engines/{record['digest']}/").status_code == 404  # never stored, never a 500


@pytest.mark.parametrize(
    ("url", "body", "named"),
    [
        ("/api/v1/webhooks/", {"url": "https://example.com/hook", "events": [f"run.finished{SURROGATE}"]}, "events[0]"),
        ("/api/v1/workloads/", {"verifier": "spechub-toy/llama-verifier", "content": f"a prompt {SURROGATE}"}, "content"),
        ("/api/v1/workloads/", {"verifier": "spechub-toy/llama-verifier", "extra": {"deep": [{SURROGATE: 1}]}},
         "extra.deep[0].\\ud800"),
        ("/api/v1/submissions/", {"draft_repo_id": f"org/draft{SURROGATE}", "revision": "main"}, "draft_repo_id"),
        ("/api/v1/workers/tokens/", {"labels": ["gpu.h100"], "note": {"n": HUGE_FLOAT}}, "note.n holds a number too large"),
        ("/api/v1/deployments/", {"name": "prod", "pair": 1, "temperature": HUGE_FLOAT}, "temperature holds a number too large"),
    ],
)  # fmt: skip
def test_every_json_body_with_half_a_surrogate_pair_or_an_overflowing_number_is_a_400_naming_where(owner, url, body, named):
    answer = sent(client_of(owner), url, body)
    assert answer.status_code == 400, answer.content
    message = answer.json()["error"]["message"]
    assert named in message and "JSON parse error" in message, message
