"""`manage.py rejudge`: judge every finished run again under the rules this code holds.

After an upgrade that changes a rule (the sampling test's power, the fixed sequence over levels), the stored
documents still carry the old verdicts. Each run whose label or a property's outcome changes gets its document,
its pair's listing and its certificate (signed again by a worker) updated; the figures are never touched.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from kernel import result
from registry.runs.qualifications import runs_rejudge_all
from registry.runs.selectors import run_document


class Command(BaseCommand):
    help = "Judge every finished run again under the current rules; re-sign the certificates whose verdict changed."

    def handle(self, *args: Any, **options: Any) -> None:
        changed = runs_rejudge_all()
        for run in changed:
            judged = result.verdict(run_document(run))
            said = f"{judged.get('verdict')}; {'; '.join(judged.get('reasons', []))}" if judged else "no verdict"
            self.stdout.write(f"run {run.pk} ({run.pair}): now {said}")
        self.stdout.write(f"{len(changed)} run{'s' if len(changed) != 1 else ''} judged differently under the current rules.")
