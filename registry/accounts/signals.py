"""What a change to an account sets off: a deactivated account's machines let go of the runs they hold at once."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models.signals import post_save
from django.dispatch import receiver

from registry.fleet.services import owner_leases_release


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def account_saved(sender: Any, instance: Any, update_fields: frozenset[str] | None = None, **_: Any) -> None:
    """An account saved inactive (staff unticked "active"): its workers' calls are refused from now on, so the runs
    they hold go back to the queue now rather than when their heartbeats go quiet. A bulk update() sends no signal:
    the stale sweep then re-queues those runs within SPECHUB_STALE_AFTER_SECONDS."""
    if instance.is_active or (update_fields is not None and "is_active" not in update_fields):
        return
    owner_leases_release(owner=instance)
