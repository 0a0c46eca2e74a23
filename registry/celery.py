"""The Celery app: queues per hardware class, late acks, one message at a time."""

from __future__ import annotations

import os

from celery import Celery
from django.conf import settings
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")

app = Celery("spechub")


# Tasks that talk to the outside world on an owner's behalf: they share the notifications queue.
NOTIFICATION_TASKS = (
    "registry.deliver_webhook",
    "registry.deliver_due_webhooks",
    "registry.send_due_emails",
)


def hardware_queues() -> list[str]:
    """Return the queues certifications run on: cpu, and one per GPU class in settings."""
    return ["cpu", *(f"gpu.{name}" for name in settings.SPECHUB_GPU_CLASSES)]


def queue_names() -> list[str]:
    """Return every queue: default, the hardware queues, and the notifications queue."""
    return list(dict.fromkeys(["default", *hardware_queues(), settings.SPECHUB_NOTIFICATIONS_QUEUE]))


def celery_config() -> dict[str, object]:
    """Return the Celery configuration built from SpecHub's settings."""
    return dict(
        broker_url=settings.CELERY_BROKER_URL or "filesystem://",
        broker_transport_options=_redis_options() if settings.CELERY_BROKER_URL else _queue_folders(),
        broker_connection_retry_on_startup=True,
        task_always_eager=settings.CELERY_TASK_ALWAYS_EAGER,
        # In-process runs record their failures on the run; they must not
        # surface as errors in the web request that queued them.
        task_eager_propagates=False,
        task_acks_late=True,
        # A worker killed mid-task must give the message back, not drop it.
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue="default",
        task_routes={name: {"queue": settings.SPECHUB_NOTIFICATIONS_QUEUE} for name in NOTIFICATION_TASKS},
        task_queues=[Queue(name, routing_key=name) for name in queue_names()],
        task_serializer="json",
        accept_content=["json"],
        result_backend=None,
        task_ignore_result=True,
        worker_hijack_root_logger=False,
        beat_scheduler="django_celery_beat.schedulers:DatabaseScheduler",
        timezone="UTC",
    )


def _queue_folders() -> dict[str, object]:
    """The embedded default's queue: one file per message under var/queue/.

    Kombu's filesystem transport rather than its SQLAlchemy one: it needs no package more, and
    it leaves the SQLite database to Django alone (a second writer polling it would contend
    with every run's progress updates for SQLite's single write lock).
    """
    messages, control = settings.SPECHUB_QUEUE_DIR / "messages", settings.SPECHUB_QUEUE_DIR / "control"
    for folder in (messages, control):
        folder.mkdir(parents=True, exist_ok=True)
    return {"data_folder_in": str(messages), "data_folder_out": str(messages), "control_folder": str(control)}


def _redis_options() -> dict[str, object]:
    transport: dict[str, object] = {
        "visibility_timeout": settings.CELERY_VISIBILITY_TIMEOUT,
        # Sweep for a lost worker's messages every N seconds (kombu's default is ~100 s).
        "unacked_restore_interval": settings.CELERY_UNACKED_RESTORE_SECONDS,
        "unacked_restore_throttle": 1,
        # Honour message priorities (0 first, 9 last): re-certifications wait behind submissions.
        "priority_steps": list(range(10)),
        "sep": ":",
        "queue_order_strategy": "priority",
    }
    if settings.CELERY_BROKER_KEY_PREFIX:
        transport["global_keyprefix"] = settings.CELERY_BROKER_KEY_PREFIX
    return transport


# Lazily: settings are read only when Celery first needs its configuration.
app.add_defaults(celery_config)
app.autodiscover_tasks(["registry"])
