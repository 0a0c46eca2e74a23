"""Send Celery tasks by name, so services never import task modules and tasks may import services."""

from __future__ import annotations

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
    """Send task `name` once the current transaction commits, so the worker sees the rows it reads.

    Robust: a broker error is logged and the later hooks still run. Whatever is sent this way is
    also a row a sweep finds again (a delivery, an email, a certificate without its PR).
    """

    def send() -> None:
        task_send(name, *args, **options)

    # Django names a failing robust hook by its __qualname__ (a partial has none); say which task it was.
    send.__qualname__ = f"task_send({name!r})"
    transaction.on_commit(send, robust=True)
