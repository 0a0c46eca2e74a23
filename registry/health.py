"""Readiness of the parts SpecHub needs: the database (required) and the broker (its loss only delays runs).

Statuses are words, never exception text: the probes are public. The reason goes to the log.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import connection

from registry.celery import app

logger = logging.getLogger(__name__)


def database_status() -> str:
    """Return 'ok' or 'down'."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:  # any failure means "down"; the log says why
        logger.warning("readiness: the database does not answer", exc_info=True)
        return "down"
    return "ok"


def broker_status() -> str:
    """Return 'ok', 'in-process' without a broker, or 'down'."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return "in-process"
    try:
        with app.connection_for_write() as conn:
            # One quick try: a health probe must answer fast, not wait out retries.
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, interval_max=0, timeout=2)
    except Exception:  # any failure means "down"; the log says why
        logger.warning("readiness: the broker does not answer", exc_info=True)
        return "down"
    return "ok"


def readiness() -> tuple[int, dict[str, object]]:
    """Return the HTTP status and body of the readiness probe.

    Without the database nothing works (503). Without the broker submissions are still taken
    and the dispatch sweep sends their runs later, so the web tier stays ready, 'degraded'.
    """
    parts = {"database": database_status(), "broker": broker_status()}
    down = [part for part, status in parts.items() if status == "down"]
    if "database" in down:
        return 503, {"status": "down", "parts": parts, "down": down}
    return 200, {"status": "degraded" if down else "ok", "parts": parts, **({"down": down} if down else {})}
