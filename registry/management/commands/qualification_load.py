"""`manage.py qualification_load FILE`: store a qualification record that `python -m workers qualify` wrote.

The runs already finished on that build, hardware class and dtype are judged again with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from registry.runs.qualifications import QualificationRefused, qualification_record


class Command(BaseCommand):
    help = "Store an engine qualification record (its digest checked) and judge the runs on its build again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="The record `python -m workers qualify --out FILE` wrote.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            document = json.loads(options["file"].read_text())
        except (OSError, ValueError) as exc:
            raise CommandError(f"Cannot read {options['file']} as JSON: {exc}.") from None
        if not isinstance(document, dict):
            raise CommandError(f"{options['file']} holds no qualification record: a JSON object is expected.")
        try:
            row = qualification_record(document=document)
        except QualificationRefused as refused:
            raise CommandError(str(refused)) from None
        outcome = "every control passes" if row.passed else f"fails {', '.join(row.failing)}"
        self.stdout.write(f"{row.engine} {row.engine_build} on {row.hardware} ({row.dtype}): {outcome}; digest {row.digest}")
