"""Writes for the compatibility gate: judge a pair at its pinned commits and store the judgement."""

from __future__ import annotations

from django.conf import settings

from kernel.formats import Report
from kernel.hub import HubClient
from kernel.repos import HubRepo, RepoSource, gate_check
from registry.models import Pair


def hub_client(*, token: str | bool = False) -> HubClient:
    """Return a Hub client for the configured endpoint (HF_ENDPOINT; huggingface.co by default).

    The registry's one factory; workers without Django use HubClient.from_environment.
    """
    return HubClient(
        endpoint=settings.SPECHUB_HUB_ENDPOINT,
        cache_dir=settings.SPECHUB_HUB_CACHE,
        token=token,
        timeout=settings.SPECHUB_HUB_TIMEOUT,
    )


def pair_judgement_store(*, pair: Pair, report: Report) -> Pair:
    """Store the gate's report and the parsed draft format on the pair."""
    pair.compatibility = report.as_dict()
    pair.format_metadata = report.format.as_dict()
    pair.save(update_fields=["compatibility", "format_metadata"])
    return pair


def pair_judge(*, pair: Pair, client: HubClient | None = None) -> Report:
    """Run the gate on the pair's pinned commits through the Hub, store and return its report.

    Raises UserError/InfraError when the Hub cannot be read; the pair is then left as it was.
    """
    client = client or hub_client()
    draft: RepoSource | None = HubRepo(client, pair.draft.repo_id, pair.draft.sha) if pair.draft else None
    report = gate_check(
        verifier=HubRepo(client, pair.verifier.repo_id, pair.verifier.sha),
        verifier_id=pair.verifier.repo_id,
        draft=draft,
        method=pair.method,
        k=pair.num_speculative_tokens,
        options=pair.options,
    )
    pair_judgement_store(pair=pair, report=report)
    return report
