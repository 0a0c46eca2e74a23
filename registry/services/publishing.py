"""Writes made when a run finishes: the listing, the certificate, regressions, events, and the Hub PR."""

from __future__ import annotations

from django.conf import settings

from registry.dispatch import task_send_on_commit
from registry.models import Certificate, CertificationRun, Verdict, WebhookEvent
from registry.selectors import pair_public_url, run_headline, run_summary
from registry.services.certificates import certificate_issue
from registry.services.gate import hub_client
from registry.services.notifications import pair_event_notify
from registry.services.regressions import run_regressions_record


def run_publish(*, run: CertificationRun) -> Certificate | None:
    """Publish a run that just finished, inside its transaction; return its certificate."""
    pair_listing_update(run=run)
    certificate = certificate_issue(run=run)
    regressions = run_regressions_record(run=run)
    subject = f"run-{run.pk}"
    if regressions:
        changes = {r.metric: {"previous": r.previous, "current": r.current, "change": r.relative_change} for r in regressions}
        data = {"run": run.pk, "previous_run": regressions[0].previous_run_id, "regressions": changes}
        pair_event_notify(pair=run.pair, event=WebhookEvent.REGRESSED, subject=subject, data=data)
    if certificate is not None and certificate.verdict == Verdict.CERTIFIED:
        data = {"run": run.pk, "certificate_digest": certificate.digest, **run_headline(run=run)}
        pair_event_notify(pair=run.pair, event=WebhookEvent.CERTIFIED, subject=subject, data=data)
    if certificate is not None and settings.SPECHUB_HUB_PUBLISH and run.pair.draft is not None:
        task_send_on_commit("registry.publish_certificate_to_hub", certificate.pk)
    return certificate


def pair_listing_update(*, run: CertificationRun) -> None:
    """Copy a finished run's headline figures onto its pair, which the catalog lists and filters."""
    pair = run.pair
    pair.latest_run = run
    summary, headline = run_summary(run), run_headline(run=run)
    pair.verdict = (summary["verdict"] if summary else None) or ""
    pair.mean_acceptance_length, pair.speedup = headline["mean_acceptance_length"], headline["speedup"]
    pair.hardware, pair.engine_version = run.hardware, run.engine_version
    pair.save(update_fields=["latest_run", "verdict", "speedup", "mean_acceptance_length", "hardware", "engine_version"])


def certificate_hub_pr_open(*, certificate_id: int) -> str:
    """Open a pull request adding the certificate to the draft's Hub repo; store and return its URL."""
    certificate = Certificate.objects.select_related("pair__draft", "pair__verifier").get(pk=certificate_id)
    if certificate.hub_pr_url:
        return certificate.hub_pr_url  # a redelivered task must not open a second PR
    pair = certificate.pair
    if pair.draft is None:
        raise ValueError(f"Pair {pair.pk} has no draft repo to publish to.")
    client = hub_client(token=settings.SPECHUB_HUB_TOKEN)
    certificate.hub_pr_url = client.open_pr(
        pair.draft.repo_id,
        f"spechub/certificate-{certificate.run_id}.json",
        certificate.document.encode(),
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
        f"The certificate is signed (Ed25519, key `{certificate.key_id}`); verify it with "
        f"`python manage.py verify_certificate spechub/certificate-{certificate.run_id}.json`. "
        f"Details: {pair_public_url(pair=pair)}\n"
    )
