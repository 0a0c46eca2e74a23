"""Reading a document from outside (a self-hosted worker's upload) before it is kept: the one check that stands
between hostile JSON and every page, export and endpoint that shows it (issue 52 §1).

A stored document is read by many readers, for good: a shape one of them trips on made the run list, the run page,
the public API and the pair page answer 500 once it was kept. So the document is read here the way they read it:
its fields against the types the readers are written for (kernel/result/schema.py), then through the readers
themselves. What fails either is refused, naming the field or the reader.

Typed is not enough (issue 61 §3): a document held every field a reader wants, yet said AL -4 with the interval
[5, -5], an acceptance rate of 2.0, and engine latency 45x the client's agreeing within 25 %. So once upgraded, a
document is read whole, every field the types require present at every depth, each figure held to what it means
(kernel/result/figures.py) and to the figures beside it (kernel/result/coherence.py), for the k its run drafted; and
the labels the registry can work out from the figures are worked out again (kernel/result/agreement.py).
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from typing import Any

from kernel.result import coherence, read, rows
from kernel.result.agreement import relabelled
from kernel.result.schema import ResultDocument, Throughput
from kernel.result.upgrade import UnreadableResult, load
from kernel.traffic.requests import KINDS
from kernel.typed import Rule, mismatch, unstorable

# The spec is left to the registry, which holds a document to the spec its run was claimed with, field for field.
UNCHECKED = ("spec",)
CHECKED = {key: hint for key, hint in typing.get_type_hints(ResultDocument, include_extras=True).items() if key not in UNCHECKED}
MOST_CONCURRENCY = 100_000
VERDICTS = ("certified", "provisional", "failed")  # what kernel/verdict.py judges: a certificate expires later


def readable(raw: Mapping[str, Any], *, k: int) -> ResultDocument:
    """Return `raw` read as a current document of a run that drafted `k` tokens a step, its labels worked out again
    from its figures; or raise UnreadableResult naming what no reader could take or what a figure cannot mean."""
    if not raw:
        raise UnreadableResult("The result document is empty: upload the document the worker wrote.")
    _typed(raw, partial=True)  # what the upgrade reads is typed; what it adds is not there yet
    try:
        document = load(raw)
    except UnreadableResult:
        raise
    except Exception as failed:  # noqa: BLE001  # hostile input: any shape the upgrade trips on is refused
        raise UnreadableResult(f"The result document does not upgrade to the current version ({_said(failed)}).") from None
    assert document is not None  # raw is not empty
    _typed(document, partial=False, rules=coherence.rules(k=k))
    if odd := _whole_levels(document) or _labels(document):
        raise UnreadableResult(f"The result document does not read: {odd}.")
    document = relabelled(document)
    _readers_take(document)
    return document


def _typed(document: Mapping[str, Any], *, partial: bool, rules: Mapping[Any, Rule] | None = None) -> None:
    """Hold each part but the spec to its type; `partial`: keys may be missing (before the upgrade, which adds some)."""
    if where := unstorable(document):
        raise UnreadableResult(f"The result document's {where}.")
    if not partial and (missing := [key for key in CHECKED if key not in document]):
        raise UnreadableResult(f"The result document does not read: it lacks {', '.join(missing)}.")
    for key, hint in CHECKED.items():
        if key in document and (wrong := mismatch(document[key], hint, key, partial=partial, rules=rules)):
            raise UnreadableResult(f"The result document does not read: {wrong}.")


def _whole_levels(document: ResultDocument) -> str | None:
    """Levels are concurrencies, sorted as whole numbers by every reader: "1", "16", never "a" or "-0"."""
    measured = read.throughput(document)
    choice: Mapping[str, Any] = measured.get("choice_of_k") or {} if measured else {}
    schedule: Mapping[str, Any] = choice.get("schedule") or {}
    named: dict[str, Mapping[str, Any]] = {
        "stages.throughput.levels": measured["levels"] if measured else {},
        "stages.throughput.choice_of_k.levels": choice.get("levels") or {},
        "stages.throughput.choice_of_k.schedule.levels": schedule.get("levels") or {},
    }
    for where, levels in named.items():
        if odd := [level for level in levels if not _concurrency(level)]:
            return f'{where} are concurrencies, whole numbers from 1 (as "16"), not {odd[0].encode("unicode_escape")!r}'
    return None


def _concurrency(level: str) -> bool:
    return level.isascii() and level.isdigit() and 0 < int(level) <= MOST_CONCURRENCY


def _labels(document: ResultDocument) -> str | None:
    """The labels the registry files a run under (its verdict, its workloads' categories): one of those it knows."""
    judged = read.verdict(document)
    if judged is not None and judged["verdict"] not in VERDICTS:
        return f"stages.verdict.verdict must be one of {', '.join(VERDICTS)}, not {judged['verdict']!r:.40}"
    if odd := [category for category in document["workloads"] if category not in KINDS]:
        return f"workloads are by category, one of {', '.join(KINDS)}, not {odd[0]!r:.40}"
    return None


def _readers_take(document: ResultDocument) -> None:
    """Read the document through every reader the pages and the API call; the first that trips refuses it."""
    for name, reader in READERS.items():
        try:
            reader(document)
        except Exception as failed:  # noqa: BLE001  # a reader's failure on hostile input is the refusal's reason
            raise UnreadableResult(f"The result document does not read: {name} fails on it ({_said(failed)}).") from None


def _said(failed: Exception) -> str:
    return f"{type(failed).__name__}: {str(failed).encode('unicode_escape').decode()[:200]}"


def _block_ratios(document: ResultDocument) -> object:
    measured: Throughput | None = read.throughput(document)
    return [read.block_ratios(document, level) for level in measured["levels"]] if measured else []


READERS: dict[str, Callable[[ResultDocument], object]] = {
    "the summary": rows.summary,
    "speed by level": rows.speed_by_level,
    "the latency rows": rows.latency_rows,
    "the best k rows": rows.best_k_rows,
    "the precision": rows.precision,
    "the measurement": rows.measurement,
    "the servers": rows.servers,
    "the machine's load": rows.machine_load,
    "the break-even": rows.break_even_bounds,
    "the certified results": read.certified_results,
    "the block ratios": _block_ratios,
    "the levels": read.levels,
    "the served schedule": read.served_schedule,
    "the verdict's properties": read.properties,
    "the smoke grid": read.smoke,
    "the equivalence": read.equivalence,
    "the workloads": read.workloads,
    "the engine build": read.engine_build,
}
