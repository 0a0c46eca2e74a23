"""A verified certificate as a person reads it: `spechub verify` and `manage.py verify_certificate` print this.

Every section that is present is shown and every absent one says "not measured"; a validly signed payload of any
shape (a section missing, null or of the wrong type) never raises here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import cast

from kernel.certificates import Verified
from kernel.result import BestKRow, Throughput, best_k_of

NOT_MEASURED, NOT_STATED = "not measured", "not stated"
_SHOWN_CHARS = 120  # of any one value a certificate states


def describe(verified: Verified, now: datetime) -> tuple[str, bool]:
    """Return what a verified certificate states, in a few lines for a person, and whether it has expired.

    A valid signature vouches for who wrote the payload, not for its shape: an older or newer issuer, or another
    implementation, may leave sections out or shape them otherwise. Each section is read on its own: one that is
    there is printed, one that is not says "not measured" (a result) or "not stated" (anything else), and one of
    another shape says so; nothing here raises. An expiry that cannot be read counts as expired."""
    payload: dict[str, object] = _object(verified.payload)
    expiry = _instant(payload.get("expires_at"))
    expired = expiry is None or expiry <= (now if now.tzinfo else now.replace(tzinfo=UTC))
    lines = [
        f"Signature valid (ed25519, key {verified.key_id}); digest {verified.digest}.",
        _headline(payload),
        *_measured_on(payload.get("measured_on")),
        *_properties(payload),
        *_results(payload.get("results")),
        f"  issued {_shown(payload.get('issued_at'))}, " + _expiry(payload.get("expires_at"), expiry, expired),
        f"  reproduce: {_shown(payload.get('reproduce'))}",
    ]
    return "\n".join(lines), expired


def _expiry(stated: object, expiry: datetime | None, expired: bool) -> str:
    if expiry is None:
        return f"expiry {_shown(stated)} is not a time: treated as EXPIRED"
    return f"{'EXPIRED' if expired else 'expires'} {_shown(stated)}"


def _object(value: object) -> dict[str, object]:
    return cast(dict[str, object], value) if isinstance(value, dict) else {}


def _instant(value: object) -> datetime | None:
    """An ISO 8601 time, UTC when it names no zone; None when it is not one."""
    try:
        found = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return found.replace(tzinfo=UTC) if found and not found.tzinfo else found


def _shown(value: object) -> str:
    """A stated value on one line, cut short; absent reads "not stated"."""
    if value is None:
        return NOT_STATED
    if isinstance(value, list | dict):  # its contents would be no line for a person; and nested deep, no json.dumps
        return f"{_kind(value)} of {len(value)}"
    text = value if isinstance(value, str) else json.dumps(value)  # a number or a boolean, as JSON writes it
    text = "".join(c if c.isprintable() else "?" for c in text[: _SHOWN_CHARS + 1])
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"


def _figure(value: object, digits: int = 2, unit: str = "") -> str:
    """A number as a figure; anything else as stated, marked as no number."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return f"{value:.{digits}f}{unit}"
    return NOT_STATED if value is None else f"{_shown(value)} (not a number)"


def _kind(value: object) -> str:
    kinds = {list: "a list", dict: "an object", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return kinds.get(type(value), type(value).__name__)


def _headline(payload: dict[str, object]) -> str:
    inputs = _object(payload.get("inputs"))
    draft = _pinned(inputs["draft"]) if inputs.get("draft") else _shown(inputs.get("method"))
    return (f"  {_shown(payload.get('verdict'))}: {draft} → {_pinned(inputs.get('verifier'))}"
            f" (k={_shown(inputs.get('num_speculative_tokens'))}) on {_shown(inputs.get('hardware'))}")  # fmt: skip


def _measured_on(value: object) -> list[str]:
    """Where it was measured, for a certificate that says (older ones do not: nothing is printed for them)."""
    found = _object(value)
    if not found:
        return []
    if found.get("kind") != "self-hosted":
        return [f"  measured on {_shown(found.get('kind'))} workers"]
    return [f"  measured SELF-HOSTED, on {_shown(found.get('owner'))}'s machine {_shown(found.get('worker'))} "
            f"(engine build {_shown(found.get('engine_build'))}): the owner's hardware, not SpecHub's"]  # fmt: skip


def _pinned(value: object) -> str:
    found = _object(value)
    return f"{_shown(found.get('repo_id'))}@{_shown(found.get('sha'))}" if found else _shown(value)


def _properties(payload: dict[str, object]) -> list[str]:
    """Each property's judgement; certificates from before per-property verdicts have none."""
    found = payload.get("properties")
    if not isinstance(found, dict):
        return [f"  properties: {NOT_STATED if found is None else _unreadable(found)}"]
    return [
        f"  {_shown(name)}: {_shown(judged.get('outcome'))} — {_shown(judged.get('reason'))}"
        if isinstance(judged, dict) else f"  {_shown(name)}: {_shown(judged)}"
        for name, judged in found.items()
    ]  # fmt: skip


def _unreadable(value: object) -> str:
    return f"unreadable ({_kind(value)} where an object belongs)"


def _results(results: object) -> list[str]:
    """A line for each measured section: acceptance, equivalence, throughput (with the best k)."""
    if results is not None and not isinstance(results, dict):
        return [f"  results: {_unreadable(results)}"]
    found = _object(results)
    speculative = _object(found.get("speculative"))
    return [
        _section("acceptance figures", speculative.get("acceptance"), _acceptance),
        _section("equivalence figures", found.get("equivalence"), _equivalence),
        *_temperatures(_object(speculative.get("acceptance")).get("by_temperature")),
        *_figures_mode(_object(speculative.get("acceptance")).get("mode")),
        *_modes(_object(speculative.get("acceptance")).get("by_mode")),
        _section("throughput figures", found.get("throughput"), _speedups),
        *_best_k(found.get("throughput")),
        *_schedule(_object(_object(found.get("throughput")).get("choice_of_k")).get("schedule")),
    ]


def _section(name: str, value: object, read: Callable[[dict[str, object]], str]) -> str:
    if not isinstance(value, dict):
        return f"  {name}: {NOT_MEASURED if value is None else _unreadable(value)}"
    return f"  {name}: {read(value) or NOT_MEASURED}"


def _acceptance(found: dict[str, object]) -> str:
    return (f"mean acceptance length {_figure(found.get('mean_acceptance_length'))}, "
            f"acceptance rate {_figure(found.get('acceptance_rate'))}")  # fmt: skip


def _equivalence(found: dict[str, object]) -> str:
    """Greedy (and reference) exact match per workload, and the sampling tests' lowest p; "" when none was run."""
    parts = [
        f"{name} exact match {_per_workload(found[name])}" for name in ("greedy", "reference") if found.get(name) is not None
    ]
    tests = found.get("sampling")
    if isinstance(tests, list):
        p_values = [p for p in (_object(test).get("p_value") for test in tests) if isinstance(p, int | float)]
        parts.append(f"sampling tests {len(tests)}, lowest p {_figure(min(p_values, default=None), 3)}")
    elif tests is not None:
        parts.append(f"sampling {_unreadable(tests)}")
    return "; ".join(parts)


def _per_workload(value: object) -> str:
    if not isinstance(value, dict):
        return _unreadable(value)
    return ", ".join(f"{_shown(name)} {_figure(_object(figures).get('exact_match'), 3)}" for name, figures in value.items())


def _speedups(found: dict[str, object]) -> str:
    """Each concurrency level's speedup with its interval, lowest level first."""
    levels = found.get("levels")
    if not isinstance(levels, dict):
        return f"levels {_unreadable(levels)}" if levels is not None else ""
    shown = [f"c={_shown(level)} {_speedup(_object(levels[level]))}" for level in sorted(levels, key=_level_order)]
    return "; ".join(shown)


def _level_order(level: str) -> tuple[bool, int, str]:
    return (not level.isdecimal(), int(level) if level.isdecimal() and len(level) < 10 else 0, level)


def _speedup(level: dict[str, object]) -> str:
    interval = level.get("speedup_interval")
    bounds = f" [{_figure(interval[0])}, {_figure(interval[1])}]" if isinstance(interval, list) and len(interval) == 2 else ""
    return f"{_figure(level.get('speedup'), unit='x')}{bounds}"


def _best_k(measured: object) -> list[str]:
    """The best k at each level: predicted there, then measured, with the measured figure's interval."""
    if not isinstance(measured, dict) or measured.get("choice_of_k") is None:
        return []
    try:
        parts = [_best_k_row(row) for row in best_k_of(cast(Throughput, measured))]
    except (LookupError, TypeError, ValueError, AttributeError, StopIteration):
        # The rows are the pages' own reading (kernel.result.best_k_of), which trusts the shape the issuer wrote.
        return ["  best k: unreadable (the choice of k is not in the shape this verifier reads)"]
    return [f"  best k: {'; '.join(parts)}"] if parts else []


def _best_k_row(row: BestKRow) -> str:
    speedup, interval, level = row["measured_speedup"], row["interval"], f"c={row['concurrency']} k={_shown(row['best_k'])}"
    if speedup is None or len(interval) != 2:
        return f"{level} (predicted only)"
    return f"{level} ({_figure(speedup, unit='x')} [{_figure(interval[0])}, {_figure(interval[1])}] measured)"


def _temperatures(rows: object) -> list[str]:
    """AL at each temperature measured, with its interval where it has one."""
    if rows is None:
        return []
    if not isinstance(rows, list):
        return [f"  acceptance by temperature: {_unreadable(rows)}"]
    shown = []
    for row in map(_object, rows):
        interval = row.get("mean_acceptance_length_interval")
        bounds = f" [{_figure(interval[0])}, {_figure(interval[1])}]" if isinstance(interval, list) and len(interval) == 2 else ""
        shown.append(f"{_figure(row.get('temperature'), 1)} {_figure(row.get('mean_acceptance_length'))}{bounds}")
    return [f"  acceptance by temperature: {'; '.join(shown)}"] if shown else []


def _figures_mode(found: object) -> list[str]:
    """Which mode the figures hold for: the prompts as written, or the chat template with its switches (issue 53)."""
    if found is None:
        return []
    mode = _object(found)
    switches = _object(mode.get("chat_template_kwargs"))
    told = ", ".join(f"{_shown(name)}={_shown(value)}" for name, value in switches.items()) or "its defaults"
    if mode.get("rendered") == "as written":
        return ["  figures hold for: the prompts as written (no chat template, so no thinking switch)"]
    return [f"  figures hold for: {_shown(mode.get('rendered'))}, switches {told}"]


def _modes(found: object) -> list[str]:
    """AL in each mode of the chat template's switch, each with its interval, and how far apart (issues 53, 60)."""
    if found is None:
        return []
    by_mode = _object(found)
    rows, apart = by_mode.get("modes"), _object(by_mode.get("difference"))
    if not isinstance(rows, list):
        return [f"  acceptance by mode: {_unreadable(found)}"]
    shown = [f"{_shown(row.get('mode'))} {_figure(row.get('mean_acceptance_length'))}"
             f"{_bounds(row.get('mean_acceptance_length_interval'))}" for row in map(_object, rows)]  # fmt: skip
    of = apart.get("of")
    named = " - ".join(map(_shown, of)) if isinstance(of, list) else "difference"
    shown.append(f"{named} {_figure(apart.get('mean_acceptance_length'))}{_bounds(apart.get('interval'))} paired over "
                 f"{_shown(apart.get('prompts'))} prompts")  # fmt: skip
    return [f"  acceptance by mode ({_shown(by_mode.get('switch'))}): {'; '.join(shown)}"]


def _bounds(interval: object) -> str:
    return f" [{_figure(interval[0])}, {_figure(interval[1])}]" if isinstance(interval, list) and len(interval) == 2 else ""


def _schedule(served: object) -> list[str]:
    """The batch-size schedule served: its ranges, each level's speedup, whether honoured, and whether to serve it."""
    if served is None:
        return []
    found = _object(served)
    ranges = found.get("ranges")
    if not isinstance(ranges, list) or not all(isinstance(r, list) and len(r) == 3 for r in ranges):
        return [f"  batch-size schedule: {_unreadable(served)}"]
    told = ", ".join(f"batches {_shown(r[0])}-{_shown(r[1])} k={_shown(r[2])}" for r in ranges)
    levels = _object(found.get("levels"))
    timed = "; ".join(f"c={_shown(level)} {_speedup(_object(levels[level]))}" for level in sorted(levels, key=_level_order))
    honoured = "honoured" if found.get("honoured") is True else f"NOT honoured ({_shown(found.get('finding'))})"
    return [f"  batch-size schedule: {told}; {timed}; {honoured}; {_shown(found.get('why'))}"]
