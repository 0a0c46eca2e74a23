"""SpecHub's registry: the Django project and the catalog app."""

from __future__ import annotations

from registry.celery import app as celery_app

__all__ = ["celery_app"]
