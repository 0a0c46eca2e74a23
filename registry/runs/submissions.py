"""Writes for submissions: judge a draft at once, then register its pair and queue a certification."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from kernel.errors import UserError
from kernel.formats import Report, describe_draft
from kernel.formats.families import family_of
from kernel.formats.inputs import is_repo_id
from kernel.hub import HubClient
from kernel.repos import HubRepo, gate_check
from registry.accounts.selectors import submission_quota
from registry.accounts.services import user_lock
from registry.catalog.gate import hub_client, pair_judgement_store
from registry.catalog.services import hub_model_get_or_create, pair_get_or_create
from registry.models import HubModel, Role, RunTrigger, Submission, SubmissionSource, SubmissionStatus
from registry.runs.services import run_create


def submission_create(
    *,
    user: Any,
    repo_id: str,
    revision: str = "main",
    verifier_repo_id: str = "",
    verifier_revision: str = "main",
    method: str | None = None,
    num_speculative_tokens: int | None = None,
    hardware: str = "cpu",
    client: HubClient | None = None,
    source: str = SubmissionSource.USER,
    certify: bool = True,
) -> Submission:
    """Judge the draft against its verifier now; queue a run only for a compatible, new pair (unless not `certify`).

    The verifier defaults to the one the draft's speculators config names. Hub
    errors (missing repo, gated, unreachable) propagate; nothing is written then.
    """
    client = client or hub_client()
    draft = HubRepo(client, repo_id, client.resolve(repo_id, revision))
    verifier_id = verifier_repo_id or _named_verifier(draft)
    if not is_repo_id(verifier_id):  # named by the draft's config: hostile until checked, never sent to the Hub
        refused = Submission(submitted_by=user, source=source, repo_id=repo_id, revision=revision,
                             verifier_revision=verifier_revision)  # fmt: skip
        message = f"verifier.name_or_path {verifier_id[:200]!r} is a local path or URL, not a Hub repo id."
        return _refuse(refused, "gate:verifier-local-path", message)
    verifier = HubRepo(client, verifier_id, client.resolve(verifier_id, verifier_revision))
    report = gate_check(verifier=verifier, verifier_id=verifier_id, draft=draft, method=method, k=num_speculative_tokens)
    submission = Submission(
        submitted_by=user,
        source=source,
        repo_id=repo_id,
        revision=revision,
        verifier_repo_id=verifier_id,
        verifier_revision=verifier_revision,
        validation_report=report.as_dict(),
    )
    if not report.compatible:
        return _refuse(submission, report.errors[0].code, report.errors[0].message)
    with transaction.atomic():
        within_submission_quota(user)
        family = family_of(_architectures(verifier.metadata().config)) or ""
        return _register(submission, report, draft.revision, verifier.revision, hardware if certify else None, family)


class SubmissionQuotaExceeded(Exception):
    """The user has used every submission of the window (SPECHUB_SUBMISSION_RATE)."""

    def __init__(self, used: int, limit: int, period: str) -> None:
        self.message = f"You have used your {limit} submissions per {period}; try again later."
        super().__init__(self.message)
        self.used, self.limit, self.period = used, limit, period


def within_submission_quota(user: Any) -> None:
    """Check the quota inside the transaction that stores the submission, one at a time per user.

    Locking the user's row makes two requests of one user (in two web processes) count each
    other; the throttle's earlier check is only a fast path.
    """
    if user is None or not getattr(user, "pk", None):
        return
    user_lock(user)
    quota = submission_quota(user=user)
    if int(quota["used"]) >= int(quota["limit"]):
        raise SubmissionQuotaExceeded(int(quota["used"]), int(quota["limit"]), str(quota["period"]))


def _refuse(submission: Submission, code: str, message: str) -> Submission:
    submission.status = SubmissionStatus.REFUSED
    submission.refusal_code, submission.refusal_message = code, message
    with transaction.atomic():
        within_submission_quota(submission.submitted_by)
        submission.save()
    return submission


def _named_verifier(draft: HubRepo) -> str:
    named = describe_draft(draft.metadata().config).verifier_name
    if not named:
        raise UserError("run:invalid-spec", "The draft's config names no verifier; give the verifier's repo id.")
    return named


def _register(
    submission: Submission, report: Report, draft_sha: str, verifier_sha: str, hardware: str | None, family: str
) -> Submission:
    """Store the pair; queue its certification on `hardware` (None: listed as gate-passed, not yet measured).

    Both models carry the verifier's family: a draft is listed under the family it drafts for."""
    verifier = _pinned(submission.verifier_repo_id, verifier_sha, Role.VERIFIER, report, family)
    role = Role.SPECULATOR if report.format.kind == "speculators" else Role.DRAFT
    draft = _pinned(submission.repo_id, draft_sha, role, report, family)
    pair, created = pair_get_or_create(
        verifier=verifier, draft=draft, method=report.method or "draft_model", num_speculative_tokens=report.k
    )
    submission.pair = pair
    if not created:
        submission.status = SubmissionStatus.DUPLICATE
        submission.save()
        return submission
    pair_judgement_store(pair=pair, report=report)
    if hardware is not None:
        submission.run = run_create(
            pair=pair, hardware=hardware, trigger=RunTrigger.SUBMISSION, requested_by=submission.submitted_by
        )
    submission.status = SubmissionStatus.ACCEPTED
    submission.save()
    return submission


def _architectures(config: object) -> tuple[str, ...]:
    found = config.get("architectures") if isinstance(config, dict) else None
    return tuple(a for a in found if isinstance(a, str)) if isinstance(found, list) else ()


def _pinned(repo_id: str, sha: str, role: str, report: Report, family: str) -> HubModel:
    architectures = report.format.architectures if role != Role.VERIFIER else None
    architecture = (architectures or ("",))[0][:100]
    model, _ = hub_model_get_or_create(repo_id=repo_id, sha=sha, role=role, architecture=architecture, family=family)
    return model
