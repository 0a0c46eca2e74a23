"""`manage.py demo`: migrate, put the toy zoo in the catalog, and serve it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from registry.services.demo import demo_catalog_load

ZOO = Path(settings.BASE_DIR) / "zoo" / "models"


class Command(BaseCommand):
    help = "Migrate the database, register the toy zoo's pairs, and serve the catalog."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addrport", default="127.0.0.1:8000", help="Where to serve (default 127.0.0.1:8000).")
        parser.add_argument("--no-serve", action="store_true", help="Prepare the database only.")

    def handle(self, *args: Any, addrport: str, no_serve: bool, **options: Any) -> None:
        Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        if (ZOO / "BUILD.json").exists():
            pairs = demo_catalog_load(zoo_dir=ZOO)
            self.stdout.write(f"The catalog holds the toy zoo's {len(pairs)} pairs.")
        else:
            self.stdout.write(f"No toy zoo at {ZOO} (run `make zoo`): the catalog starts empty.")
        if not no_serve:
            self.stdout.write(f"Serving the catalog on http://{addrport}/ (health at /healthz)")
            call_command("runserver", addrport, use_reloader=False)
