"""Reads for the format x engine matrix: each draft format SpecHub knows against each engine build the registry has
qualified, every cell from the gate's tables (kernel/formats/matrix.py) and from what really happened on that build.

A cell says one of:
- refused: the gate refuses the format, with its reason (or the build's own control could not run it, with the
  engine's message);
- certified: pairs of the format hold a certificate measured on the build, and how many;
- failed: a run of the format on the build ended in the engine or the server (the code and the run), or the build's
  control of the format's method fails;
- loads: the gate takes it and nothing on the build says otherwise.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from django.db.models import Q

from kernel import qualification as q
from kernel.formats import matrix, vllm_support
from registry.models import Certificate, CertificationRun, EngineQualification
from registry.runs.engines import engine_qualifications, record_of
from registry.states import RunState

LOADS, REFUSED, CERTIFIED, FAILED = "loads", "refused", "certified", "failed"
STATES = (LOADS, REFUSED, CERTIFIED, FAILED)
ENGINE_FAULTS = ("engine:", "serve:")  # run endings that are the engine's or the server's, not the pair's


class Build(TypedDict):
    engine: str
    engine_build: str
    hardware: str
    dtype: str
    digest: str  # the qualification record's; "" for the gate's own build where none is qualified yet


class Cell(TypedDict):
    state: str  # one of STATES
    detail: str  # the gate's reason, the pairs certified, or the fault
    pairs: int  # pairs of the format certified on the build
    code: str  # the gate's finding or the run's error code, where there is one


class FormatRowOut(TypedDict):
    key: str
    label: str
    method: str | None
    cells: list[Cell]  # one per build, in `builds` order


class FamilyCell(TypedDict):
    pairs: int  # the family's pairs certified on the build
    formats: list[str]  # the format rows they are in


class FamilyRow(TypedDict):
    """One family (issue 60): the verifier architectures it names, whether the gate's build feeds EAGLE-3 heads from
    them, and its certified pairs on each build."""

    family: str
    title: str
    architectures: list[str]
    eagle3: list[str]  # the architectures whose vLLM class gives an EAGLE-3 head its aux states
    cpu_unloadable: dict[str, str]  # architecture: the CPU install's own words
    cells: list[FamilyCell]  # one per build, in `builds` order


class FormatMatrix(TypedDict):
    gate_build: str  # the vLLM build the gate's tables describe
    builds: list[Build]
    rows: list[FormatRowOut]
    families: list[FamilyRow]


@dataclass
class _Outcomes:
    """What really happened on one build, by format row."""

    certified: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    by_family: dict[str, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))  # family: {pair: format row}
    failures: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    controls: list[q.Control] = field(default_factory=list)


def format_matrix() -> FormatMatrix:
    """Every format row against every qualified build (the hosted pool's newest record of each)."""
    qualified = engine_qualifications()
    builds = [_build(row) for row in qualified] or [_gate_build()]
    outcomes = [_outcomes(row) for row in qualified] or [_Outcomes()]
    rows: list[FormatRowOut] = [
        {"key": row.key, "label": row.label, "method": row.method, "cells": [_cell(row, found) for found in outcomes]}
        for row in matrix.rows()
    ]
    return {"gate_build": vllm_support.VLLM_VERSION, "builds": builds, "rows": rows, "families": _families(outcomes)}


def _families(outcomes: list[_Outcomes]) -> list[FamilyRow]:
    """The families Speculators ships drafts for, each against every build."""
    found: list[FamilyRow] = []
    for family, title in vllm_support.FAMILY_TITLES.items():
        architectures = sorted(a for a, named in vllm_support.FAMILIES.items() if named == family)
        cells: list[FamilyCell] = [
            {"pairs": len(o.by_family[family]), "formats": sorted(set(o.by_family[family].values()))} for o in outcomes
        ]
        found.append({
            "family": family, "title": title, "architectures": architectures,
            "eagle3": [a for a in architectures if a in vllm_support.EAGLE3_VERIFIER_ARCHITECTURES],
            "cpu_unloadable": {a: words for a, words in vllm_support.UNLOADABLE_ON_CPU.items() if a in architectures},
            "cells": cells,
        })  # fmt: skip
    return found


def _build(row: EngineQualification) -> Build:
    return {"engine": row.engine, "engine_build": row.engine_build, "hardware": row.hardware, "dtype": row.dtype,
            "digest": row.digest}  # fmt: skip


def _gate_build() -> Build:
    return {"engine": "vllm", "engine_build": vllm_support.VLLM_VERSION, "hardware": "", "dtype": "", "digest": ""}


def _outcomes(row: EngineQualification) -> _Outcomes:
    found = _Outcomes(controls=list(record_of(row)["controls"]))
    on_build = {"engine": row.engine, "engine_version": row.engine_build, "hardware": row.hardware,
                "worker__isnull": True, "workload__isnull": True}  # fmt: skip
    certificates = Certificate.objects.filter(verdict="certified", revoked_at__isnull=True,
                                              **{f"run__{key}": value for key, value in on_build.items()})  # fmt: skip
    certified = certificates.values_list("pair_id", "pair__format_metadata", "pair__method", "pair__verifier__family")
    for pair_id, metadata, method, family in certified:
        found.certified[_key(metadata, method)].add(pair_id)
        found.by_family[family][pair_id] = _key(metadata, method)
    failed = CertificationRun.objects.filter(state__in=[RunState.FAILED_USER, RunState.FAILED_INFRA], **on_build)
    faulted = Q(error_code__startswith=ENGINE_FAULTS[0]) | Q(error_code__startswith=ENGINE_FAULTS[1])
    ended = failed.filter(faulted).order_by("-finished_at", "-id")
    for run_id, code, metadata, method in ended.values_list("pk", "error_code", "pair__format_metadata", "pair__method")[:500]:
        found.failures[_key(metadata, method)].append(f"{code} (run {run_id})")
    return found


def _key(metadata: object, method: str) -> str:
    known: Mapping[str, Any] = metadata if isinstance(metadata, dict) else {}
    architectures = known.get("architectures")
    return matrix.key_of(kind=str(known.get("kind") or ("none" if method in ("ngram", "suffix") else "")),
                         algorithm=known.get("algorithm"), method=method,
                         architectures=[str(a) for a in architectures] if isinstance(architectures, list) else None)  # fmt: skip


def _cell(row: matrix.FormatRow, found: _Outcomes) -> Cell:
    if row.refusal:
        return {"state": REFUSED, "detail": row.refusal, "pairs": 0, "code": row.code}
    controls = [c for c in found.controls if row.method and c["method"] == row.method]
    unsupported = [c for c in controls if c["outcome"] == q.NOT_SUPPORTED]
    if unsupported and not found.certified[row.key]:
        control = unsupported[0]
        said = control.get("error") or control["summary"]
        return {"state": REFUSED, "detail": f"the build's {control['name']} control: {said}", "pairs": 0, "code": ""}
    pairs = len(found.certified[row.key])
    faults = [*found.failures[row.key], *_failing(controls)]
    if pairs:
        also = f"; {len(faults)} fault(s) too, the latest {faults[0]}" if faults else ""
        return {"state": CERTIFIED, "detail": f"{pairs} pair{'s' if pairs != 1 else ''} certified{also}", "pairs": pairs,
                "code": ""}  # fmt: skip
    if faults:
        code = faults[0].split(" ", 1)[0] if found.failures[row.key] else ""
        return {"state": FAILED, "detail": "; ".join(faults[:3]), "pairs": 0, "code": code}
    return {"state": LOADS, "detail": _loads(row, controls), "pairs": 0, "code": ""}


def _failing(controls: Iterable[q.Control]) -> list[str]:
    return [f"control {c['name']} fails: {c['summary']}" for c in controls if c["outcome"] == q.FAIL]


def _loads(row: matrix.FormatRow, controls: list[q.Control]) -> str:
    passing = [c["name"] for c in controls if c["outcome"] == q.PASS]
    method = f"as method {row.method}" if row.method else "with no method of its own"
    evidence = f"; the build's {', '.join(passing)} control passes" if passing else ""
    return f"the gate takes it, {method}{evidence}"
