"""Writes that put the toy zoo in the catalog, for the demo."""

from __future__ import annotations

import functools
import json
import math
import struct
import tempfile
from pathlib import Path

from django.conf import settings
from django.db import transaction

from kernel.builds import installed_engine_build
from kernel.formats import Report, tokenizer_hash
from kernel.formats.families import family_of
from kernel.repos import LocalRepo, gate_check
from registry.catalog.gate import pair_judgement_store
from registry.catalog.services import hub_model_get_or_create, pair_get_or_create
from registry.models import CertificationRun, EngineQualification, HubModel, Pair, Role
from registry.runs.engines import qualification_for
from registry.runs.qualifications import build_qualify_here
from registry.runs.services import run_create
from zoo import ORG
from zoo.localhub import build_mirrors, git_sha
from zoo.pairs import FAMILY_HEADS, FAMILY_VERIFIERS, GEMMA4_ASSISTANT, ZOO_PAIRS

ROLES = {
    **{verifier: Role.VERIFIER for verifier in FAMILY_VERIFIERS.values()},
    "llama-draft-1l": Role.DRAFT,
    "eagle3-head": Role.SPECULATOR,
    "eagle3-head-reduced": Role.SPECULATOR,
    **{head: Role.SPECULATOR for head in FAMILY_HEADS.values()},
    GEMMA4_ASSISTANT: Role.DRAFT,
}


def _parameter_count(weights: Path) -> int:
    """Count parameters from the safetensors header alone."""
    with weights.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    return sum(math.prod(info["shape"]) for name, info in header.items() if name != "__metadata__")


def _license(card: Path) -> str:
    for line in card.read_text().splitlines():
        if line.startswith("license:"):
            return line.split(":", 1)[1].strip()
    return ""


def _tokenizer_hash(repo: Path) -> str:
    return tokenizer_hash(json.loads((repo / "tokenizer.json").read_text()))


def _zoo_model(repo: Path, sha: str, verifier: Path) -> HubModel:
    """A zoo repo as the catalog holds it; a head without a tokenizer has its verifier's, and every model its
    verifier's family (a draft is listed under the family it drafts for)."""
    config = json.loads((repo / "config.json").read_text())
    tokenizer = repo / "tokenizer.json"
    verifier_config = json.loads((verifier / "config.json").read_text())
    model, _ = hub_model_get_or_create(
        repo_id=f"{ORG}/{repo.name}",
        sha=sha,
        role=ROLES[repo.name],
        architecture=config.get("architectures", [""])[0],
        family=family_of(verifier_config.get("architectures")) or "",
        parameter_count=_parameter_count(repo / "model.safetensors"),
        dtype=config.get("dtype", ""),
        license=_license(repo / "README.md"),
        tokenizer_hash=_tokenizer_hash(repo if tokenizer.exists() else verifier),
        config=config,
    )
    return model


@functools.cache
def _mirror_shas(zoo_dir: Path) -> dict[str, str]:
    """The commits the local Hub serves for the zoo's repos. Building the git mirrors takes seconds and gives
    the same commits every time (fixed authors and dates), so a process builds them once."""
    with tempfile.TemporaryDirectory() as root:
        build_mirrors(Path(root), zoo_dir)
        return {name: git_sha(Path(root) / "mirrors" / "models" / ORG / name, "main") for name in ROLES}


def demo_catalog_load(*, zoo_dir: Path) -> list[Pair]:
    """Register the zoo's models, pinned to the commits the local Hub serves, and its pairs."""
    shas = _mirror_shas(zoo_dir)
    org = zoo_dir / ORG
    verifier_of = {pair.draft: pair.verifier for pair in ZOO_PAIRS if pair.draft} | {v: v for v in FAMILY_VERIFIERS.values()}
    with transaction.atomic():
        models = {name: _zoo_model(org / name, shas[name], org / verifier_of[name]) for name in ROLES}
        pairs = []
        for zoo_pair in ZOO_PAIRS:
            pair, _ = pair_get_or_create(
                verifier=models[zoo_pair.verifier],
                draft=models[zoo_pair.draft] if zoo_pair.draft else None,
                method=zoo_pair.method,
                num_speculative_tokens=4,
                options=zoo_pair.options,
            )
            pairs.append(pair_judgement_store(pair=pair, report=_judge_locally(pair, org)))
        return pairs


def _judge_locally(pair: Pair, org: Path) -> Report:
    """Run the gate on the zoo's folders, at the commits the local Hub serves, with no network."""

    def folder(model: HubModel) -> LocalRepo:
        return LocalRepo(org / model.repo_id.split("/", 1)[1], model.repo_id, sha=model.sha)

    return gate_check(
        verifier=folder(pair.verifier),
        verifier_id=pair.verifier.repo_id,
        draft=folder(pair.draft) if pair.draft else None,
        method=pair.method,
        k=pair.num_speculative_tokens,
        options=pair.options,
    )


def demo_queue(*, pair: Pair) -> CertificationRun:
    """Queue a certification of `pair` on the cpu class, for the demo's worker (or in-process, when tasks run so)."""
    with transaction.atomic():
        run = run_create(pair=pair, hardware="cpu")
    run.refresh_from_db()
    return run


def demo_qualify() -> EngineQualification | None:
    """Qualify the engine build installed here on the cpu class, unless it is already.

    In this process rather than through the queue: every pair's sampling verdict cites it, so the
    demo waits for it anyway, and it shows here how it went.
    """
    engine, dtype = settings.SPECHUB_DEFAULT_ENGINE, settings.SPECHUB_ENGINE_DTYPE
    build = installed_engine_build(engine)
    if not build:
        return None
    if settings.SPECHUB_QUALIFY_NEW_BUILDS:
        build_qualify_here(engine=engine, hardware="cpu", engine_build=build, dtype=dtype)
    return qualification_for(engine=engine, engine_build=build, hardware="cpu", dtype=dtype)
