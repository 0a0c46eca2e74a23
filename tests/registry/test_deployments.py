"""Deployments held to their certificates: registration, the ingest token, observations, verdicts, drift events,
privacy, hostile input, thinning, gauges and pages (kernel/live.py has the arithmetic's own tests)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from registry.deployments import services
from registry.models import Certificate, CertificationRun, Deployment, LiveSnapshot, Submission, WebhookDelivery, WebhookEndpoint
from registry.states import RunState
from tests.support.factories import PairFactory, RunFactory, client_of

pytestmark = pytest.mark.django_db

NOW = timezone.now().timestamp()


@pytest.fixture
def owner(db: Any) -> User:
    return User.objects.create_user("owner", password="pw")


@pytest.fixture
def stranger(db: Any) -> User:
    return User.objects.create_user("stranger", password="pw")


@pytest.fixture
def pair(db: Any) -> Any:
    """A pair certified at k = 4 on vLLM 0.32.0, AL 3.4 with the interval [3.2, 3.6] over its prompts."""
    found = PairFactory.create()
    acceptance = {"mean_acceptance_length": 3.4, "mean_acceptance_length_interval": [3.2, 3.6], "per_position": []}
    document = {"schema_version": 3, "stages": {"speculative": {"acceptance": acceptance}}}
    RunFactory.create(pair=found, state=RunState.FINISHED, finished_at=timezone.now(), result=document, engine_version="0.32.0")
    return found


@pytest.fixture
def registered(owner: User, pair: Any) -> tuple[Deployment, str]:
    answer = client_of(owner).post(
        "/api/v1/deployments/", {"name": "prod-eu-1", "pair": pair.pk}, content_type="application/json"
    )
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert (
        body["certified"] == {"band": [3.2, 3.6], "k": 4, "engine_version": "0.32.0", "temperature": 0.0} and body["state"] == ""
    )
    return Deployment.objects.get(pk=body["id"]), body["ingest_token"]


class Server:
    """A vLLM server drafting 4 a step, its counters cumulative as /metrics gives them."""

    def __init__(self, started_at: float = 1000.0) -> None:
        self.started_at = started_at
        self.drafts, self.accepted, self.requests, self.positions = 0, 0, 0, [0, 0, 0, 0]

    def serve(self, at: float, steps: int, per_step: float, requests: int, **given: Any) -> dict[str, Any]:
        """Count `steps` drafting steps accepting `per_step` tokens each on average, over `requests` requests."""
        accepted = round(steps * per_step)
        share = [min(steps, round(accepted * s)) for s in (0.4, 0.3, 0.2, 0.1)]
        share[0] += accepted - sum(share)
        self.drafts, self.accepted, self.requests = self.drafts + steps, self.accepted + accepted, self.requests + requests
        self.positions = [a + b for a, b in zip(self.positions, share, strict=True)]
        return {"read_at": at, "drafts": self.drafts, "draft_tokens": 4 * self.drafts, "accepted": self.accepted,
                "per_position": list(self.positions), "requests": self.requests, "started_at": self.started_at,
                "engine_version": "0.32.0", "k": 4, **given}  # fmt: skip


def push(deployment: Deployment, token: str, *snapshots: dict[str, Any], raw: str | None = None) -> Any:
    body = raw if raw is not None else json.dumps({"snapshots": list(snapshots)})
    return Client().post(f"/api/v1/deployments/{deployment.pk}/observations/", body, content_type="application/json",
                         headers={"Authorization": f"Bearer {token}"})  # fmt: skip


def test_the_live_al_is_the_servers_own_over_the_window_and_within_the_band(registered):
    deployment, token = registered
    server = Server()
    first = push(deployment, token, server.serve(NOW - 120, 1000, 2.4, 40))
    assert first.status_code == 201 and first.json()["stored"] == 1 and first.json()["state"] == ""
    second = push(deployment, token, server.serve(NOW - 60, 2000, 2.4, 80))
    assert second.status_code == 201, second.content
    stored = list(LiveSnapshot.objects.filter(deployment=deployment))
    accepted = stored[1].accepted - stored[0].accepted
    assert second.json()["live_al"] == pytest.approx(1 + accepted / 2000) and second.json()["state"] == "within"
    assert stored[1].w_drafts == 2000 and stored[1].w_requests == 80
    # Per position, over the judged span, with an interval, beside the certified run's (none stored here).
    positions = client_of(deployment.owner).get(f"/api/v1/deployments/{deployment.pk}/observations/").json()["positions"]
    assert [row["position"] for row in positions] == [1, 2, 3, 4]
    assert positions[0]["live"] == pytest.approx((stored[1].per_position[0] - stored[0].per_position[0]) / 2000)
    low, high = positions[0]["interval"]
    assert low < positions[0]["live"] < high and positions[0]["certified"] is None


def test_traffic_below_the_band_is_reported_below_and_one_drift_event_is_queued_per_change(registered, owner):
    deployment, token = registered
    WebhookEndpoint.objects.create(owner=owner, url="http://127.0.0.1:9/hook", events=["deployment.drift"], secret="s" * 64)
    server = Server()
    ok = push(deployment, token, server.serve(NOW - 300, 1000, 2.4, 40), server.serve(NOW - 240, 2000, 2.4, 80))
    assert ok.status_code == 201 and ok.json()["state"] == "within", ok.content
    assert WebhookDelivery.objects.count() == 0  # the first verdict, within, is no drift
    # One window under the band is not yet "below" (one very long request can sway a window): the next must agree.
    assert push(deployment, token, server.serve(NOW - 180, 2000, 0.9, 80)).status_code == 201
    deployment.refresh_from_db()
    assert deployment.state == "within" and "in this window alone" in deployment.state_reason
    assert WebhookDelivery.objects.count() == 0
    assert push(deployment, token, server.serve(NOW - 120, 2000, 0.9, 80)).status_code == 201
    deployment.refresh_from_db()
    assert deployment.state == "below" and "wholly below the certified [3.20, 3.60]" in deployment.state_reason
    push(deployment, token, server.serve(NOW - 90, 2000, 0.9, 80))  # still below: no second event
    deliveries = list(WebhookDelivery.objects.all())
    assert len(deliveries) == 1 and deliveries[0].event == "deployment.drift"
    body = json.loads(deliveries[0].body)
    assert (body["data"]["from"], body["data"]["to"], body["deployment"]) == ("within", "below", deployment.pk)
    push(deployment, token, server.serve(NOW - 60, 2000, 0.02, 80))
    deployment.refresh_from_db()
    assert deployment.state == "collapse" and WebhookDelivery.objects.count() == 2


def test_a_restart_gives_the_new_processes_counts_never_a_negative_or_inflated_window(registered):
    deployment, token = registered
    server = Server()
    push(deployment, token, server.serve(NOW - 180, 1000, 2.4, 40), server.serve(NOW - 120, 2000, 2.4, 80))
    answer = push(deployment, token, Server(started_at=2000.0).serve(NOW - 60, 500, 2.4, 20))
    assert answer.status_code == 201, answer.content
    last = LiveSnapshot.objects.filter(deployment=deployment).last()
    assert last is not None and last.w_reset and (last.w_drafts, last.w_requests) == (500, 20)


@pytest.mark.parametrize(
    ("given", "status", "code"),
    [
        ({"drafts": "NaN"}, 400, "invalid"),
        ({"accepted": 99999}, 422, "live:impossible-ratio"),
        ({"per_position": [10, 9, 8, 7, 6]}, 422, "live:positions-beyond-k"),
        ({"drafts": 10, "draft_tokens": 40, "per_position": [0, 0, 0, 0], "accepted": 0}, 422, "live:counters-backwards"),
        ({"read_at": NOW - 500}, 422, "live:out-of-order"),
        ({"drafts": 10**30}, 422, "live:invalid-count"),
        ({"read_at": 1e300}, 422, "live:invalid-time"),
        ({"started_at": "Infinity"}, 400, "invalid"),
    ],
    ids=[
        "nan",
        "accepted-over-drafted",
        "positions-beyond-k",
        "backwards-without-restart",
        "out-of-order",
        "huge-count",
        "far-future",
        "infinite-start",
    ],
)
def test_hostile_observations_are_refused_with_their_reason_and_nothing_is_stored(registered, given, status, code):
    deployment, token = registered
    server = Server()
    push(deployment, token, server.serve(NOW - 400, 1000, 2.4, 40))
    before = LiveSnapshot.objects.count()
    good = server.serve(NOW - 100, 1000, 2.4, 40)
    bad = {**server.serve(NOW - 60, 1000, 2.4, 40), **given}  # with the same start time: no restart
    answer = push(deployment, token, good, bad)
    assert answer.status_code == status, answer.content
    assert answer.json()["error"]["code"] == code and answer.json()["error"]["message"]
    assert LiveSnapshot.objects.count() == before  # the good snapshot of the same push was not stored either


def test_a_push_over_its_size_or_a_deployments_rate_is_refused(registered, settings):
    deployment, token = registered
    settings.SPECHUB_LIVE_SNAPSHOTS_PER_PUSH, settings.SPECHUB_LIVE_SNAPSHOTS_PER_MINUTE = 3, 4
    server = Server()
    many = [server.serve(NOW - 100 + i, 100, 2.4, 4) for i in range(4)]
    assert push(deployment, token, *many).status_code == 400
    assert push(deployment, token, *many[:3]).status_code == 201
    limited = push(deployment, token, many[3], server.serve(NOW - 5, 100, 2.4, 4))
    assert limited.status_code == 429 and "spechub watch --every 60" in limited.json()["error"]["message"]


def test_a_stranger_gets_404_everywhere_and_a_revoked_token_401(registered, stranger, owner, pair):
    deployment, token = registered
    for path in (f"/api/v1/deployments/{deployment.pk}/", f"/api/v1/deployments/{deployment.pk}/observations/",
                 f"/deployments/{deployment.pk}/"):  # fmt: skip
        assert client_of(stranger).get(path).status_code == 404, path
        assert client_of(owner).get(path).status_code == 200, path
    assert client_of(stranger).post(f"/api/v1/deployments/{deployment.pk}/token/").status_code == 404
    _, other_token = services.deployment_create(owner=stranger, name="theirs", pair=pair)
    assert push(deployment, other_token, Server().serve(NOW - 60, 10, 2.0, 1)).status_code == 401  # another's token
    assert client_of(owner).delete(f"/api/v1/deployments/{deployment.pk}/token/").status_code == 200
    refused = push(deployment, token, Server().serve(NOW - 60, 10, 2.0, 1))
    assert refused.status_code == 401 and "revoked or replaced" in refused.json()["error"]["message"]
    assert refused.headers["WWW-Authenticate"].startswith("Bearer")
    assert LiveSnapshot.objects.count() == 0


def test_thinning_keeps_an_hour_each_and_the_snapshot_before_a_restart_and_the_windows_sum_the_same(registered, settings):
    deployment, _ = registered
    settings.SPECHUB_LIVE_SNAPSHOTS_PER_MINUTE = 1000  # three hours of readings, stored in one minute
    start = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    before, after = Server(), Server(started_at=2000.0)  # the server restarts after two hours
    readings = [(before if i <= 120 else after).serve(start + 60 * i, 100, 2.4, 4) for i in range(1, 181)]
    for batch in range(0, 180, 60):
        services.observations_ingest(deployment=deployment, snapshots=[_live(r) for r in readings[batch : batch + 60]])
    sums = _sums(deployment)
    removed = services.snapshots_thin(now=datetime(2026, 3, 1, tzinfo=UTC))
    kept = list(LiveSnapshot.objects.filter(deployment=deployment).order_by("read_at"))
    assert removed == 180 - len(kept) and len(kept) <= 5  # an hour's last each, and the last before the restart
    assert _sums(deployment) == sums and any(row.w_reset for row in kept)


def _live(given: dict[str, Any]) -> Any:
    from kernel.live import Snapshot

    fields = {k: v for k, v in given.items() if k != "per_position"}
    return Snapshot(**fields, per_position=tuple(given["per_position"]))


def _sums(deployment: Deployment) -> tuple[int, ...]:
    rows = LiveSnapshot.objects.filter(deployment=deployment)
    return tuple(sum(getattr(r, f) for r in rows) for f in ("w_drafts", "w_accepted", "w_second", "w_requests"))


def test_spechub_metrics_carry_each_judged_deployments_live_al_and_state(registered):
    deployment, token = registered
    server = Server()
    push(deployment, token, server.serve(NOW - 120, 1000, 2.4, 40), server.serve(NOW - 60, 2000, 2.4, 80))
    text = Client().get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    assert f'spechub_deployment_acceptance_length{{deployment="{deployment.pk}"}} 3.4' in text
    assert f'spechub_deployment_state{{deployment="{deployment.pk}",state="within"}} 1.0' in text


@pytest.mark.both_databases
def test_the_pages_register_show_the_token_once_and_draw_the_live_acceptance(owner, stranger, pair):
    client = client_of(owner)
    assert "No deployments yet" in client.get("/deployments/").content.decode()
    page = client.post("/deployments/", {"name": "prod-eu-1", "pair": str(pair.pk)}).content.decode()
    deployment = Deployment.objects.get(owner=owner)
    assert "shown this once" in page and "SPECHUB_INGEST_TOKEN=shd_" in page
    token = page.split("SPECHUB_INGEST_TOKEN=")[1].split(" ")[0]
    server = Server()
    push(deployment, token, server.serve(NOW - 120, 1000, 2.4, 40), server.serve(NOW - 60, 2000, 2.4, 80))
    page = client.get(f"/deployments/{deployment.pk}/").content.decode()
    assert "shown this once" not in page and token not in page  # never again
    assert 'data-chart="live-acceptance"' in page and "band certified" in page and "within" in page
    assert client.get(f"/deployments/{deployment.pk}/?days=365").status_code == 200
    assert client_of(stranger).get(f"/deployments/{deployment.pk}/").status_code == 404
    refused = client.post("/deployments/", {"name": "", "pair": str(pair.pk)}).content.decode()
    assert "Not registered" in refused and "Name the deployment" in refused


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"read_at": 200 * 365 * 86400}, "read_at"),
        ({"started_at": 1e308}, "started_at"),
        ({"read_at": 400}, "read_at"),
    ],
    ids=["read-200-years-ahead", "started-at-1e308", "read-400-s-ahead"],
)
def test_a_watcher_clock_ahead_of_the_servers_is_refused_and_later_pushes_still_land(registered, given, field):
    deployment, token = registered
    server = Server()
    ahead = {name: value if name == "started_at" else timezone.now().timestamp() + value for name, value in given.items()}
    refused = push(deployment, token, {**server.serve(NOW - 120, 1000, 2.4, 40), **ahead})
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "live:clock-ahead", refused.content
    assert "the watcher's clock is ahead" in refused.json()["error"]["message"] and field in refused.json()["error"]["message"]
    assert not LiveSnapshot.objects.exists()
    assert push(deployment, token, server.serve(NOW - 60, 1000, 2.4, 40)).status_code == 201


def test_a_clock_within_five_minutes_ahead_is_taken(registered):
    deployment, token = registered
    assert push(deployment, token, Server().serve(NOW + 60, 1000, 2.4, 40)).status_code == 201


def test_resetting_the_ingest_state_drops_only_the_future_snapshots_and_correct_pushes_land_again(registered, owner):
    deployment, token = registered
    server = Server()
    history = [server.serve(NOW - 300, 1000, 2.4, 40), server.serve(NOW - 240, 2000, 2.4, 80)]
    assert push(deployment, token, *history).status_code == 201
    # A future snapshot stored before the clock check existed (or straight into the table): it blocks every push.
    services.observations_ingest(deployment=deployment, snapshots=[_live(server.serve(NOW + 10**9, 10, 2.4, 1))],
                                 now=NOW + 10**9)  # fmt: skip
    blocked = push(deployment, token, server.serve(NOW - 60, 1000, 2.4, 40))
    assert blocked.status_code == 422 and "reset the deployment's ingest state" in blocked.json()["error"]["message"]
    answer = client_of(owner).post(f"/api/v1/deployments/{deployment.pk}/ingest/reset/")
    assert answer.status_code == 200 and answer.json() == {"removed": 1}
    assert LiveSnapshot.objects.filter(deployment=deployment).count() == 2  # the history stays
    later = push(deployment, token, server.serve(NOW - 30, 1000, 2.4, 40))
    assert later.status_code == 201, later.content
    last = LiveSnapshot.objects.filter(deployment=deployment).order_by("read_at").last()
    assert last is not None and last.w_drafts == 1010 + 1000  # its window spans the dropped one
    page = client_of(owner).post(f"/deployments/{deployment.pk}/reset/")
    assert page.status_code == 302 and LiveSnapshot.objects.filter(deployment=deployment).count() == 3


def test_an_exact_retry_of_a_stored_batch_is_a_200_that_stores_nothing_and_a_changed_one_a_conflict(registered):
    deployment, token = registered
    server = Server()
    batch = [server.serve(NOW - 300 + 60 * i, 1000, 2.4, 40) for i in range(4)]
    assert push(deployment, token, *batch).status_code == 201
    retried = push(deployment, token, *batch)
    assert retried.status_code == 200 and (retried.json()["stored"], retried.json()["skipped"]) == (0, 4), retried.content
    partly = push(deployment, token, *batch[2:], server.serve(NOW - 30, 1000, 2.4, 40))
    assert partly.status_code == 201 and (partly.json()["stored"], partly.json()["skipped"]) == (1, 2)
    changed = push(deployment, token, {**batch[1], "requests": batch[1]["requests"] + 1})
    assert changed.status_code == 422 and changed.json()["error"]["code"] == "live:conflict"
    assert LiveSnapshot.objects.filter(deployment=deployment).count() == 5


@pytest.fixture
def pointed(owner: User) -> tuple[Deployment, str]:
    """A deployment of a pair whose certified run kept no per-prompt counts: an AL of 3.4 and no interval."""
    found = PairFactory.create()
    document = {"schema_version": 3, "stages": {"speculative": {"acceptance": {"mean_acceptance_length": 3.4}}}}
    RunFactory.create(pair=found, state=RunState.FINISHED, finished_at=timezone.now(), result=document,
                      engine_version="0.32.0", hardware="cpu")  # fmt: skip
    return services.deployment_create(owner=owner, name="prod-us-1", pair=found)


def test_a_certified_run_without_an_interval_reads_no_band_never_below(pointed):
    deployment, token = pointed
    body = client_of(deployment.owner).get(f"/api/v1/deployments/{deployment.pk}/").json()
    assert body["certified"] == {"band": None, "k": 4, "engine_version": "0.32.0", "temperature": 0.0}
    server = Server()
    assert push(deployment, token, server.serve(NOW - 300, 2000, 2.4, 80)).json()["state"] == ""  # no window yet
    for at, per_step in ((NOW - 240, 2.4), (NOW - 180, 2.4), (NOW - 120, 0.9), (NOW - 60, 0.9)):
        answer = push(deployment, token, server.serve(at, 2000, per_step, 80))
        assert answer.status_code == 201 and answer.json()["state"] == "no band", answer.content
    deployment.refresh_from_db()
    assert deployment.state_reason.startswith("no band: re-certify to hold it live")
    windows = client_of(deployment.owner).get(f"/api/v1/deployments/{deployment.pk}/observations/").json()["windows"]
    assert windows and {w["verdict"] for w in windows} <= {"no band", "too small"}
    page = client_of(deployment.owner).get(f"/deployments/{deployment.pk}/").content.decode()
    assert "No band: re-certify to hold it live" in page and "Re-certify on cpu" in page
    assert f'action="/deployments/{deployment.pk}/recertify/"' in page


def test_re_certifying_queues_one_run_by_the_owner_and_a_second_click_queues_none(pointed, owner, settings):
    deployment, _ = pointed
    settings.SPECHUB_SUBMISSION_RATE = "5/hour"
    client = client_of(owner)
    first = client.post(f"/deployments/{deployment.pk}/recertify/")
    assert first.status_code == 302 and first["Location"] == f"/deployments/{deployment.pk}/"
    queued = CertificationRun.objects.filter(pair=deployment.pair, state=RunState.QUEUED)
    assert queued.count() == 1
    run = queued.get()
    assert (run.hardware, run.requested_by, run.trigger, run.workload) == ("cpu", owner, "manual", None)
    assert Submission.objects.filter(submitted_by=owner, run=run, pair=deployment.pair).count() == 1  # the quota counts it
    page = client.get(f"/deployments/{deployment.pk}/").content.decode()
    assert f'Run <a href="/runs/{run.pk}/">#{run.pk}</a> already certifies this pair on cpu' in page
    assert "Re-certify on cpu" not in page
    second = client.post(f"/deployments/{deployment.pk}/recertify/")
    assert second.status_code == 422 and "already certifies this pair" in second.content.decode()
    assert queued.count() == 1 and Submission.objects.filter(submitted_by=owner).count() == 1


def test_re_certifying_counts_against_the_submission_quota(pointed, owner, settings):
    deployment, _ = pointed
    settings.SPECHUB_SUBMISSION_RATE = "1/hour"
    Submission.objects.create(submitted_by=owner, repo_id="org/draft", revision="main")
    page = client_of(owner).get(f"/deployments/{deployment.pk}/").content.decode()
    assert "1 of 1 used this hour" in page
    refused = client_of(owner).post(f"/deployments/{deployment.pk}/recertify/")
    assert refused.status_code == 422 and "You have used your 1 submissions per hour" in refused.content.decode()
    assert not CertificationRun.objects.filter(pair=deployment.pair, state=RunState.QUEUED).exists()


def test_a_stranger_or_staff_cannot_re_certify_anothers_deployment(pointed, stranger):
    deployment, _ = pointed
    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    assert client_of(stranger).post(f"/deployments/{deployment.pk}/recertify/").status_code == 404
    assert client_of(staff).post(f"/deployments/{deployment.pk}/recertify/").status_code == 404  # staff may look, not act
    anonymous = client_of(None).post(f"/deployments/{deployment.pk}/recertify/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    assert not CertificationRun.objects.filter(pair=deployment.pair, state=RunState.QUEUED).exists()
    assert "Re-certify on" not in client_of(staff).get(f"/deployments/{deployment.pk}/").content.decode()


def test_a_deployment_pinned_to_a_certificate_without_a_band_follows_the_new_run(pointed, owner):
    deployment, _ = pointed
    certified = CertificationRun.objects.get(pair=deployment.pair, state=RunState.FINISHED)
    deployment.certificate = Certificate.objects.create(
        pair=deployment.pair, run=certified, verdict="certified", digest="0" * 64, signature="",
        issued_at=timezone.now(), expires_at=timezone.now(),
    )  # fmt: skip
    deployment.save(update_fields=["certificate"])
    page = client_of(owner).get(f"/deployments/{deployment.pk}/").content.decode()
    assert f"not to certificate #{deployment.certificate.pk}" in page
    assert client_of(owner).post(f"/deployments/{deployment.pk}/recertify/").status_code == 302
    deployment.refresh_from_db()
    assert deployment.certificate is None


def test_a_deployment_served_sampled_is_held_to_the_figure_certified_at_its_temperature(owner: User, pair: Any) -> None:
    run = CertificationRun.objects.get(pair=pair)
    assert run.result is not None
    sampled = {"temperature": 0.7, "mean_acceptance_length": 2.9, "mean_acceptance_length_interval": [2.7, 3.1],
               "per_position": [0.6], "per_position_interval": [[0.55, 0.65]], "drafts": 900}  # fmt: skip
    run.result["stages"]["speculative"]["acceptance"]["by_temperature"] = [sampled]
    run.save(update_fields=["result"])
    client = client_of(owner)
    answer = client.post("/api/v1/deployments/", {"name": "sampled", "pair": pair.pk, "temperature": 0.7},
                         content_type="application/json")  # fmt: skip
    assert answer.status_code == 201, answer.content
    assert answer.json()["certified"] == {"band": [2.7, 3.1], "k": 4, "engine_version": "0.32.0", "temperature": 0.7}
    page = client.get(f"/deployments/{answer.json()['id']}/").content.decode()
    assert "sampled at temperature 0.7 as it serves" in page


def test_a_temperature_the_certified_run_did_not_measure_is_refused_and_nothing_is_registered(owner: User, pair: Any) -> None:
    before = Deployment.objects.count()
    answer = client_of(owner).post("/api/v1/deployments/", {"name": "hot", "pair": pair.pk, "temperature": 0.5},
                                   content_type="application/json")  # fmt: skip
    assert answer.status_code == 400, answer.content
    assert "Temperature 0.5 was not measured for this pair's certified run; choose one of 0" in answer.content.decode()
    assert Deployment.objects.count() == before
    form = client_of(owner).post("/deployments/", {"name": "hot", "pair": pair.pk, "temperature": "0.55"})
    assert form.status_code == 422 and "Choose a temperature from the list (0, 0.7, 1)" in form.content.decode()
    assert Deployment.objects.count() == before


def test_a_collapsed_window_names_what_the_counters_show_and_what_to_check_and_a_healthy_one_names_none(registered):
    """Issue 53 §3: of a low acceptance's causes the counters show k; the rest are named with what to check."""
    deployment, token = registered
    server = Server()
    push(deployment, token, server.serve(NOW - 300, 1000, 2.4, 40), server.serve(NOW - 240, 2000, 2.4, 80))
    deployment.refresh_from_db()
    assert deployment.state == "within" and "Not checkable from counters" not in deployment.state_reason
    push(deployment, token, server.serve(NOW - 180, 2000, 0.02, 80))
    deployment.refresh_from_db()
    reason = deployment.state_reason
    assert deployment.state == "collapse" and "checked from the counters: 4 tokens drafted a step in this window; " \
        "certified k=4. Not checkable from counters: " in reason  # fmt: skip
    for cause in ("the method does not fit", "the draft is not the certified one", "do not share one vocabulary",
                  "the verifier is quantized otherwise", "not lossless", "the thinking switch"):  # fmt: skip
        assert cause in reason, reason
