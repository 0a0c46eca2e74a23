"""Writes made when a run finishes: the listing, the certificate, regressions, events, and the Hub PR."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from kernel.errors import RunError
from registry.catalog.gate import hub_client
from registry.catalog.selectors import pair_public_url
from registry.certificates.eval_results import eval_results_path, eval_results_yaml, model_card_section
from registry.certificates.services import certificate_issue
from registry.dispatch import task_send_on_commit
from registry.models import Certificate, CertificationRun, Regression, Verdict, WebhookEvent
from registry.notifications.payloads import Certified, ChangeFigures, Regressed
from registry.notifications.services import pair_event_notify
from registry.runs.regressions import run_regressions_record
from registry.runs.selectors import regression_detectable, run_headline, run_summary


def run_publish(*, run: CertificationRun) -> Certificate | None:
    """Publish a run that just finished, inside its transaction; return its certificate.

    A run on a user's own workload is private: it gets its certificate (which carries the workload's hash and
    counts, never its prompts) and nothing public: no listing, regression, webhook or Hub PR.
    """
    if run.workload_id is not None:
        return certificate_issue(run=run)
    pair_listing_update(run=run)
    certificate = certificate_issue(run=run)
    regressions = run_regressions_record(run=run)
    subject = f"run-{run.pk}"
    if regressions:
        regressed: Regressed = {"run": run.pk, "previous_run": regressions[0].previous_run_id,
                                "regressions": {r.metric: _change(r) for r in regressions}}  # fmt: skip
        pair_event_notify(pair=run.pair, event=WebhookEvent.REGRESSED, subject=subject, data=regressed)
    if certificate is not None and certificate.verdict == Verdict.CERTIFIED:
        headline = run_headline(run=run)
        certified: Certified = {"run": run.pk, "certificate_digest": certificate.digest,
                                "mean_acceptance_length": headline["mean_acceptance_length"],
                                "speedup": headline["speedup"]}  # fmt: skip
        pair_event_notify(pair=run.pair, event=WebhookEvent.CERTIFIED, subject=subject, data=certified)
    if certificate is not None and settings.SPECHUB_HUB_PUBLISH and run.pair.draft is not None:
        _hub_pr_dispatch(certificate)
    return certificate


def _change(regression: Regression) -> ChangeFigures:
    return {"previous": regression.previous, "current": regression.current, "change": regression.relative_change,
            "interval": regression.interval, "detectable_drop": regression_detectable(regression=regression)}  # fmt: skip


def _hub_pr_dispatch(certificate: Certificate) -> None:
    """Lease the certificate's PR to one task, sent after commit; the sweep sends it again if it is lost."""
    Certificate.objects.filter(pk=certificate.pk).update(hub_pr_dispatched_at=timezone.now())
    task_send_on_commit("registry.publish_certificate_to_hub", certificate.pk)


def certificates_publish_pending(*, now: datetime | None = None) -> list[int]:
    """Dispatch the PR of every certificate that should have one and has none, once its lease lapsed."""
    if not settings.SPECHUB_HUB_PUBLISH:
        return []
    lapsed = (now or timezone.now()) - timedelta(seconds=settings.SPECHUB_HUB_PR_LEASE_SECONDS)
    pending = Certificate.objects.filter(
        pair__draft__isnull=False, run__workload__isnull=True, hub_pr_url="", hub_pr_error=""
    ).filter(Q(hub_pr_dispatched_at__isnull=True) | Q(hub_pr_dispatched_at__lt=lapsed))
    dispatched = []
    for certificate in pending[:100]:
        with transaction.atomic():
            _hub_pr_dispatch(certificate)
        dispatched.append(certificate.pk)
    return dispatched


def certificate_hub_pr_refused(*, certificate_id: int, error: RunError) -> None:
    """Record why the Hub refused the PR, so the sweep does not ask again."""
    Certificate.objects.filter(pk=certificate_id).update(hub_pr_error=f"{error.code}: {error.message}"[:2000])


def pair_listing_update(*, run: CertificationRun) -> None:
    """Copy a finished run's headline figures onto its pair, which the catalog lists and filters."""
    pair = run.pair
    pair.latest_run = run
    summary = run_summary(run)
    pair.verdict = (summary["verdict"] if summary else None) or ""
    pair.mean_acceptance_length = summary["mean_acceptance_length"] if summary else None
    pair.speedup = summary["speedup"].get("1") if summary else None
    pair.hardware, pair.engine_version = run.hardware, run.engine_version
    pair.save(update_fields=["latest_run", "verdict", "speedup", "mean_acceptance_length", "hardware", "engine_version"])


def certificate_hub_pr_open(*, certificate_id: int) -> str:
    """Open a pull request adding the certificate to the draft's Hub repo; store and return its URL."""
    certificate = Certificate.objects.select_related("pair__draft", "pair__verifier", "run").get(pk=certificate_id)
    if certificate.hub_pr_url:
        return certificate.hub_pr_url  # a redelivered task must not open a second PR
    pair = certificate.pair
    if pair.draft is None:
        raise ValueError(f"Pair {pair.pk} has no draft repo to publish to.")
    if certificate.run.workload_id is not None:
        raise ValueError(f"Certificate {certificate.pk} is of a user's private workload; it is never published.")
    client = hub_client(token=settings.SPECHUB_HUB_TOKEN)
    files = {
        f"spechub/certificate-{certificate.run_id}.json": certificate.document.encode(),
        # The Hub shows these on the model page, with a badge.
        eval_results_path(certificate): eval_results_yaml(certificate),
    }
    certificate.hub_pr_url = client.open_pr(
        pair.draft.repo_id,
        files,
        title=f"SpecHub certificate: {certificate.verdict} with {pair.verifier.repo_id}",
        description=_pr_description(certificate),
    )
    certificate.save(update_fields=["hub_pr_url"])
    return certificate.hub_pr_url


def _pr_description(certificate: Certificate) -> str:
    pair, headline = certificate.pair, run_headline(run=certificate.run)
    return (
        f"SpecHub measured this draft with `{pair.verifier.repo_id}` at `{pair.verifier.sha}` "
        f"(method {pair.method}, k={pair.num_speculative_tokens}) on {certificate.run.hardware}.\n\n"
        f"- verdict: **{certificate.verdict}**\n"
        f"- mean acceptance length: {headline['mean_acceptance_length']}\n"
        f"- speedup at concurrency 1: {headline['speedup']}\n\n"
        f"The certificate is signed (a DSSE envelope, Ed25519, key `{certificate.key_id}`); verify it with "
        f"`spechub verify spechub/certificate-{certificate.run_id}.json --url {settings.SPECHUB_PUBLIC_URL}`. "
        f"The figures are also in `{eval_results_path(certificate)}`, which the Hub shows on the model page. "
        f"Details: {pair_public_url(pair=pair)}\n\n"
        "A section for the model card, if you want one:\n\n"
        f"```markdown\n{model_card_section(certificate)}```\n"
    )
