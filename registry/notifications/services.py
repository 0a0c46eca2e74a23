"""Writes for telling a pair's owner what happened: signed webhooks, retried with backoff, and email."""

from __future__ import annotations

import logging
import smtplib
import time
from datetime import datetime, timedelta
from typing import Any, TypeVar

import httpx
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from kernel import certificates
from registry.catalog.selectors import pair_owner, pair_public_url
from registry.dispatch import task_send_on_commit
from registry.models import DeliveryState, EmailNotice, Outbound, Pair, WebhookDelivery, WebhookEndpoint, WebhookEvent
from registry.notifications import outbound
from registry.notifications import signing as webhooks
from registry.notifications.payloads import Certified, DeploymentEvent, Expired, PairEvent, Regressed, Revoked

logger = logging.getLogger(__name__)
Row = TypeVar("Row", bound=Outbound)
# Events worth an email as well as a webhook: the ones an owner must act on.
_EMAILED = {WebhookEvent.REGRESSED, WebhookEvent.EXPIRED, WebhookEvent.REVOKED}


def pair_event_notify(
    *, pair: Pair, event: WebhookEvent, subject: str, data: Certified | Regressed | Expired | Revoked
) -> list[WebhookDelivery]:
    """Queue one delivery of `event` per subscribed endpoint of the pair's owner, and email them.

    `subject` names what the event is about (a run, a certificate): raising the same
    event about the same subject again delivers nothing new.
    """
    owner = pair_owner(pair=pair)
    if owner is None:
        return []
    body: PairEvent = {"event": event.value, "subject": subject, "pair": pair.pk, "url": pair_public_url(pair=pair), "data": data}
    created = owner_event_notify(owner=owner, event=event, subject=subject, body=body)
    if created and event in _EMAILED and owner.email:
        _email_queue(owner.email, event, pair)
    return created


def owner_event_notify(
    *, owner: Any, event: WebhookEvent, subject: str, body: PairEvent | DeploymentEvent
) -> list[WebhookDelivery]:
    """Queue one delivery of `body` per endpoint of `owner` subscribed to `event`; the same subject again, none."""
    created = []
    for endpoint in WebhookEndpoint.objects.filter(owner=owner, active=True):
        if endpoint.events and event.value not in endpoint.events:
            continue
        delivery, new = WebhookDelivery.objects.get_or_create(
            endpoint=endpoint,
            dedupe_key=f"{event.value}:{subject}",
            defaults={"event": event, "body": certificates.canonical(body).decode(), "next_attempt_at": timezone.now()},
        )
        if new:
            created.append(delivery)
            task_send_on_commit("registry.deliver_webhook", delivery.pk)
    return created


def _email_queue(address: str, event: WebhookEvent, pair: Pair) -> EmailNotice:
    """Write the email in this transaction and try it once the transaction commits, here: a mail
    relay answers at once. A failure leaves the row for the sweep, which retries with backoff."""
    notice = EmailNotice.objects.create(
        to=address,
        subject=f"[SpecHub] {event.label}: {pair}"[:200],
        body=f"{event.label} for {pair}.\n\nDetails: {pair_public_url(pair=pair)}\n",
        next_attempt_at=timezone.now(),
    )

    def send() -> None:
        email_send(notice_id=notice.pk)

    transaction.on_commit(send, robust=True)
    return notice


def email_send(*, notice_id: int, now: datetime | None = None) -> str:
    """Attempt one due email; record the outcome and when to retry. Return its state."""
    now = now or timezone.now()
    notice = _claim(EmailNotice.objects.all(), notice_id, now)
    if notice is None:
        return "not-due"
    try:
        send_mail(notice.subject, notice.body, None, [notice.to])
    except (OSError, smtplib.SMTPException) as exc:  # SMTP, DNS, a refused connection: retried with backoff
        return _record(notice, f"{type(exc).__name__}: {exc}", now)
    return _record(notice, "", now)


def emails_send_due(*, now: datetime | None = None) -> list[int]:
    """Attempt every pending email whose retry is due; return their ids."""
    now = now or timezone.now()
    due = _due(EmailNotice.objects.all(), now)
    for notice_id in due:
        email_send(notice_id=notice_id, now=now)
    return due


def webhook_deliver(*, delivery_id: int, now: datetime | None = None) -> str:
    """Attempt one due delivery; record the outcome and when to retry. Return its state."""
    now = now or timezone.now()
    delivery = _claim(WebhookDelivery.objects.select_related("endpoint"), delivery_id, now)
    if delivery is None:
        return "not-due"
    status, error = _post(delivery)
    delivery.last_status = status
    return _record(delivery, error, now, also=["last_status"])


def _claim(rows: QuerySet[Row], pk: int, now: datetime) -> Row | None:
    """Lease a due row so a concurrent sweep cannot send it twice at once."""
    with transaction.atomic():
        row = (
            rows.select_for_update(skip_locked=True).filter(pk=pk, state=DeliveryState.PENDING, next_attempt_at__lte=now).first()
        )
        if row is None:
            return None
        row.attempts += 1
        row.next_attempt_at = now + timedelta(seconds=2 * settings.SPECHUB_WEBHOOK_TIMEOUT)
        row.save(update_fields=["attempts", "next_attempt_at"])
    return row


def _post(delivery: WebhookDelivery) -> tuple[int | None, str]:
    body, now, secret = delivery.body.encode(), int(time.time()), delivery.endpoint.secret
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "SpecHub-Webhooks/1",
        webhooks.EVENT_HEADER: delivery.event,
        webhooks.DELIVERY_HEADER: str(delivery.pk),
        webhooks.SIGNATURE_HEADER: webhooks.signature(secret, now, body),
        # The same id on every retry of this delivery, so a receiver can drop the repeats.
        **webhooks.standard_headers(secret, f"msg_{delivery.pk}", now, body),
    }
    try:
        status = outbound.post(
            delivery.endpoint.url,
            content=body,
            headers=headers,
            timeout=settings.SPECHUB_WEBHOOK_TIMEOUT,
            allowed_hosts=settings.SPECHUB_WEBHOOK_ALLOWED_HOSTS,
        )
    except outbound.RefusedAddress as refused:
        return None, f"refused: {refused}"
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return status, "" if 200 <= status < 300 else f"HTTP {status}"


def _record(row: Outbound, error: str, now: datetime, also: list[str] | None = None) -> str:
    """Store an attempt's outcome: delivered, failed for good, or due again after a growing backoff."""
    row.last_error = error
    if not error:
        row.state, row.delivered_at, row.next_attempt_at = DeliveryState.DELIVERED, timezone.now(), None
    elif row.attempts >= settings.SPECHUB_WEBHOOK_MAX_ATTEMPTS:
        row.state, row.next_attempt_at = DeliveryState.FAILED, None
    else:
        backoff = settings.SPECHUB_WEBHOOK_BACKOFF_SECONDS * 2 ** (row.attempts - 1)
        row.next_attempt_at = now + timedelta(seconds=backoff)
    if error:
        logger.warning("%s attempt %s failed: %s", row, row.attempts, error)
    row.save(update_fields=["last_error", "state", "delivered_at", "next_attempt_at", *(also or [])])
    return str(row.state)


def _due(rows: QuerySet[Row], now: datetime) -> list[int]:
    return list(rows.filter(state=DeliveryState.PENDING, next_attempt_at__lte=now).values_list("pk", flat=True)[:100])


def webhooks_deliver_due(*, now: datetime | None = None) -> list[int]:
    """Attempt every pending delivery whose retry is due; return their ids."""
    now = now or timezone.now()
    due = _due(WebhookDelivery.objects.all(), now)
    for delivery_id in due:
        webhook_deliver(delivery_id=delivery_id, now=now)
    return due


def webhook_endpoint_create(*, owner: Any, url: str, events: list[str]) -> WebhookEndpoint:
    """Register an endpoint for the owner's pairs, with a fresh signing secret; refuse internal addresses."""
    refusal = outbound.url_refusal(url, settings.SPECHUB_WEBHOOK_ALLOWED_HOSTS)
    if refusal:
        raise ValidationError(f"Webhook URL refused: {refusal}", code="webhook-url-refused")
    if WebhookEndpoint.objects.filter(owner=owner).count() >= settings.SPECHUB_WEBHOOKS_PER_USER:
        limit = settings.SPECHUB_WEBHOOKS_PER_USER
        raise ValidationError(f"You have {limit} webhook endpoints, the most allowed; delete one first.", code="webhook-limit")
    return WebhookEndpoint.objects.create(owner=owner, url=url, events=events, secret=webhooks.new_secret())


def webhook_endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """Remove an endpoint and its deliveries, delivered or not."""
    endpoint.delete()
