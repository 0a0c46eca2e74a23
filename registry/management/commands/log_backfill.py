"""Append to the transparency log each certificate whose current file is not in it (those issued before the log).

Run once where the signing key is, after migrating to the log: `python manage.py log_backfill`.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from registry.certificates.services import certificates_log_backfill


class Command(BaseCommand):
    help = "Append every certificate not yet in the transparency log (issued before it), oldest first."

    def handle(self, *args: Any, **options: Any) -> None:
        appended = certificates_log_backfill()
        self.stdout.write(f"appended {appended} certificate(s) to the transparency log")
