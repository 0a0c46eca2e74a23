"""Reads about users: their submission quota and its window."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from registry.models import (
    Submission,
)


def submission_window() -> timedelta:
    """Return the window SPECHUB_SUBMISSION_RATE ('20/hour') counts submissions over."""
    period = settings.SPECHUB_SUBMISSION_RATE.split("/")[1]
    return timedelta(seconds={"s": 1, "m": 60, "h": 3600, "d": 86400}[period[0]])


def submission_quota(*, user: Any) -> dict[str, int | str]:
    """Return how many submissions the user made in the rate window, and the limit (SPECHUB_SUBMISSION_RATE)."""
    count, period = settings.SPECHUB_SUBMISSION_RATE.split("/")
    used = Submission.objects.filter(submitted_by=user, created_at__gte=timezone.now() - submission_window()).count()
    return {"used": used, "limit": int(count), "period": period}
