from __future__ import annotations

import base64
import json
import time
from datetime import timedelta
from typing import Any

import jsonschema
import pytest
from django.core import mail
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from registry.models import DeliveryState, Regression, Submission, WebhookDelivery, WebhookEndpoint, WebhookEvent
from registry.notifications import signing as webhooks
from registry.notifications.services import pair_event_notify, webhook_deliver, webhook_endpoint_create, webhooks_deliver_due
from tests.support.events import CERTIFIED, EXPIRED, REGRESSED
from tests.support.factories import HubModelFactory, PairFactory
from tests.support.receiver import webhook_receiver
from tests.support.runs import finish_run


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("author", email="author@example.org", password="pw")


def owned_pair(owner, draft=None, **fields):
    pair = PairFactory.create(**({"draft": draft} if draft else {}), **fields)
    draft = pair.draft
    assert draft is not None
    Submission.objects.create(submitted_by=owner, repo_id=draft.repo_id, revision=draft.sha, pair=pair, status="accepted")
    return pair


def new_revision_of(pair, owner):
    """The same draft repo and verifier at a new draft commit: a new pair of the same lineage."""
    draft = HubModelFactory.create(repo_id=pair.draft.repo_id, role="draft")
    return owned_pair(
        owner, draft=draft, verifier=pair.verifier, method=pair.method, num_speculative_tokens=pair.num_speculative_tokens
    )


def next_attempt(delivery):
    delivery.refresh_from_db()
    assert delivery.next_attempt_at is not None
    return delivery.next_attempt_at


def deliver_pending():
    for delivery in WebhookDelivery.objects.filter(state=DeliveryState.PENDING):
        webhook_deliver(delivery_id=delivery.pk)


def test_a_worse_draft_revision_is_flagged_and_its_owner_gets_one_signed_webhook_and_an_email(
    db, owner, django_capture_on_commit_callbacks
):
    with webhook_receiver() as receiver:
        endpoint = webhook_endpoint_create(owner=owner, url=receiver.url, events=[])
        first = owned_pair(owner)
        finish_run(first, al=3.0, speedup=1.5)
        worse = new_revision_of(first, owner)
        with django_capture_on_commit_callbacks(execute=True):  # the email goes out after commit
            run = finish_run(worse, al=2.5, speedup=1.49)  # AL -16.7 %, speedup -0.7 % (inside the 5 % tolerance)
        deliver_pending()

    worse.refresh_from_db()
    assert worse.regressed
    (regression,) = Regression.objects.filter(pair=worse)
    assert (regression.metric, regression.previous, regression.current) == ("mean_acceptance_length", 3.0, 2.5)
    first.refresh_from_db()
    assert regression.previous_run == first.latest_run
    regressed = [r for r in receiver.received if r.headers["X-SpecHub-Event"] == "pair.regressed"]
    assert len(regressed) == 1
    hook = regressed[0]
    assert webhooks.signature_valid(endpoint.secret, hook.headers["X-SpecHub-Signature"], hook.body, now=int(time.time()))
    assert not webhooks.signature_valid("another secret", hook.headers["X-SpecHub-Signature"], hook.body, now=int(time.time()))
    # Standard Webhooks: the receiver's own library checks the delivery with the endpoint's secret, and nothing else passes.
    assert endpoint.secret.startswith("whsec_")
    assert Webhook(endpoint.secret).verify(hook.body, hook.headers)["data"]["run"] == run.pk
    with pytest.raises(WebhookVerificationError):
        Webhook(webhooks.new_secret()).verify(hook.body, hook.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(endpoint.secret).verify(hook.body.replace(b"regressed", b"certified"), hook.headers)
    body = json.loads(hook.body)
    assert body["pair"] == worse.pk and body["data"]["run"] == run.pk
    assert_documented(body)
    assert body["data"]["regressions"]["mean_acceptance_length"]["previous"] == 3.0
    assert body["data"]["regressions"]["mean_acceptance_length"]["detectable_drop"] is None  # counted, not timed
    assert [m.to for m in mail.outbox if "regressed" in m.subject.lower()] == [["author@example.org"]]


def test_a_drop_within_the_tolerance_or_a_better_revision_flags_nothing(db, owner):
    first = owned_pair(owner)
    finish_run(first, al=3.0, speedup=1.5)
    slightly = new_revision_of(first, owner)
    finish_run(slightly, al=2.9, speedup=1.45)  # -3.3 % each
    better = new_revision_of(first, owner)
    finish_run(better, al=3.5, speedup=1.6)
    assert not Regression.objects.exists()
    slightly.refresh_from_db()
    assert not slightly.regressed


def test_a_timed_speedup_regresses_only_when_its_whole_interval_lies_below_the_tolerance(db, owner):
    first = owned_pair(owner)
    finish_run(first, speedup=1.5, ratios=[1.52, 1.48, 1.50, 1.51, 1.49, 1.50])
    noisy = new_revision_of(first, owner)  # 10 % lower in the point estimate, but the blocks scatter by 20 %
    finish_run(noisy, speedup=1.35, ratios=[1.70, 1.05, 1.60, 1.10, 1.55, 1.20])
    assert not Regression.objects.filter(metric="speedup").exists()
    steady = new_revision_of(first, owner)  # compared with the noisy run before it: nothing to tell
    finish_run(steady, speedup=1.5, ratios=[1.52, 1.48, 1.50, 1.51, 1.49, 1.50])
    assert not Regression.objects.filter(metric="speedup").exists()
    slower = new_revision_of(first, owner)  # 20 % lower than the steady run, and every block says so
    finish_run(slower, speedup=1.2, ratios=[1.22, 1.18, 1.21, 1.19, 1.20, 1.20])
    (regression,) = Regression.objects.filter(metric="speedup")
    low, high = regression.interval
    assert regression.pair == slower and low < regression.relative_change + 1 < high < 0.95
    assert regression.relative_change == pytest.approx(-0.2, abs=0.01)
    slower.refresh_from_db()
    assert slower.regressed


def test_regressions_compare_on_the_same_hardware_only(db, owner):
    first = owned_pair(owner)
    finish_run(first, al=3.0, hardware="cpu")
    finish_run(new_revision_of(first, owner), al=1.0, hardware="gpu.h100")
    assert not Regression.objects.exists()


def test_the_pair_page_shows_the_regression_in_its_history(db, owner, client):
    first = owned_pair(owner)
    finish_run(first, al=3.0)
    worse = new_revision_of(first, owner)
    finish_run(worse, al=2.0)
    page = client.get(f"/pairs/{worse.pk}/").content.decode()
    assert "Regressed" in page and "mean_acceptance_length" in page and "-0.333" in page


def test_a_failed_delivery_is_retried_with_growing_backoff_until_it_lands(db, owner, settings):
    settings.SPECHUB_WEBHOOK_BACKOFF_SECONDS = 30
    with webhook_receiver(statuses=[500, 503]) as receiver:
        webhook_endpoint_create(owner=owner, url=receiver.url, events=["pair.certified"])
        pair = owned_pair(owner)
        (delivery,) = pair_event_notify(pair=pair, event=WebhookEvent.CERTIFIED, subject="run-1", data=CERTIFIED)
        now = timezone.now()
        assert webhook_deliver(delivery_id=delivery.pk, now=now) == "pending"
        later = next_attempt(delivery)
        first_wait = later - now
        assert webhooks_deliver_due(now=now) == []  # not due yet
        assert webhooks_deliver_due(now=later) == [delivery.pk]
        second_wait = next_attempt(delivery) - later
        assert webhooks_deliver_due(now=next_attempt(delivery)) == [delivery.pk]
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("delivered", 3, 200)
    assert timedelta(seconds=29) < first_wait < timedelta(seconds=31) and timedelta(seconds=59) < second_wait < timedelta(
        seconds=61
    )
    assert len(receiver.received) == 3
    assert len({r.headers["X-SpecHub-Delivery"] for r in receiver.received}) == 1  # receivers can deduplicate


def test_a_delivery_gives_up_after_its_attempts(db, owner, settings):
    settings.SPECHUB_WEBHOOK_MAX_ATTEMPTS = 2
    with webhook_receiver(statuses=[500, 500, 500]) as receiver:
        webhook_endpoint_create(owner=owner, url=receiver.url, events=[])
        (delivery,) = pair_event_notify(pair=owned_pair(owner), event=WebhookEvent.EXPIRED, subject="c-1", data=EXPIRED)
        webhook_deliver(delivery_id=delivery.pk)
        delivery.refresh_from_db()
        webhook_deliver(delivery_id=delivery.pk, now=delivery.next_attempt_at)
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.last_error) == ("failed", 2, "HTTP 500")
    assert len(receiver.received) == 2


def test_the_same_event_about_the_same_subject_is_delivered_once(db, owner):
    webhook_endpoint_create(owner=owner, url="http://127.0.0.1:9/unused", events=[])
    pair = owned_pair(owner)
    assert len(pair_event_notify(pair=pair, event=WebhookEvent.REGRESSED, subject="run-7", data=REGRESSED)) == 1
    assert pair_event_notify(pair=pair, event=WebhookEvent.REGRESSED, subject="run-7", data=REGRESSED) == []
    assert WebhookDelivery.objects.count() == 1


def test_endpoints_receive_only_the_events_they_chose_and_only_for_their_own_pairs(db, owner, django_user_model):
    stranger = django_user_model.objects.create_user("stranger", password="pw")
    webhook_endpoint_create(owner=owner, url="http://127.0.0.1:9/a", events=["pair.certified"])
    webhook_endpoint_create(owner=stranger, url="http://127.0.0.1:9/b", events=[])
    pair = owned_pair(owner)
    assert pair_event_notify(pair=pair, event=WebhookEvent.REGRESSED, subject="run-1", data=REGRESSED) == []
    assert len(pair_event_notify(pair=pair, event=WebhookEvent.CERTIFIED, subject="run-1", data=CERTIFIED)) == 1


def test_the_webhook_api_registers_an_endpoint_and_shows_its_secret_once(db, owner, client):
    assert client.post("/api/v1/webhooks/", {"url": "https://example.org/hook"}).status_code in (401, 403)
    client.force_login(owner)
    created = client.post(
        "/api/v1/webhooks/", {"url": "https://example.org/hook", "events": ["pair.regressed"]}, content_type="application/json"
    )
    # A Standard Webhooks secret: whsec_ and 32 random bytes, in base64.
    assert created.status_code == 201 and len(base64.b64decode(created.json()["secret"].removeprefix("whsec_"))) == 32
    listed = client.get("/api/v1/webhooks/").json()
    assert [hook["url"] for hook in listed] == ["https://example.org/hook"] and "secret" not in listed[0]
    refused = client.post(
        "/api/v1/webhooks/", {"url": "ftp://example.org/x", "events": ["nope"]}, content_type="application/json"
    )
    assert refused.status_code == 400
    assert "url" in json.dumps(refused.json()) and "events" in json.dumps(refused.json())


def test_an_owner_deletes_their_endpoint_and_nobody_else_can(db, owner, client, django_user_model):
    endpoint = webhook_endpoint_create(owner=owner, url="https://example.org/hook", events=[])
    client.force_login(django_user_model.objects.create_user("stranger", password="pw"))
    assert client.delete(f"/api/v1/webhooks/{endpoint.pk}/").status_code == 404
    client.force_login(owner)
    assert client.delete(f"/api/v1/webhooks/{endpoint.pk}/").status_code == 204
    assert not WebhookEndpoint.objects.exists()


def test_a_duplicate_submission_of_a_pair_spechub_added_makes_nobody_its_owner(db, owner):
    from registry.catalog.selectors import pair_owner

    pair = PairFactory.create()
    draft = pair.draft
    assert draft is not None
    Submission.objects.create(submitted_by=owner, repo_id=draft.repo_id, revision=draft.sha, pair=pair, status="duplicate")
    assert pair_owner(pair=pair) is None
    assert pair_owner(pair=owned_pair(owner)) == owner


def test_staff_cannot_edit_signed_or_measured_fields_in_the_admin(db, client, django_user_model):
    staff = django_user_model.objects.create_superuser("staff", password="pw")
    client.force_login(staff)
    run = finish_run(owned_pair(staff))
    certificate = run.pair.certificates.get()
    pair_form = client.get(f"/admin/registry/pair/{run.pair_id}/change/").content.decode()
    assert 'name="speedup"' not in pair_form and 'name="verdict"' not in pair_form and 'name="method"' in pair_form
    form = client.get(f"/admin/registry/certificate/{certificate.pk}/change/").content.decode()
    assert 'name="document"' not in form and 'name="verdict"' not in form and certificate.digest in form


def assert_documented(body: dict[str, Any]) -> None:
    """The delivery's body is what the OpenAPI schema's `webhooks` section says that event carries."""
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    request = schema["webhooks"][body["event"]]["post"]["requestBody"]["content"]["application/json"]["schema"]
    jsonschema.validate(body, {**request, "components": schema["components"]})


def test_a_standard_webhooks_library_verifies_what_an_endpoint_made_before_them_is_sent_constructed():
    legacy = "ab" * 32  # the hex secrets endpoints had before
    headers = webhooks.standard_headers(legacy, "msg_7", int(time.time()), b'{"event":"pair.certified"}')
    assert Webhook(webhooks.standard_secret(legacy)).verify(b'{"event":"pair.certified"}', headers) == {"event": "pair.certified"}
