"""Writes for telling a pair's owner what happened: signed webhooks, retried with backoff, and email."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import httpx
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from kernel import certificates
from registry import outbound, webhooks
from registry.dispatch import task_send_on_commit
from registry.models import DeliveryState, Pair, WebhookDelivery, WebhookEndpoint, WebhookEvent
from registry.selectors import pair_owner, pair_public_url

logger = logging.getLogger(__name__)
# Events worth an email as well as a webhook: the ones an owner must act on.
_EMAILED = {WebhookEvent.REGRESSED, WebhookEvent.EXPIRED}


def pair_event_notify(*, pair: Pair, event: WebhookEvent, subject: str, data: Mapping[str, object]) -> list[WebhookDelivery]:
    """Queue one delivery of `event` per subscribed endpoint of the pair's owner, and email them.

    `subject` names what the event is about (a run, a certificate): raising the same
    event about the same subject again delivers nothing new.
    """
    owner = pair_owner(pair=pair)
    if owner is None:
        return []
    body = {"event": event.value, "subject": subject, "pair": pair.pk, "url": pair_public_url(pair=pair), "data": data}
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
    if created and event in _EMAILED and owner.email:
        transaction.on_commit(partial(_email, owner.email, event, pair))
    return created


def _email(address: str, event: WebhookEvent, pair: Pair) -> None:
    subject = f"[SpecHub] {event.label}: {pair}"
    send_mail(
        subject, f"{event.label} for {pair}.\n\nDetails: {pair_public_url(pair=pair)}\n", None, [address], fail_silently=True
    )


def webhook_deliver(*, delivery_id: int, now: datetime | None = None) -> str:
    """Attempt one due delivery; record the outcome and when to retry. Return its state."""
    now = now or timezone.now()
    delivery = _claim(delivery_id, now)
    if delivery is None:
        return "not-due"
    status, error = _post(delivery)
    return _record(delivery, status, error, now)


def _claim(delivery_id: int, now: datetime) -> WebhookDelivery | None:
    """Lease a due delivery so a concurrent sweep cannot send it twice at once."""
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update(skip_locked=True)
            .select_related("endpoint")
            .filter(pk=delivery_id, state=DeliveryState.PENDING, next_attempt_at__lte=now)
            .first()
        )
        if delivery is None:
            return None
        delivery.attempts += 1
        delivery.next_attempt_at = now + timedelta(seconds=2 * settings.SPECHUB_WEBHOOK_TIMEOUT)
        delivery.save(update_fields=["attempts", "next_attempt_at"])
    return delivery


def _post(delivery: WebhookDelivery) -> tuple[int | None, str]:
    body = delivery.body.encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "SpecHub-Webhooks/1",
        webhooks.EVENT_HEADER: delivery.event,
        webhooks.DELIVERY_HEADER: str(delivery.pk),
        webhooks.SIGNATURE_HEADER: webhooks.signature(delivery.endpoint.secret, int(time.time()), body),
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


def _record(delivery: WebhookDelivery, status: int | None, error: str, now: datetime) -> str:
    delivery.last_status, delivery.last_error = status, error
    if not error:
        delivery.state, delivery.delivered_at, delivery.next_attempt_at = DeliveryState.DELIVERED, timezone.now(), None
    elif delivery.attempts >= settings.SPECHUB_WEBHOOK_MAX_ATTEMPTS:
        delivery.state, delivery.next_attempt_at = DeliveryState.FAILED, None
    else:
        backoff = settings.SPECHUB_WEBHOOK_BACKOFF_SECONDS * 2 ** (delivery.attempts - 1)
        delivery.next_attempt_at = now + timedelta(seconds=backoff)
    if error:
        logger.warning("webhook delivery %s attempt %s failed: %s", delivery.pk, delivery.attempts, error)
    delivery.save(update_fields=["last_status", "last_error", "state", "delivered_at", "next_attempt_at"])
    return str(delivery.state)


def webhooks_deliver_due(*, now: datetime | None = None) -> list[int]:
    """Attempt every pending delivery whose retry is due; return their ids."""
    now = now or timezone.now()
    due = list(
        WebhookDelivery.objects.filter(state=DeliveryState.PENDING, next_attempt_at__lte=now).values_list("pk", flat=True)[:100]
    )
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
    return WebhookEndpoint.objects.create(owner=owner, url=url, events=events, secret=secrets.token_hex(32))


def webhook_endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """Remove an endpoint and its deliveries, delivered or not."""
    endpoint.delete()
