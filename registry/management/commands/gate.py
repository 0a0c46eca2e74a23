"""`manage.py gate`: judge a draft/verifier pair before any GPU time.

Exit status: 0 compatible (warnings and info allowed), 1 incompatible (a bad,
missing or hostile config is a finding), 2 the gate could not read its inputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from kernel.errors import InfraError, RunError
from kernel.formats import Report
from kernel.formats.inputs import is_repo_id
from kernel.formats.vllm_support import DRAFTLESS_METHODS, METHODS
from kernel.repos import HubRepo, LocalRepo, RepoSource, gate_check
from registry.catalog.gate import hub_client

COULD_NOT_JUDGE = 2


class Command(BaseCommand):
    help = "Judge whether a draft and a verifier can be served together by the pinned vLLM, with reasons."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--draft", help="Draft repo id or local folder (omit for ngram/suffix).")
        parser.add_argument("--verifier", required=True, help="Verifier repo id or local folder.")
        parser.add_argument("--draft-revision", default="main", help="Branch, tag or sha (Hub only; default main).")
        parser.add_argument("--verifier-revision", default="main", help="Branch, tag or sha (Hub only; default main).")
        parser.add_argument("--verifier-id", help="The verifier's repo id, needed when --verifier is a local folder.")
        parser.add_argument("--method", choices=sorted(METHODS), help="vLLM method; derived from the draft by default.")
        parser.add_argument("--k", type=int, help="num_speculative_tokens; the draft's own or 4 by default.")
        parser.add_argument("--json", action="store_true", help="Print the full report as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        verifier, verifier_id = self._verifier(options)
        draft = self._source(options["draft"], options["draft_revision"], "--draft") if options["draft"] else None
        if draft is None and options["method"] not in DRAFTLESS_METHODS:
            raise CommandError("Name a --draft, or pick --method ngram or suffix.", returncode=COULD_NOT_JUDGE)
        try:
            report = gate_check(verifier=verifier, verifier_id=verifier_id, draft=draft, method=options["method"], k=options["k"])
        except RunError as exc:
            self._print_error(exc, as_json=options["json"])
            raise SystemExit(COULD_NOT_JUDGE if isinstance(exc, InfraError) else 1) from None
        self._print(report, as_json=options["json"])
        if not report.compatible:
            raise SystemExit(1)

    def _verifier(self, options: dict[str, Any]) -> tuple[RepoSource, str]:
        source = self._source(options["verifier"], options["verifier_revision"], "--verifier", options["verifier_id"])
        verifier_id = options["verifier_id"] or source.repo_id
        if not is_repo_id(verifier_id):
            raise CommandError(
                "--verifier is a local folder: pass --verifier-id ORG/NAME so the draft's verifier name can be checked.",
                returncode=COULD_NOT_JUDGE,
            )
        return source, verifier_id

    def _source(self, where: str, revision: str, flag: str, repo_id: str | None = None) -> RepoSource:
        """Return a local folder when `where` is one, else a Hub repo."""
        path = Path(where)
        if path.is_dir():
            return LocalRepo(path, repo_id or str(path))
        if not is_repo_id(where):
            raise CommandError(f"{flag} {where!r} is neither a folder nor a Hub repo id (org/name).", returncode=COULD_NOT_JUDGE)
        return HubRepo(hub_client(), where, revision)

    def _print(self, report: Report, *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
            return
        verdict = "compatible" if report.compatible else "INCOMPATIBLE"
        self.stdout.write(f"{verdict}: method {report.method}, k={report.k}, {len(report.findings)} finding(s)")
        for found in report.findings:
            self.stdout.write(f"  [{found.severity}] {found.code}: {found.message}")
            if found.hint:
                self.stdout.write(f"      fix: {found.hint}")
        if report.recipe:
            self.stdout.write(f"serve with:\n  {report.recipe.serve}")
            if report.recipe.serve_short:
                self.stdout.write(f"or, from the speculators config alone:\n  {report.recipe.serve_short}")

    def _print_error(self, exc: RunError, *, as_json: bool) -> None:
        document = {"compatible": False, "error": {"code": exc.code, "fault": str(exc.fault), "message": exc.message}}
        if as_json:
            self.stdout.write(json.dumps(document, indent=2))
        else:
            self.stderr.write(f"could not judge ({exc.code}): {exc.message}")
