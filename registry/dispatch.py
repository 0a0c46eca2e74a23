"""Send Celery tasks by name, so services never import task modules and tasks may import services."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import transaction

from registry.celery import app


def task_send(name: str, *args: Any, **options: Any) -> None:
    """Send task `name` with `args` now; `options` are apply_async's (queue, countdown, priority).

    A signature by name runs in-process under task_always_eager, as the embedded default needs;
    `send_task` would ignore that setting. Broker errors reach the caller.
    """
    app.signature(name, args=args, **options).apply_async()


def task_send_on_commit(name: str, *args: Any, **options: Any) -> None:
    """Send task `name` once the current transaction commits, so the worker sees the rows it reads."""
    transaction.on_commit(partial(task_send, name, *args, **options))
