"""vLLM's own result files, both ways: a `vllm bench serve --save-result` JSON read for its spec-decode counters (or a
saved /metrics exposition, through kernel.exposition), and a certified level written as such a file.

vLLM writes the six spec-decode fields (vllm/benchmarks/serve.py) from its server's /metrics deltas over the run:
AL = 1 + accepted / drafts, the rate as a percentage of draft tokens, and each position's accepted count over the
drafts (cumulative: a chain draft reaches position i only through 1..i-1). The counts come back exact from the rates
(count = rate x drafts, rounded), so a file is held to its certificate with the same arithmetic as a live window.

A file is hostile input: it is read under a size cap, NaN and Infinity are refused, nesting deeper than
MAX_JSON_DEPTH is refused, and every count is checked as kernel.live checks a watcher's (no more accepted than
drafted, positions falling). Pure: no I/O, no Django.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from kernel import exposition, live
from kernel.formats.inputs import MAX_JSON_DEPTH, json_depth
from kernel.result import ResultDocument, acceptance, throughput

AL_FIELD, RATE_FIELD = "spec_decode_acceptance_length", "spec_decode_acceptance_rate"
DRAFTS_FIELD, DRAFT_TOKENS_FIELD = "spec_decode_num_drafts", "spec_decode_draft_tokens"
ACCEPTED_FIELD, POSITIONS_FIELD = "spec_decode_accepted_tokens", "spec_decode_per_position_acceptance_rates"
SPEC_DECODE_FIELDS = (AL_FIELD, RATE_FIELD, DRAFTS_FIELD, DRAFT_TOKENS_FIELD, ACCEPTED_FIELD, POSITIONS_FIELD)
MAX_BYTES = 16 * 2**20  # a result with --save-detailed carries every request's latencies; a few MiB at most
# What parsing may cost is bounded by the file's shape as well as its size: 16 MiB of `[],` is 5.6 million lists
# (1.9 s to parse on an EPYC core, and more to walk), 16 MiB of `{}` lines 5.6 million results (19 s). A detailed
# result of 10,000 requests has about 20,000 objects and arrays, and a sweep appends a result per run.
MAX_CONTAINERS = 1_000_000
MAX_RESULTS = 1_000
# A server's /metrics is tens of KiB (vLLM's, with every histogram, about 60); parsing 16 MiB of text took 4 s.
MAX_METRICS_BYTES = 2 * 2**20
RESULT, METRICS = "vllm bench serve result", "/metrics exposition"
# A stated AL or rate may differ from what its counts give by rounding only (vLLM writes floats at full precision).
TOLERANCE = 1e-6
_CHECKED_AT = 2e9  # live.check wants a reading time; a file has none that matters


class Refused(ValueError):
    """A file that cannot be judged: its code and the reason, for the person who gave it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class Observed:
    """What a file counted: the spec-decode counts over its run, and where they came from."""

    counts: live.Counts
    source: str  # RESULT or METRICS
    model_id: str | None = None
    max_concurrency: int | None = None
    note: str = ""  # what a reader should know of how the file was read (the last of several results)
    temperature: float | None = None  # where the file says (`--metadata temperature=0`): vllm bench serve writes none

    @property
    def k(self) -> int | None:
        return len(self.counts.per_position) or None


def read(data: bytes, *, name: str) -> Observed:
    """Read a `vllm bench serve` result JSON (one, or several as --append-result writes them: the last) or a saved
    /metrics exposition; Refused says why not."""
    if len(data) > MAX_BYTES:
        raise Refused("judge:too-large", f"{name} is more than {MAX_BYTES // 2**20} MiB; a vllm bench serve result (even "
                      "with --save-detailed) or a /metrics text is far smaller")  # fmt: skip
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("judge:not-text", f"{name} is not UTF-8 text: give the JSON vllm bench serve --save-result wrote, "
                      "or a saved /metrics") from None  # fmt: skip
    if text.lstrip().startswith(("{", "[")):
        return _from_result(_records(text, name), name)
    if len(data) > MAX_METRICS_BYTES:
        raise Refused("judge:too-large", f"{name} is not JSON, and as a /metrics text it is more than "
                      f"{MAX_METRICS_BYTES // 2**20} MiB; a server's /metrics is tens of KiB")  # fmt: skip
    try:
        found = exposition.read(text, source=name)
    except exposition.Unreadable as exc:
        raise Refused("judge:no-spec-decode", f"{exc}; give the JSON vllm bench serve --save-result wrote, or a saved "
                      "/metrics of a server that speculates") from None  # fmt: skip
    counts = live.Counts(found.drafts, found.draft_tokens, found.accepted, found.per_position, found.requests)
    _check(counts, name)
    return Observed(counts, METRICS, note="counted since the server started: every request it served, not one run's")


def _records(text: str, name: str) -> list[dict[str, object]]:
    """The JSON objects in the text: one, a list of them, or one a line (--append-result)."""
    stripped = text.strip()
    if stripped.count("[") + stripped.count("{") > MAX_CONTAINERS:
        raise Refused("judge:too-many-values", f"{name} holds more than {MAX_CONTAINERS:,} JSON objects and arrays; "
                      "a vllm bench serve result, even with --save-detailed, holds two a request")  # fmt: skip
    try:
        found = [_json(stripped, name)]
    except Refused as whole:
        if "\n" not in stripped or whole.code != "judge:not-json":
            raise
        lines = [line for line in stripped.splitlines() if line.strip()]
        _at_most_results(len(lines), name)
        found = [_json(line, name) for line in lines]
    if len(found) == 1 and isinstance(found[0], list):
        found = found[0]
        _at_most_results(len(found), name)
    records = [record for record in found if isinstance(record, dict)]
    if not records or len(records) != len(found):
        raise Refused("judge:not-a-result", f"{name} is JSON but not a vllm bench serve result (a JSON object)")
    return records


def _at_most_results(count: int, name: str) -> None:
    if count > MAX_RESULTS:
        raise Refused("judge:too-many-results", f"{name} holds {count:,} values to read as results, more than the "
                      f"{MAX_RESULTS:,} a sweep with --append-result writes; judge one run's file")  # fmt: skip


def _json(text: str, name: str) -> object:
    def refuse(constant: str) -> float:
        raise Refused("judge:not-finite", f"{name} holds {constant}, which is no count: vllm bench serve writes numbers")

    try:
        value = json.loads(text, parse_constant=refuse)
    except RecursionError:
        raise Refused("judge:too-deep", f"{name} nests deeper than {MAX_JSON_DEPTH} levels; no result does") from None
    except ValueError as exc:
        if isinstance(exc, Refused):
            raise
        raise Refused("judge:not-json", f"{name} is not valid JSON: {str(exc)[:200]}") from None
    if json_depth(value) > MAX_JSON_DEPTH:
        raise Refused("judge:too-deep", f"{name} nests deeper than {MAX_JSON_DEPTH} levels; no result does")
    return value


def _from_result(records: list[dict[str, object]], name: str) -> Observed:
    record = records[-1]
    missing = [key for key in SPEC_DECODE_FIELDS if key not in record]
    if len(missing) == len(SPEC_DECODE_FIELDS):
        raise Refused("judge:no-spec-decode", f"{name} has no spec-decode fields ({', '.join(SPEC_DECODE_FIELDS)}): "
                      "vllm bench serve writes them only when the server it measured speculates (its /metrics shows "
                      "vllm:spec_decode_* counters); run it against a server started with --speculative-config")  # fmt: skip
    if missing:
        raise Refused("judge:incomplete", f"{name} lacks {', '.join(missing)}: the six spec-decode fields come together")
    counts = _counts(record, name)
    _check(counts, name)
    note = f"the last of {len(records)} results in {name} (--append-result)" if len(records) > 1 else ""
    concurrency = record.get("max_concurrency")
    model = record.get("model_id")
    return Observed(counts, RESULT, model_id=str(model)[:200] if isinstance(model, str) else None,
                    max_concurrency=concurrency if _whole(concurrency) else None, note=note,
                    temperature=_temperature(record, name))  # fmt: skip


def _temperature(record: Mapping[str, object], name: str) -> float | None:
    """The file's temperature: vllm bench serve writes none of its own, but `--metadata temperature=0` writes the
    string "0" at the top level, and a file may carry a number."""
    stated = record.get("temperature")
    if stated is None:
        return None
    value = _as_float(stated)
    if not 0 <= value <= 2:
        raise Refused("judge:bad-field", f"{name}: temperature is {_shown(stated)}, not a temperature from 0 to 2")
    return value


def _as_float(value: object) -> float:
    """A number, or a number written as a short string, as a float; NaN for anything else (and for a number past any
    float: float() of a 400-digit integer raises)."""
    if isinstance(value, str) and len(value) < 32:
        try:
            return float(value)
        except ValueError:
            return math.nan
    return float(value) if _number(value) and abs(value) < 1e300 else math.nan  # type: ignore[arg-type]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _counts(record: Mapping[str, object], name: str) -> live.Counts:
    drafts, tokens, accepted = (_count(record, key, name) for key in (DRAFTS_FIELD, DRAFT_TOKENS_FIELD, ACCEPTED_FIELD))
    rates = record[POSITIONS_FIELD]
    if not isinstance(rates, list) or len(rates) > live.MAX_POSITIONS or not all(_rate(r) for r in rates):
        raise Refused("judge:bad-field", f"{name}: {POSITIONS_FIELD} must be a list of at most {live.MAX_POSITIONS} "
                      "rates from 0 to 1")  # fmt: skip
    _agrees(record, AL_FIELD, 1 + accepted / drafts if drafts else 0.0, name)
    _agrees(record, RATE_FIELD, 100 * accepted / tokens if tokens else 0.0, name)
    completed = record.get("completed", 0)
    requests = completed if _whole(completed) else 0
    return live.Counts(drafts, tokens, accepted, tuple(round(rate * drafts) for rate in rates), requests)


def _count(record: Mapping[str, object], key: str, name: str) -> int:
    value = record[key]
    if not _whole(value) or not 0 <= value <= live.MAX_COUNT:
        raise Refused("judge:bad-field", f"{name}: {key} is {_shown(value)}, not a count")
    return value


def _shown(value: object) -> str:
    """A value as a refusal quotes it: a container by its type (str() would format all of it, and may recurse), a
    number past 40 digits by its length (str() of a 5,000-digit int is refused by Python itself)."""
    if isinstance(value, dict | list):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**40:
        return f"a {value.bit_length() * 30103 // 100000 + 1}-digit number"
    return repr(value)[:40]


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _rate(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def _agrees(record: Mapping[str, object], key: str, expected: float, name: str) -> None:
    stated = record[key]
    number = _as_float(stated) if _number(stated) else math.nan
    if not math.isclose(number, expected, rel_tol=TOLERANCE, abs_tol=TOLERANCE):
        raise Refused("judge:inconsistent", f"{name}: {key} is {_shown(stated)}, but its counts give {expected:.6g}: "
                      "the file was edited, or is not one vllm bench serve wrote")  # fmt: skip


def _check(counts: live.Counts, name: str) -> None:
    """The checks a watcher's snapshot gets: no engine accepts more than it drafts, positions fall."""
    shot = live.Snapshot(_CHECKED_AT, counts.drafts, counts.draft_tokens, counts.accepted, counts.per_position,
                         counts.requests, k=len(counts.per_position) or None)  # fmt: skip
    try:
        live.check(shot)
    except live.Refused as refused:
        raise Refused("judge:impossible", f"{name}: {refused.message}") from None


def level_file(document: ResultDocument | None, level: int, *, model_id: str, label: str, date: str) -> dict[str, Any]:
    """The certified run's `level` as `vllm bench serve --save-result` writes a run at --max-concurrency `level`: its
    field names and meanings, and only the fields the run measured. The spec-decode fields are the certified
    acceptance (the suite's prompts, greedy), the same at every level."""
    measured = throughput(document)
    figures = measured["levels"].get(str(level)) if measured else None
    if figures is None:
        raise KeyError(level)
    served: Mapping[str, Any] = figures.get("speculative") or {}
    blocks, per_block = len(figures.get("block_ratios") or []), figures.get("requests_per_block")
    sent = blocks * per_block if blocks and per_block else None
    delayed = sorted(set(served.get("delayed") or ()) & set(served.get("engine_latency_ms") or {}))
    if delayed:
        label += (f"; {', '.join(LATENCY_NAMES.get(m, m) for m in delayed)} are the engine's own (vLLM's histograms): "
                  "the measuring machine's front end delayed the client's")  # fmt: skip
    written: dict[str, Any] = {
        "date": date, "endpoint_type": "vllm", "backend": "vllm", "label": label, "model_id": model_id,
        "tokenizer_id": model_id, "num_prompts": sent, "request_rate": "inf", "burstiness": 1.0,
        "max_concurrency": level, "completed": sent, "failed": 0 if sent else None,
        "request_throughput": served.get("requests_per_second"), "output_throughput": served.get("tokens_per_second"),
        **_latencies(_as_read(served)), **_spec_decode(document),
    }  # fmt: skip
    return {key: value for key, value in written.items() if value is not None}


# SpecHub's latency names, as vLLM's percentile metrics name them (vllm bench serve's process_one_metric).
LATENCY_NAMES = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el"}


def _as_read(served: Mapping[str, Any]) -> dict[str, Mapping[str, float | None]]:
    """Each latency as the page reads it: the client's, or the engine's own where the measuring machine's front end
    delayed the client's (the level's `delayed`), so the file never holds a figure the page labels delayed."""
    client: Mapping[str, Any] = served.get("latency_ms") or {}
    engine: Mapping[str, Any] = served.get("engine_latency_ms") or {}
    delayed = set(served.get("delayed") or ()) & set(engine)
    return {metric: engine[metric] if metric in delayed else client[metric] for metric in {*client, *delayed}}


def _latencies(latency: Mapping[str, Mapping[str, float | None]]) -> dict[str, float]:
    written: dict[str, float] = {}
    for ours, theirs in LATENCY_NAMES.items():
        for quantile, value in (latency.get(ours) or {}).items():
            if value is not None and quantile.startswith("p"):
                written[f"{quantile}_{theirs}_ms"] = value
                if quantile == "p50":
                    written[f"median_{theirs}_ms"] = value
    return written


def _spec_decode(document: ResultDocument | None) -> dict[str, Any]:
    accepted = acceptance(document)
    if not accepted:
        return {}
    counts: Mapping[str, Any] = accepted.get("counts") or {}
    drafts, tokens, taken = counts.get("drafts"), counts.get("draft_tokens"), counts.get("accepted")
    if drafts and tokens and taken is not None:
        per_position = [n / drafts for n in counts.get("accepted_per_position") or []]
        return {AL_FIELD: 1 + taken / drafts, RATE_FIELD: 100 * taken / tokens, DRAFTS_FIELD: drafts,
                DRAFT_TOKENS_FIELD: tokens, ACCEPTED_FIELD: taken, POSITIONS_FIELD: per_position}  # fmt: skip
    rate = accepted.get("acceptance_rate")
    return {AL_FIELD: accepted.get("mean_acceptance_length"), RATE_FIELD: 100 * rate if rate is not None else None,
            POSITIONS_FIELD: list(accepted.get("per_position") or [])}  # fmt: skip
