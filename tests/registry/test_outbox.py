"""What SpecHub owes the outside world (webhooks, emails, Hub PRs) survives a broker or mail outage: rows a sweep retries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone
from kombu.exceptions import OperationalError

from kernel.errors import UserError
from registry import dispatch
from registry.certificates.publishing import certificate_hub_pr_refused, certificates_publish_pending
from registry.models import Certificate, DeliveryState, EmailNotice, Submission, WebhookDelivery, WebhookEvent
from registry.notifications.services import emails_send_due, pair_event_notify, webhook_endpoint_create
from tests.services import free_port
from tests.support.events import EXPIRED, REGRESSED
from tests.support.factories import PairFactory
from tests.support.runs import finish_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def owned(django_user_model):
    owner = django_user_model.objects.create_user("author", email="author@example.org", password="pw")
    pair = PairFactory.create()
    assert pair.draft is not None
    Submission.objects.create(
        submitted_by=owner, repo_id=pair.draft.repo_id, revision=pair.draft.sha, pair=pair, status="accepted"
    )
    return owner, pair


def test_a_broker_error_in_one_commit_hook_leaves_the_others_to_run_with_a_refusing_broker_test_double(
    owned, monkeypatch, django_capture_on_commit_callbacks
):
    owner, pair = owned
    webhook_endpoint_create(owner=owner, url="https://hooks.invalid/spechub", events=[])

    def broker_down(name, *args, **options):
        raise OperationalError("the broker is down")

    monkeypatch.setattr(dispatch, "task_send", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        pair_event_notify(pair=pair, event=WebhookEvent.REGRESSED, subject="run-1", data=REGRESSED)
    # The webhook's dispatch failed, and the email after it was still sent; the delivery waits for the sweep.
    assert [m.to for m in mail.outbox] == [["author@example.org"]]
    assert WebhookDelivery.objects.get().state == DeliveryState.PENDING
    assert EmailNotice.objects.get().state == DeliveryState.DELIVERED


def test_an_email_the_relay_refused_is_kept_and_sent_by_the_sweep(owned, settings, django_capture_on_commit_callbacks):
    owner, pair = owned
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2  # nothing listens
    webhook_endpoint_create(owner=owner, url="https://hooks.invalid/spechub", events=[])
    with django_capture_on_commit_callbacks(execute=True):
        pair_event_notify(pair=pair, event=WebhookEvent.EXPIRED, subject="certificate-1", data=EXPIRED)
    notice = EmailNotice.objects.get()
    assert notice.state == DeliveryState.PENDING and "ConnectionRefusedError" in notice.last_error
    assert notice.next_attempt_at is not None and notice.next_attempt_at > timezone.now()

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"  # the relay is back
    assert emails_send_due() == []  # not due yet: backoff
    assert emails_send_due(now=notice.next_attempt_at + timedelta(seconds=1)) == [notice.pk]
    notice.refresh_from_db()
    assert notice.state == DeliveryState.DELIVERED and [m.subject for m in mail.outbox] == [notice.subject]


def test_a_certificate_whose_pr_dispatch_was_lost_is_dispatched_again_after_its_lease(
    settings, django_capture_on_commit_callbacks
):
    settings.SPECHUB_HUB_PUBLISH = True
    with django_capture_on_commit_callbacks() as lost:  # dispatched, then the message was lost
        certificate = finish_run(PairFactory.create(), verdict="certified").certificate
    assert any("registry.publish_certificate_to_hub" in repr(callback) for callback in lost)
    certificate.refresh_from_db()
    assert certificate.hub_pr_dispatched_at is not None and certificate.hub_pr_url == ""

    assert certificates_publish_pending() == []  # leased: a task may still be on its way
    later = timezone.now() + timedelta(seconds=settings.SPECHUB_HUB_PR_LEASE_SECONDS + 1)
    with django_capture_on_commit_callbacks() as again:
        assert certificates_publish_pending(now=later) == [certificate.pk]
    assert any("registry.publish_certificate_to_hub" in repr(callback) for callback in again)


def test_a_pr_the_hub_refused_is_not_asked_for_again(settings):
    settings.SPECHUB_HUB_PUBLISH = True
    certificate = finish_run(PairFactory.create(), verdict="certified").certificate
    certificate_hub_pr_refused(certificate_id=certificate.pk, error=UserError("hub:gated", "org/draft@main."))
    assert Certificate.objects.get(pk=certificate.pk).hub_pr_error.startswith("hub:gated")
    assert certificates_publish_pending(now=timezone.now() + timedelta(days=1)) == []
