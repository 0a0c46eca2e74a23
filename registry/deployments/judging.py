"""Reads for judging someone's own run (`spechub judge`, the judge page and endpoint): the certified band a
`vllm bench serve` result or a saved /metrics is held to, and the judgement. Nothing is stored: the file is read,
judged and dropped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from django.core.files.uploadedfile import UploadedFile
from django.db.models import QuerySet

from kernel import judging, result, vllm_results
from registry.deployments.selectors import at_temperature
from registry.models import CertificationRun, Pair
from registry.runs.selectors import run_document
from registry.states import RunState


class NotCertified(Exception):
    """No finished public run of such a pair on that hardware: nothing to hold the file to."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class Question:
    """Which certified band a file is held to."""

    draft: str  # the draft's repo id; "" for a pair without one (ngram, suffix)
    verifier: str
    k: int | None = None  # None: the file's own (the positions it counts)
    temperature: float | None = None  # None: the file's own where it says, else 0, and the answer says it was assumed
    hardware: str = "cpu"


class Held(TypedDict):
    """The certified run a file was held to."""

    pair: int
    run: int
    engine_version: str
    hardware: str
    temperature: float
    temperature_from: str  # "given", "the file", or "assumed" (neither said: vllm bench serve writes none)


class Answer(judging.Judgement):
    held: Held


def pairs_asked(*, question: Question, k: int | None) -> QuerySet[Pair]:
    """The pairs of that draft and verifier (repo ids matched without case), at k where it is known."""
    pairs = Pair.objects.filter(verifier__repo_id__iexact=question.verifier)
    pairs = pairs.filter(draft__repo_id__iexact=question.draft) if question.draft else pairs.filter(draft__isnull=True)
    return pairs.filter(num_speculative_tokens=k) if k is not None else pairs


def certified_run_for(*, question: Question, k: int | None) -> CertificationRun:
    """The newest finished, unrevoked run on the public suite of such a pair on the hardware; NotCertified says why
    none."""
    pairs = pairs_asked(question=question, k=k)
    runs = CertificationRun.objects.public().filter(pair__in=pairs, state=RunState.FINISHED, hardware=question.hardware)
    runs = runs.exclude(certificate__revoked_at__isnull=False)  # a revoked certificate's band holds nobody's run
    found = runs.select_related("pair").order_by("-finished_at", "-id").first()
    if found is not None:
        return found
    draft = question.draft or "no draft"
    at_k = f" at k={k}" if k is not None else ""
    if not pairs.exists():
        raise NotCertified("judge:no-pair", f"SpecHub has no pair of {draft} with {question.verifier}{at_k}; submit it first.")
    raise NotCertified("judge:not-certified", f"The pair of {draft} with {question.verifier}{at_k} has no finished "
                       f"certification on {question.hardware}; there is no band to hold the file to.")  # fmt: skip


def band_for(*, run: CertificationRun, temperature: float) -> judging.Band:
    """The band the run certified at `temperature`: AL's interval over its prompts, and each position's."""
    try:
        accepted = result.acceptance(run_document(run))
    except result.UnreadableResult:
        accepted = None
    if accepted is None:
        raise NotCertified("judge:no-acceptance", f"Run {run.pk} holds no acceptance this SpecHub can read.")
    rows = [row for row in accepted.get("by_temperature", []) if row["temperature"] == temperature]
    figures = rows[0] if rows else at_temperature(accepted, temperature)
    if figures is None:
        measured = ", ".join(f"{row['temperature']:g}" for row in accepted.get("by_temperature", [])) or "0"
        raise NotCertified("judge:temperature-not-measured", f"Run {run.pk} measured acceptance at temperature "
                           f"{measured}, not {temperature:g}; judge at one of those.")  # fmt: skip
    spans = rows[0].get("per_position_interval", []) if rows else []
    return judging.band_of(figures.get("mean_acceptance_length"), figures.get("mean_acceptance_length_interval"),
                           figures.get("per_position") or [], spans, run.pair.num_speculative_tokens)  # fmt: skip


def file_judge(*, data: bytes, name: str, question: Question) -> Answer:
    """Read the file, find the band, judge; vllm_results.Refused or NotCertified say why not."""
    observed = vllm_results.read(data, name=name)
    temperature, source = _temperature(question, observed, name)
    run = certified_run_for(question=question, k=question.k if question.k is not None else observed.k)
    judged = judging.judge(observed, band_for(run=run, temperature=temperature))
    held: Held = {"pair": run.pair_id, "run": run.pk, "engine_version": run.engine_version, "hardware": run.hardware,
                  "temperature": temperature, "temperature_from": source}  # fmt: skip
    if source == ASSUMED:
        judged["note"] = "; ".join(filter(None, [judged["note"], ASSUMED_NOTE]))
    return {**judged, "held": held}


ASSUMED = "assumed"
ASSUMED_NOTE = ("temperature 0 assumed: neither the file nor the request says. vllm bench serve writes no temperature, "
                "and without --temperature 0 its requests sample at the server's default (often 1); give the run's "
                "temperature, or run with --temperature 0 --metadata temperature=0")  # fmt: skip


def _temperature(question: Question, observed: vllm_results.Observed, name: str) -> tuple[float, str]:
    """The temperature the file is held at, and where it was read: the request's, the file's, or 0 assumed."""
    given, stated = question.temperature, observed.temperature
    if given is not None and stated is not None and given != stated:
        raise vllm_results.Refused("judge:temperature-conflict", f"{name} says temperature {stated:g}, and the "
                                   f"request {given:g}: leave the request's out, or judge the file it names")  # fmt: skip
    if given is not None:
        return given, "given"
    return (stated, "the file") if stated is not None else (0.0, ASSUMED)


@dataclass(frozen=True)
class Refusal:
    """Why a file was not judged: its fault, or no certified band."""

    code: str
    message: str
    status: int  # 422: the file cannot be judged; 404: no certified band to hold it to


def judge_upload(*, upload: UploadedFile[bytes], question: Question) -> Answer | Refusal:
    """The judgement of an uploaded file, or why there is none; at most MAX_BYTES + 1 of it is read."""
    name = (upload.name or "the file")[:100]
    try:
        return file_judge(data=upload.read(vllm_results.MAX_BYTES + 1), name=name, question=question)
    except vllm_results.Refused as refused:
        return Refusal(refused.code, refused.message, 422)
    except NotCertified as missing:
        return Refusal(missing.code, missing.message, 404)
