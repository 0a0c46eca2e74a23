"""Writes for a catalog that fills itself: import drafts from a list of Hub repos or a Hub collection.

Every repo is pinned to the commit its revision names now, and each new (repo, commit) is gated
once, as a submission from the Hub import: a gate-passing pair is listed ("gate-passed, not yet
measured") and queued for certification when the policy says so (SPECHUB_IMPORT_CERTIFY); one
that fails the gate is kept with its findings. Repo ids, from settings or from a collection,
are hostile until checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from huggingface_hub import HfApi

from kernel.errors import RunError
from kernel.formats.inputs import is_repo_id
from kernel.hub import HubClient, classify
from registry.catalog.gate import hub_client
from registry.models import Submission, SubmissionSource
from registry.runs.submissions import submission_create


@dataclass(frozen=True)
class Imported:
    """What the import did with one repo: gated (a submission), known (already gated at this commit), or failed."""

    repo_id: str
    outcome: str  # "gated", "known", "failed"
    detail: str
    submission: int | None = None


def collection_repo_ids(*, slug: str, endpoint: str, token: str | bool = False) -> list[str]:
    """Return the model repos a Hub collection lists, in its order (papers, datasets and spaces left out)."""
    try:
        collection = HfApi(endpoint=endpoint, token=token).get_collection(slug)
    except Exception as exc:
        raise classify(exc, f"collection {slug}", "", authenticated=bool(token)) from exc
    return [item.item_id for item in collection.items if item.item_type == "model"]


def hub_import(
    *, repo_ids: Iterable[str], verifier: str = "", certify: bool = False, client: HubClient | None = None
) -> list[Imported]:
    """Gate each repo's current commit once; return what happened to each, in order."""
    client = client or hub_client()
    return [_import_one(repo_id, verifier, certify, client) for repo_id in dict.fromkeys(repo_ids)]


def _import_one(repo_id: str, verifier: str, certify: bool, client: HubClient) -> Imported:
    if not is_repo_id(repo_id):
        return Imported(repo_id[:200], "failed", "not a Hub repo id (org/name)")
    try:
        sha = client.resolve(repo_id, "main")
        known = Submission.objects.filter(source=SubmissionSource.HUB_IMPORT, repo_id=repo_id, revision=sha).first()
        if known is not None:
            return Imported(repo_id, "known", f"already gated at {sha[:12]}: {known.status}", known.pk)
        submission = submission_create(user=None, repo_id=repo_id, revision=sha, verifier_repo_id=verifier, client=client,
                                       source=SubmissionSource.HUB_IMPORT, certify=certify)  # fmt: skip
    except RunError as error:  # nothing was written: the next import tries again
        return Imported(repo_id, "failed", f"{error.code}: {error.message}")
    said = submission.refusal_code or ("queued for certification" if submission.run_id else "gate-passed, not yet measured")
    return Imported(repo_id, "gated", f"{submission.status} at {sha[:12]}: {said}", submission.pk)


def hub_import_configured() -> list[Imported]:
    """The scheduled import: the repos and the collection settings name, with the settings' policy."""
    repos = list(settings.SPECHUB_IMPORT_REPOS)
    if settings.SPECHUB_IMPORT_COLLECTION:
        repos += collection_repo_ids(slug=settings.SPECHUB_IMPORT_COLLECTION, endpoint=settings.SPECHUB_HUB_ENDPOINT,
                                     token=settings.SPECHUB_HUB_READ_TOKEN or False)  # fmt: skip
    return hub_import(repo_ids=repos, verifier=settings.SPECHUB_IMPORT_VERIFIER, certify=settings.SPECHUB_IMPORT_CERTIFY)
