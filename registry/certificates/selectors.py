"""Reads about certificates: which ones a user may see."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from registry.models import Certificate, CertificationRun


def visible_certificates(user: Any) -> QuerySet[Certificate]:
    """Certificates of the runs `user` may see: a private workload's are its owner's (and staff's)."""
    return Certificate.objects.filter(run__in=CertificationRun.objects.visible_to(user))
