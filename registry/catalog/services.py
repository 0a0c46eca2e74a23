"""Writes for pinned Hub models and pairs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from kernel.formats.vllm_support import DRAFTLESS_METHODS
from registry.models import HubModel, Method, Pair
from registry.params import echo


def hub_model_get_or_create(*, repo_id: str, sha: str, role: str, **fields: Any) -> tuple[HubModel, bool]:
    """Return the HubModel pinned at repo_id@sha, creating it once even under races."""
    candidate = HubModel(repo_id=repo_id, sha=sha, role=role, **fields)
    candidate.full_clean(validate_unique=False, validate_constraints=False)
    return HubModel.objects.get_or_create(repo_id=repo_id, sha=sha, defaults={"role": role, **fields})


def pair_identity(pair: Pair) -> str:
    """Return the digest of everything about `pair` that changes acceptance."""
    identity = {
        "verifier": [pair.verifier.repo_id, pair.verifier.sha],
        "draft": [pair.draft.repo_id, pair.draft.sha] if pair.draft else None,
        "method": pair.method,
        "k": pair.num_speculative_tokens,
        "dtypes": [pair.verifier_dtype, pair.draft_dtype],
        "options": pair.options,
    }
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _check_draft(*, method: str, draft: HubModel | None) -> None:
    if method in DRAFTLESS_METHODS and draft is not None:
        raise ValidationError(f"Method {echo(method)} uses no draft model; leave the draft empty.", code="draft-not-used")
    if method not in DRAFTLESS_METHODS and draft is None:
        raise ValidationError(f"Method {echo(method)} needs a draft model; name its repo and revision.", code="draft-missing")


def pair_get_or_create(
    *,
    verifier: HubModel,
    draft: HubModel | None,
    method: str,
    num_speculative_tokens: int,
    verifier_dtype: str = "auto",
    draft_dtype: str = "auto",
    options: Mapping[str, object] | None = None,
    format_metadata: Mapping[str, object] | None = None,
) -> tuple[Pair, bool]:
    """Return the pair with this identity, creating it exactly once even when processes race.

    The unique `identity` column makes the database the arbiter: a loser of the
    race hits IntegrityError inside get_or_create and reads the winner's row.
    """
    if method not in Method.values:
        raise ValidationError(f"Unknown method {echo(method)}; use one of {sorted(Method.values)}.", code="unknown-method")
    _check_draft(method=method, draft=draft)
    candidate = Pair(
        verifier=verifier,
        draft=draft,
        method=method,
        num_speculative_tokens=num_speculative_tokens,
        verifier_dtype=verifier_dtype,
        draft_dtype=draft_dtype,
        options=options or {},
        format_metadata=format_metadata or {},
    )
    candidate.identity = pair_identity(candidate)
    candidate.full_clean(validate_unique=False)
    with transaction.atomic():
        return Pair.objects.get_or_create(identity=candidate.identity, defaults=_row_values(candidate))


def _row_values(pair: Pair) -> dict[str, Any]:
    names = (
        "verifier",
        "draft",
        "method",
        "num_speculative_tokens",
        "verifier_dtype",
        "draft_dtype",
        "options",
        "format_metadata",
    )
    return {name: getattr(pair, name) for name in names}
