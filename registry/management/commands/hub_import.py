"""`manage.py hub_import`: gate drafts from a list of Hub repos and/or a Hub collection into the catalog."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from kernel.errors import RunError
from registry.catalog.imports import collection_repo_ids, hub_import


class Command(BaseCommand):
    help = "Import drafts from the Hub: each new repo or commit is gated; gate-passing pairs are listed (--certify: queued)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--repo", action="append", default=[], help="A draft's Hub repo id (repeatable).")
        parser.add_argument("--collection", help="A Hub collection's slug, e.g. org/speculators-0123456789abcdef.")
        parser.add_argument("--verifier", default="", help="The verifier for drafts whose config names none.")
        parser.add_argument("--certify", action="store_true", help="Queue a certification of each new gate-passing pair.")

    def handle(self, *args: Any, **options: Any) -> None:
        repos = list(options["repo"])
        if options["collection"]:
            try:
                repos += collection_repo_ids(slug=options["collection"], endpoint=settings.SPECHUB_HUB_ENDPOINT,
                                             token=settings.SPECHUB_HUB_READ_TOKEN or False)  # fmt: skip
            except RunError as error:
                raise CommandError(f"{error.code}: {error.message}") from None
        if not repos:
            raise CommandError("Name repos with --repo or a collection with --collection.")
        for found in hub_import(repo_ids=repos, verifier=options["verifier"], certify=options["certify"]):
            self.stdout.write(f"{found.outcome:<7} {found.repo_id}: {found.detail}")
