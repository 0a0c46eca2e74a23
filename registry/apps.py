from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _install_schedules(sender: AppConfig, **kwargs: Any) -> None:
    from registry.runs.schedules import schedules_install

    schedules_install()


class RegistryConfig(AppConfig):
    name = "registry"
    verbose_name = "SpecHub registry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Every task is registered under its name before a service sends one by name (registry.dispatch), and a
        # deactivated account's machines let go of their runs at once (registry/accounts/signals.py).
        from registry import tasks  # noqa: F401
        from registry.accounts import signals  # noqa: F401

        # Beat reads its schedule from the database: every migrate keeps it current with the settings.
        post_migrate.connect(_install_schedules, sender=self)
