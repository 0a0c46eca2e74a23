"""Rate limits that hold across processes and restarts.

Submissions are counted in the database (the rows the quota page shows), so a request refused
by validation costs nothing and every gunicorn worker sees the same count. The other scoped
limits count in the shared cache (Redis when configured).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from registry.accounts.selectors import submission_quota, submission_window
from registry.models import Submission


class SubmissionQuota(BaseThrottle):
    """At most SPECHUB_SUBMISSION_RATE stored submissions per user in its window."""

    def __init__(self) -> None:
        self.retry_after: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return True  # the view's permission refuses anonymous callers first
        quota = submission_quota(user=request.user)
        if int(quota["used"]) < int(quota["limit"]):
            return True
        self.retry_after = self.seconds_until_a_slot_frees(request.user)
        return False

    def wait(self) -> float | None:
        return self.retry_after

    @staticmethod
    def seconds_until_a_slot_frees(user: Any) -> float:
        window = submission_window()
        oldest = Submission.objects.filter(submitted_by=user, created_at__gte=timezone.now() - window).order_by("created_at")
        first = oldest.values_list("created_at", flat=True).first()
        if first is None:
            return 1.0
        return max(1.0, (first + window - timezone.now()) / timedelta(seconds=1))
