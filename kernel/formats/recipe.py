"""The exact vLLM speculative_config a pair is served with, and the `vllm serve` lines to copy.

The certification engine builds its config with the same function, pointing
`model` at the downloaded snapshot, so the gate and the engine cannot disagree.
The serving measurement starts its servers with `serve_arguments` too: the
published command carries the conditions that were measured (dtype, maximum
length, eager mode, seed), and differs from the measured one only in naming
the Hub repos where the worker names their pinned snapshots.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

from kernel.formats.parse import DraftFormat
from kernel.formats.vllm_support import DRAFTLESS_METHODS, SPECULATORS_METHOD


@dataclass(frozen=True)
class Conditions:
    """The engine settings a measurement ran under, which the published command must repeat."""

    dtype: str = "float32"
    max_model_len: int = 512
    enforce_eager: bool = True
    seed: int = 0


def serve_arguments(model: str, revision: str | None, config: Mapping[str, object] | None, conditions: Conditions) -> list[str]:
    """Return the arguments after `vllm serve`: the verifier, the speculative config, and the conditions."""
    arguments = [model, *(["--revision", revision] if revision else [])]
    if config is not None:
        arguments += ["--speculative-config", json.dumps(config, separators=(",", ":"))]
    arguments += ["--dtype", conditions.dtype, "--max-model-len", str(conditions.max_model_len), "--seed", str(conditions.seed)]
    return arguments + (["--enforce-eager"] if conditions.enforce_eager else [])


def serve_line(arguments: list[str]) -> str:
    return "vllm serve " + shlex.join(arguments)


class RecipeDict(TypedDict):
    speculative_config: dict[str, object]  # vLLM's own config: its keys are the engine's
    serve: str
    serve_short: str | None


@dataclass(frozen=True)
class Recipe:
    speculative_config: dict[str, object]
    serve: str
    serve_short: str | None

    def as_dict(self) -> RecipeDict:
        # A copy, nested values too (as dataclasses.asdict made): the caller stores it and may change it.
        return {"speculative_config": copy.deepcopy(self.speculative_config), "serve": self.serve,
                "serve_short": self.serve_short}  # fmt: skip


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
    conditions: Conditions | None = None,
) -> Recipe:
    """Return the config and command lines for verifier and draft given as (repo_id, sha).

    The lines carry `conditions` (by default, those a default certification measures under).
    """
    config = speculative_config(
        method=method,
        k=k,
        fmt=fmt,
        draft_model=draft[0] if draft else None,
        draft_revision=draft[1] if draft else None,
        options=options,
    )
    conditions = conditions or Conditions()
    serve = serve_line(serve_arguments(verifier[0], verifier[1] or None, config, conditions))
    short = _short_form(verifier, draft, k, fmt, options)
    serve_short = serve_line([*short, *_flags(conditions)]) if short else None
    return Recipe(speculative_config=config, serve=serve, serve_short=serve_short)


def _short_form(
    verifier: tuple[str, str], draft: tuple[str, str] | None, k: int, fmt: DraftFormat, options: Mapping[str, object] | None
) -> list[str] | None:
    """`vllm serve <speculator>` when vLLM reads everything else from the speculators config.

    Only when the config names this verifier and its k is the pair's k; the
    verifier is then loaded at its default branch, which the command cannot pin.
    """
    if draft is None or fmt.kind != "speculators" or fmt.algorithm not in SPECULATORS_METHOD or options:
        return None
    if fmt.speculative_tokens != k or (fmt.verifier_name or "").casefold() != verifier[0].casefold():
        return None
    return [draft[0], *(["--revision", draft[1]] if draft[1] else [])]


def _flags(conditions: Conditions) -> list[str]:
    """The condition flags alone, as serve_arguments writes them after the model."""
    return serve_arguments("", None, None, conditions)[1:]
