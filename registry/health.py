"""Liveness of the parts SpecHub needs: the database and the broker."""

from __future__ import annotations

from django.conf import settings
from django.db import connection

from registry.celery import app


def database_status() -> str:
    """Return 'ok', or why the database cannot answer."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means "down", and we report it
        return f"down: {type(exc).__name__}: {exc}".strip()
    return "ok"


def broker_status() -> str:
    """Return 'ok', 'in-process' without a broker, or why the broker cannot answer."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return "in-process"
    try:
        with app.connection_for_write() as conn:
            # One quick try: a health probe must answer fast, not wait out retries.
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, interval_max=0, timeout=2)
    except Exception as exc:  # noqa: BLE001
        return f"down: {type(exc).__name__}: {exc}".strip()
    return "ok"


def health_report() -> dict[str, str]:
    """Return each part's status."""
    return {"database": database_status(), "broker": broker_status()}
