"""The exact vLLM speculative_config a pair is served with, and the `vllm serve` lines to copy.

The certification engine builds its config with the same function, pointing
`model` at the downloaded snapshot, so the gate and the engine cannot disagree.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from kernel.formats.parse import DraftFormat
from kernel.formats.vllm_support import DRAFTLESS_METHODS, SPECULATORS_METHOD


@dataclass(frozen=True)
class Recipe:
    speculative_config: dict[str, object]
    serve: str
    serve_short: str | None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def speculative_config(
    *,
    method: str,
    k: int,
    fmt: DraftFormat,
    draft_model: str | None,
    draft_revision: str | None = None,
    options: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """Return vLLM's speculative_config for the pair; draft_model is a repo id or a local folder."""
    config: dict[str, object] = {"method": method, "num_speculative_tokens": k}
    if fmt.kind == "speculators" and fmt.algorithm in SPECULATORS_METHOD:
        config.update(SPECULATORS_METHOD[fmt.algorithm][1])  # what vLLM derives from the format itself
    if method not in DRAFTLESS_METHODS:
        config["model"] = draft_model
        if draft_revision:
            config["revision"] = draft_revision
    config.update(options or {})
    return config


def serving_recipe(
    *,
    verifier: tuple[str, str],
    draft: tuple[str, str] | None,
    method: str,
    k: int,
    fmt: DraftFormat,
    options: Mapping[str, object] | None = None,
) -> Recipe:
    """Return the config and command lines for verifier and draft given as (repo_id, sha)."""
    config = speculative_config(
        method=method,
        k=k,
        fmt=fmt,
        draft_model=draft[0] if draft else None,
        draft_revision=draft[1] if draft else None,
        options=options,
    )
    document = json.dumps(config, separators=(",", ":"))
    serve = f"vllm serve {_pinned(*verifier)} --speculative-config {shlex.quote(document)}"
    return Recipe(speculative_config=config, serve=serve, serve_short=_short_form(verifier, draft, k, fmt, options))


def _short_form(
    verifier: tuple[str, str], draft: tuple[str, str] | None, k: int, fmt: DraftFormat, options: Mapping[str, object] | None
) -> str | None:
    """`vllm serve <speculator>` when vLLM reads everything else from the speculators config.

    Only when the config names this verifier and its k is the pair's k; the
    verifier is then loaded at its default branch, which the command cannot pin.
    """
    if draft is None or fmt.kind != "speculators" or fmt.algorithm not in SPECULATORS_METHOD or options:
        return None
    if fmt.speculative_tokens != k or (fmt.verifier_name or "").casefold() != verifier[0].casefold():
        return None
    return f"vllm serve {_pinned(*draft)}"


def _pinned(repo_id: str, sha: str) -> str:
    """Return the repo argument with --revision, which a local folder (no sha) goes without."""
    return f"{shlex.quote(repo_id)} --revision {sha}" if sha else shlex.quote(repo_id)
