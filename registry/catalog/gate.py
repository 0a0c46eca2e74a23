"""Writes for the compatibility gate: judge a pair at its pinned commits and store the judgement."""

from __future__ import annotations

import hashlib
import json

from django.conf import settings
from django.core.cache import cache

from kernel.formats import Report, ReportDict
from kernel.hub import HubClient
from kernel.repos import HubRepo, RepoSource, gate_check
from registry.models import Pair


def hub_client(*, token: str | bool = False) -> HubClient:
    """Return a Hub client for the configured endpoint (HF_ENDPOINT; huggingface.co by default), reading with
    SPECHUB_HUB_READ_TOKEN (or HF_TOKEN) unless given another token (the Hub PR's write token).

    The registry's one factory; workers without Django use HubClient.from_environment.
    """
    return HubClient(
        endpoint=settings.SPECHUB_HUB_ENDPOINT,
        cache_dir=settings.SPECHUB_HUB_CACHE,
        token=token or settings.SPECHUB_HUB_READ_TOKEN or False,
        timeout=settings.SPECHUB_HUB_TIMEOUT,
    )


def gate_report_cached(
    *, verifier: str, verifier_revision: str, draft: str | None, draft_revision: str, method: str | None, k: int | None
) -> ReportDict:
    """Return the gate's report on the repos at the commits their revisions name now.

    The report of a (repo, sha) pair never changes, so it is kept in the shared cache: a caller
    asking again costs two revision lookups, not a second read of configs, tokenizers and headers.
    """
    client = hub_client()
    verifier_sha = client.resolve(verifier, verifier_revision)
    draft_sha = client.resolve(draft, draft_revision) if draft else None
    identity = json.dumps([verifier, verifier_sha, draft, draft_sha, method, k])
    key = f"gate-report:{hashlib.sha256(identity.encode()).hexdigest()}"
    report: ReportDict | None = cache.get(key)
    if report is None:
        report = gate_check(
            verifier=HubRepo(client, verifier, verifier_sha),
            verifier_id=verifier,
            draft=HubRepo(client, draft, draft_sha) if draft and draft_sha else None,
            method=method,
            k=k,
        ).as_dict()
        cache.set(key, report, settings.SPECHUB_GATE_CACHE_SECONDS)
    return report


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
