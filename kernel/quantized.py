"""What quantization costs a pair in acceptance: its AL against the unquantized pair's, on the same prompts.

Both pairs run the same prompts in the same order, greedily, and each prompt's own counters (drafting steps,
accepted tokens) are kept. The change is ΔAL = Σb/Σe - Σa/Σd (quantized minus unquantized), and its interval comes
from a jackknife over prompts that leaves one prompt out of both pairs at once: the prompt is the unit, and pairing
cancels what a prompt does to both (an easy prompt is easy for both), which unpaired intervals would count twice.

The t takes a third of the prompts' effective number (Kish, the smaller of the two pairs'), the small-sample rule
AL's own interval over prompts uses (workers/prompt_intervals.py), and too few prompts give no interval. The end on the
side the prompts' influence leans to adds Hall's skew term, as the thinking switch's paired difference does
(prompt_intervals.difference_interval): symmetric, with output lengths tied to acceptance, it held the change 0.89-0.94
of the time at 16-256 prompts, its misses on that side (issue 63 §4, tests/workers/test_skew_either_way.py).

Pure: no Django, no engine.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import TypedDict

from kernel.formats.inputs import is_repo_id
from kernel.formats.quantization import scheme
from kernel.stats import t_quantile

# Below these no interval over prompts is published, here or by the workers (workers/prompt_intervals.py reads them):
# issue 63 §4 found coverage holds from 12 prompts, 0.83-0.88 at 8 where the long prompts are the poorly accepted.
MIN_PROMPTS = 12
MIN_EFFECTIVE_PROMPTS = 6.0
SKEW_WEIGHT = 3.0  # as workers.prompt_intervals.PLAIN_SKEW_WEIGHT, the skew term's weight on either end
NO_CHANGE, LOWER, HIGHER = "no measurable change", "lower", "higher"


class PromptCounts(TypedDict):
    """One prompt's own counters in one pair's run."""

    drafts: int
    accepted: int


class AlChange(TypedDict):
    """The quantized pair's acceptance against its unquantized pair's, paired per prompt."""

    al: float  # the quantized pair's
    al_unquantized: float
    change: float  # al - al_unquantized
    interval: list[float] | None  # the change's 95 % interval over prompts; None below MIN_PROMPTS
    prompts: int
    prompts_effective: float
    reading: str  # NO_CHANGE, LOWER or HIGHER, by the interval (the point alone where there is none)


class Unpaired(ValueError):
    """The two runs' prompts cannot be paired."""


def _al(drafts: Sequence[int], accepted: Sequence[int]) -> float:
    return 1 + sum(accepted) / sum(drafts)


def _kish(drafts: Sequence[int]) -> float:
    total = sum(drafts)
    return total * total / sum(d * d for d in drafts) if total else 0.0


def al_change(unquantized: Sequence[PromptCounts], quantized: Sequence[PromptCounts]) -> AlChange:
    """Return the quantized pair's AL change against the unquantized pair's, per prompt, with its 95 % interval."""
    if len(unquantized) != len(quantized):
        raise Unpaired(f"{len(unquantized)} prompts against {len(quantized)}: the pairs must run the same prompts")
    d, a = [p["drafts"] for p in unquantized], [p["accepted"] for p in unquantized]
    e, b = [p["drafts"] for p in quantized], [p["accepted"] for p in quantized]
    if not sum(d) or not sum(e):
        raise Unpaired("a pair drafted nothing: there is no acceptance to compare")
    base, ours = _al(d, a), _al(e, b)
    effective = min(_kish(d), _kish(e))
    interval = _interval(d, a, e, b, ours - base, effective)
    return {
        "al": ours,
        "al_unquantized": base,
        "change": ours - base,
        "interval": interval,
        "prompts": len(d),
        "prompts_effective": round(effective, 1),
        "reading": reading(ours - base, interval),
    }


def _interval(
    d: Sequence[int], a: Sequence[int], e: Sequence[int], b: Sequence[int], change: float, effective: float
) -> list[float] | None:
    if len(d) < MIN_PROMPTS or effective < MIN_EFFECTIVE_PROMPTS:
        return None
    left_out = _left_out(d, a, e, b)
    if len(left_out) < 2:
        return None
    centre = statistics.fmean(left_out)
    influence = [centre - x for x in left_out]  # a prompt that raises the change has a positive influence
    second = math.fsum(x * x for x in influence) / len(d)
    error = math.sqrt((len(d) - 1) * second)
    skew = math.fsum(x**3 for x in influence) / len(d) / second**1.5 if error else 0.0
    t = t_quantile(0.975, max(1, math.floor(effective / 3)))
    return [change - _skewed_t(t, -skew, len(d)) * error, change + _skewed_t(t, skew, len(d)) * error]


def _left_out(d: Sequence[int], a: Sequence[int], e: Sequence[int], b: Sequence[int]) -> list[float]:
    """The change with each prompt left out of both pairs at once."""
    left_out = []
    total_a, total_b, total_d, total_e = sum(a), sum(b), sum(d), sum(e)  # once: each leave-one-out is then O(1)
    for i in range(len(d)):
        rest_d, rest_e = total_d - d[i], total_e - e[i]
        if rest_d and rest_e:
            left_out.append((total_b - b[i]) / rest_e - (total_a - a[i]) / rest_d)
    return left_out


def _skewed_t(t: float, skew: float, n: int) -> float:
    """The upper end's t with Hall's term for the influence's right skew (-skew for the low end), as
    workers.prompt_intervals._skew_term: at most t again, and never narrower."""
    return t + min(SKEW_WEIGHT * max(0.0, skew) * (2 * t * t + 1) / (6 * math.sqrt(n)), t)


def reading(change: float, interval: Sequence[float] | None) -> str:
    """Lower or higher only where the whole interval says so; with no interval, no claim."""
    if interval is None or interval[0] <= 0 <= interval[1]:
        return NO_CHANGE
    return LOWER if change < 0 else HIGHER


def change_text(found: AlChange) -> str:
    """One line for the page and the certificate."""
    shown = f"AL {found['al']:.2f} quantized against {found['al_unquantized']:.2f} unquantized"
    if found["interval"] is None:
        return f"{shown}: change {found['change']:+.2f} over {found['prompts']} prompts (too few for an interval)"
    low, high = found["interval"]
    return (f"{shown}: change {found['change']:+.2f}, 95 % interval [{low:+.2f}, {high:+.2f}] over "
            f"{found['prompts']} prompts paired: {found['reading']}")  # fmt: skip


# Which pair a quantized one derives from, and the two runs' per-prompt counters (issue 53 §2).
BASE_MODEL, RELATION, QUANTIZED = "base_model", "base_model_relation", "quantized"


def base_of(config: object) -> str | None:
    """The repo a quantized checkpoint was made from: the Hub's model-card convention (`base_model` with
    `base_model_relation: quantized`), read from config.json, where SpecHub reads a repo (it reads no model card).
    None where the config does not say so in that form; hostile input is never trusted beyond a repo id's shape."""
    if not isinstance(config, dict) or config.get(RELATION) != QUANTIZED:
        return None
    base = config.get(BASE_MODEL)
    return base if isinstance(base, str) and "/" in base and is_repo_id(base) else None


def prompt_counts(acceptance: object) -> list[PromptCounts] | None:
    """A result document's per-prompt counters (acceptance.per_prompt: drafts and accepted, in suite order), or None
    where the document has none of the right shape (made before issue 53, or hostile: a list longer or shorter than
    the prompts the run counts)."""
    found = acceptance.get("per_prompt") if isinstance(acceptance, dict) else None
    drafts = found.get("drafts") if isinstance(found, dict) else None
    accepted = found.get("accepted") if isinstance(found, dict) else None
    if not isinstance(drafts, list) or not isinstance(accepted, list) or len(drafts) != len(accepted):
        return None
    prompts = acceptance.get("prompts") if isinstance(acceptance, dict) else None
    if prompts is not None and prompts != len(drafts):
        return None
    if not all(_count(x) for x in (*drafts, *accepted)):
        return None
    return [{"drafts": d, "accepted": a} for d, a in zip(drafts, accepted, strict=True)]


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class Side(TypedDict):
    """One checkpoint of a pair as quantized: its scheme (kernel.formats.quantization.scheme) and its base repo."""

    scheme: str
    base_model: str | None


class Derivation(TypedDict):
    """Which of a pair's checkpoints are quantized, and from what (a result document's environment.quantization)."""

    draft: Side | None
    verifier: Side | None


def derivation(draft_config: object, verifier_config: object) -> Derivation:
    """What the pair's two configs say of their quantization; a side is None where it is not quantized."""

    def side(config: object) -> Side | None:
        found = scheme(config)
        return None if found is None else {"scheme": found, "base_model": base_of(config)}

    return {"draft": side(draft_config), "verifier": side(verifier_config)}


def sides(found: object) -> dict[str, Side]:
    """A stored document's quantized sides, by role ('draft', 'verifier'); what is not of the right shape is left out."""
    if not isinstance(found, dict):
        return {}
    kept: dict[str, Side] = {}
    for role in ("draft", "verifier"):
        entry = found.get(role)
        if isinstance(entry, dict) and isinstance(entry.get("scheme"), str):
            base = entry.get("base_model")
            kept[role] = {"scheme": entry["scheme"], "base_model": base if isinstance(base, str) and is_repo_id(base) else None}
    return kept


# What must match for two runs' prompts to pair: the same suite (by digest) and prompt count, build, hardware and k.
PAIRED_ON = (("workloads", "sha256"), ("workloads", "prompts"), ("engine_build",), ("hardware_class",), ("k",))


def unpaired_reason(ours: object, theirs: object) -> str | None:
    """Why two runs' environments cannot be paired per prompt, or None where they can."""
    for path in PAIRED_ON:
        mine, other = _at(ours, path), _at(theirs, path)
        if mine is None or mine != other:
            return f"{'.'.join(path)} differs ({other!r} there, {mine!r} here)"
    return None


def _at(document: object, path: tuple[str, ...]) -> object:
    for key in path:
        document = document.get(key) if isinstance(document, dict) else None
    return document
