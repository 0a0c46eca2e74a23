"""`manage.py demo`: migrate, load whatever demo data exists, and serve the catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

DEMO_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "demo"


class Command(BaseCommand):
    help = "Migrate the database, load the demo data, and serve the catalog."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addrport", default="127.0.0.1:8000", help="Where to serve (default 127.0.0.1:8000).")
        parser.add_argument("--no-serve", action="store_true", help="Prepare the database only.")

    def handle(self, *args: Any, addrport: str, no_serve: bool, **options: Any) -> None:
        Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        self._load_fixtures()
        if not no_serve:
            self.stdout.write(f"Serving the catalog on http://{addrport}/ (health at /healthz)")
            call_command("runserver", addrport, use_reloader=False)

    def _load_fixtures(self) -> None:
        fixtures = sorted(DEMO_FIXTURES.glob("*.json"))
        if not fixtures:
            self.stdout.write("No demo data yet: the catalog starts empty.")
            return
        call_command("loaddata", *map(str, fixtures), verbosity=0)
        self.stdout.write(f"Loaded {len(fixtures)} demo fixture(s).")
