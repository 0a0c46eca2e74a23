"""A low acceptance named: the likely causes SpecHub can check, each with its evidence (issue 53 §3).

Where AL reads near 1, or almost no draft token is accepted, users' reports point at a handful of misconfigurations,
and SpecHub holds what it needs to check each of them:
- the method against the checkpoint's format (the gate's format findings; EAGLE served for an EAGLE-3 head);
- the draft or its revision against the certified one (or no draft at all, so the verifier drafts for itself);
- vocabulary and tokenizer agreement between draft and verifier;
- a quantized verifier that is not the one the draft was certified with;
- a rejection method that is not lossless (`synthetic`, `fly`, synthetic acceptance);
- the chat template's thinking switch against the mode the figures were certified in.

`diagnose` compares what ran (`Setup`) with what was certified (another `Setup`, or None where nothing was) and
names each cause it finds evidence for; a field left None is not known and checks nothing. A healthy pair names none.
It speaks only where acceptance is low (`is_low`): elsewhere a difference is a configuration to report, not a cause.

Pure: no Django, no engine; a certification, a live window and an uploaded result all build `Setup`s.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from kernel.formats.options import not_lossless
from kernel.result.property_schema import Cause
from kernel.traffic.templates import THINKING_SWITCHES

LOW_AL = 1.1  # AL at or under this is "near 1": fewer than one accepted token in ten drafting steps
LOW_RATE = 0.05  # accepted / drafted tokens at or under this is "near zero"
UNQUANTIZED = "unquantized"
DRAFTLESS = frozenset({"ngram", "suffix"})
# MTP with no draft repo drafts with the verifier's own MTP layers, by design (issue 61 §4); with one it is an
# assistant (Gemma 4's), whose revision is compared like any draft's.
OWN_LAYERS = frozenset({"mtp"})
# The gate's codes that speak to each cause, by prefix.
FORMAT_CODES = ("gate:format-", "gate:geometry-", "gate:quantization-")
VOCABULARY_CODES = ("gate:tokenizer-", "gate:mapping-")

METHOD_FORMAT = "method-format"
DRAFT_REVISION = "draft-revision"
VOCABULARY = "vocabulary"
QUANTIZED_TARGET = "quantized-target"
LOSSY_REJECTION = "lossy-rejection"
THINKING_MODE = "thinking-mode"
CAUSES = {
    METHOD_FORMAT: "the method does not fit the draft checkpoint's format",
    DRAFT_REVISION: "the draft is not the certified one",
    VOCABULARY: "draft and verifier do not share one vocabulary",
    QUANTIZED_TARGET: "the verifier is quantized otherwise than when the draft was certified",
    LOSSY_REJECTION: "the rejection method is not lossless",
    THINKING_MODE: "the thinking switch is not set as it was certified",
}


@dataclass(frozen=True)
class Setup:
    """How a pair was served, as far as it is known (None: not known, so not checked)."""

    method: str | None = None
    draft: str | None = None  # repo id, "@sha" appended where pinned
    verifier: str | None = None
    verifier_quantization: str | None = None  # kernel.formats.quantization.scheme, or UNQUANTIZED
    draft_tokenizer: str | None = None  # content hashes (kernel.formats.tokenizer_hash)
    verifier_tokenizer: str | None = None
    options: Mapping[str, object] = field(default_factory=dict)  # the speculative config's other keys
    chat_template_kwargs: Mapping[str, object] | None = None  # None: not known; {}: the template's defaults
    findings: Sequence[Mapping[str, object]] = ()  # the gate's findings on this pair (code, severity, message)


def is_low(al: float | None, rate: float | None = None) -> bool:
    """AL near 1, or near-zero acceptance."""
    return (al is not None and al <= LOW_AL) or (rate is not None and rate <= LOW_RATE)


def diagnose(al: float | None, rate: float | None, served: Setup, certified: Setup | None = None) -> list[Cause]:
    """The causes of a low acceptance that the evidence names; none where acceptance is not low."""
    if not is_low(al, rate):
        return []
    checks = {
        METHOD_FORMAT: _method_format(served, certified),
        DRAFT_REVISION: _draft(served, certified),
        VOCABULARY: _vocabulary(served),
        QUANTIZED_TARGET: _quantization(served, certified),
        LOSSY_REJECTION: (message for _, message in not_lossless(served.options)),
        THINKING_MODE: _thinking(served, certified),
    }
    found = ((code, list(evidence)) for code, evidence in checks.items())
    return [{"code": code, "cause": CAUSES[code], "evidence": evidence} for code, evidence in found if evidence]


def _errors(served: Setup, prefixes: tuple[str, ...]) -> Iterator[str]:
    for finding in served.findings:
        if finding.get("severity") == "error" and str(finding.get("code", "")).startswith(prefixes):
            yield f"the gate: {finding.get('message', finding.get('code'))}"


def _method_format(served: Setup, certified: Setup | None) -> Iterator[str]:
    yield from _errors(served, FORMAT_CODES)
    if certified and None not in (served.method, certified.method) and served.method != certified.method:
        yield f"served with method {served.method!r}; certified with {certified.method!r}"


def _draft(served: Setup, certified: Setup | None) -> Iterator[str]:
    if served.method is not None and served.method not in DRAFTLESS | OWN_LAYERS and served.draft is None:
        yield f"method {served.method!r} names no draft, so the verifier is loaded as its own draft"
    elif served.draft and served.verifier and _repo(served.draft) == _repo(served.verifier) and served.method != "draft_model":
        yield f"the draft is the verifier itself ({served.draft}) under method {served.method!r}"
    if certified and served.draft and certified.draft and served.draft != certified.draft:
        yield f"served draft {served.draft}; certified draft {certified.draft}"


def _repo(name: str) -> str:
    return name.split("@", 1)[0].casefold()


def _vocabulary(served: Setup) -> Iterator[str]:
    yield from _errors(served, VOCABULARY_CODES)
    ours, theirs = served.draft_tokenizer, served.verifier_tokenizer
    if ours and theirs and ours != theirs:
        yield f"the draft's tokenizer hashes to {ours[:12]}, the verifier's to {theirs[:12]}"


def _quantization(served: Setup, certified: Setup | None) -> Iterator[str]:
    ours, theirs = served.verifier_quantization, certified.verifier_quantization if certified else None
    if ours and theirs and ours != theirs:
        yield f"the verifier served is {ours}; the draft was certified against a verifier {theirs}"


def thinking(kwargs: Mapping[str, object] | None) -> bool | None:
    """The thinking switch's value in chat_template_kwargs: None where it is not set (the template's default)."""
    for name in THINKING_SWITCHES:
        if kwargs and isinstance(kwargs.get(name), bool):
            return bool(kwargs[name])
    return None


def _thinking(served: Setup, certified: Setup | None) -> Iterator[str]:
    if certified is None or served.chat_template_kwargs is None or certified.chat_template_kwargs is None:
        return
    ours, theirs = thinking(served.chat_template_kwargs), thinking(certified.chat_template_kwargs)
    if ours != theirs:
        yield f"thinking {_mode(ours)} in the requests served; certified with thinking {_mode(theirs)}"


def _mode(value: bool | None) -> str:
    return "as the template defaults" if value is None else "on" if value else "off"


def causes_text(causes: Sequence[Cause]) -> str:
    """One line for a verdict's reason."""
    if not causes:
        return "none of the causes SpecHub checks is in evidence"
    return "; ".join(f"{c['cause']} ({', '.join(c['evidence'])})" for c in causes)


def served_by(spec: Mapping[str, object], stages: Mapping[str, object]) -> Setup:
    """What a result document says ran: its spec (pair, method, options), its gate report and its figures' mode.
    An uploaded document is hostile: what is not of the expected shape is left unknown."""
    gate, speculative = _mapping(stages.get("gate")), _mapping(stages.get("speculative"))
    mode = _mapping(_mapping(speculative.get("acceptance")).get("mode"))
    findings = gate.get("findings")
    options, kwargs = spec.get("options"), mode.get("chat_template_kwargs")
    return Setup(
        method=_text(spec.get("method")),
        draft=_pinned(spec.get("draft")),
        verifier=_pinned(spec.get("verifier")),
        options=options if isinstance(options, Mapping) else {},
        chat_template_kwargs=kwargs if isinstance(kwargs, Mapping) else None,
        findings=[f for f in findings if isinstance(f, Mapping)] if isinstance(findings, list) else (),
    )


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _pinned(ref: object) -> str | None:
    repo, sha = _text(_mapping(ref).get("repo_id")), _text(_mapping(ref).get("sha"))
    return f"{repo}@{sha}" if repo and sha else repo
