from __future__ import annotations

from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    verbose_name = "SpecHub registry"
    default_auto_field = "django.db.models.BigAutoField"
