"""Every error a run can end with: a stable code, whose fault it is, and what to do.

The texts live here and nowhere else. `UserError` (a bad repo, an incompatible
pair) never retries; `InfraError` (OOM, a lost worker, a download) retries with
backoff until the run's attempts are spent.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Fault(StrEnum):
    USER = "user"
    INFRA = "infra"


@dataclass(frozen=True)
class ErrorText:
    fault: Fault
    message: str
    hint: str
    retryable: bool = True


ERRORS: dict[str, ErrorText] = {
    "director:no-stages": ErrorText(
        Fault.INFRA,
        "This worker has no measuring stages installed.",
        "Set SPECHUB_DIRECTOR_STAGES to the dotted path of a stage factory, or deploy a worker build that ships one.",
        retryable=False,
    ),
    "director:bad-stages": ErrorText(
        Fault.INFRA,
        "SPECHUB_DIRECTOR_STAGES does not name a callable that returns stages.",
        "Point SPECHUB_DIRECTOR_STAGES at 'package.module.factory' where factory() returns a list of stages.",
        retryable=False,
    ),
    "worker:lost": ErrorText(
        Fault.INFRA,
        "The worker running this certification stopped sending heartbeats.",
        "Nothing to do: the run is re-queued automatically until its attempts are spent.",
    ),
    "worker:time-limit": ErrorText(
        Fault.INFRA,
        "The certification ran past its time limit.",
        "Raise SPECHUB_RUN_SOFT_TIME_LIMIT, or certify with fewer workloads or concurrency levels.",
    ),
    "worker:attempts-exhausted": ErrorText(
        Fault.INFRA,
        "The certification failed on every attempt it was allowed.",
        "Check the worker logs for the last error, then ask an operator to re-certify.",
        retryable=False,
    ),
    "worker:crashed": ErrorText(
        Fault.INFRA,
        "The certification crashed with an unexpected error.",
        "This is a SpecHub bug or an infrastructure fault; the run retries automatically.",
    ),
    "own-machines:no-worker": ErrorText(
        Fault.USER,
        "The run was for your own machines only, and none of your workers on its hardware class came for it in time.",
        "Start `python -m workers serve` on a machine of yours with this label (register it on your workers page), "
        "then certify again; or certify on SpecHub's hosted workers. This run no longer counts against your daily runs.",
    ),
    "hub:not-found": ErrorText(
        Fault.USER,
        "The Hub has no such repository, or no such revision in it.",
        "Check the repo id (org/name) and the revision (branch, tag or full commit sha) on the Hub, then submit again.",
    ),
    "hub:revision-not-found": ErrorText(
        Fault.USER,
        "The repository exists but has no such revision.",
        "Use a branch, a tag or a full 40-character commit sha that exists in the repository.",
    ),
    "hub:file-not-found": ErrorText(
        Fault.USER,
        "A file SpecHub needs is missing from the repository at that revision.",
        "Add the file (usually config.json) to the repository and submit the new revision.",
    ),
    "hub:gated": ErrorText(
        Fault.USER,
        "The repository is gated, and SpecHub's Hub account has not been granted access to it.",
        "Accept the repository's conditions for SpecHub's Hub account (or make the repository public), then submit again.",
    ),
    "hub:gated-no-token": ErrorText(
        Fault.INFRA,
        "The repository is gated, and this SpecHub deployment has no Hub token to read gated repositories with.",
        "An operator must set HF_TOKEN (or SPECHUB_HUB_READ_TOKEN) to a read token of an account granted access.",
        retryable=False,
    ),
    "hub:token-rejected": ErrorText(
        Fault.INFRA,
        "The Hub rejected this SpecHub deployment's Hub token.",
        "An operator must replace HF_TOKEN (or SPECHUB_HUB_READ_TOKEN) with a valid read token.",
        retryable=False,
    ),
    "hub:unsafe-filename": ErrorText(
        Fault.USER,
        "The repository lists a file name SpecHub refuses to handle.",
        "Rename files so that no name is absolute, contains '..', a backslash or control characters.",
    ),
    "hub:refused": ErrorText(
        Fault.USER,
        "The Hub refused the request for this repository (a client error, not an outage).",
        "Check the repo id and revision; if they are right, the Hub's message in the details says what it wants.",
    ),
    "hub:unreachable": ErrorText(
        Fault.INFRA,
        "The Hub could not be reached.",
        "Nothing to do on your side: SpecHub retries. Operators: check HF_ENDPOINT and the network.",
    ),
    "hub:timeout": ErrorText(
        Fault.INFRA,
        "The Hub did not answer in time.",
        "Nothing to do on your side: SpecHub retries with backoff.",
    ),
    "hub:server-error": ErrorText(
        Fault.INFRA,
        "The Hub answered with a server error or asked SpecHub to slow down.",
        "Nothing to do on your side: SpecHub retries with backoff.",
    ),
    "repo:unreadable": ErrorText(
        Fault.INFRA,
        "A local model folder could not be read.",
        "Check that the folder exists and that SpecHub's user may read every file in it.",
        retryable=False,
    ),
    "gate:incompatible": ErrorText(
        Fault.USER,
        "The compatibility gate refused the pair.",
        "Fix what each finding names (its hint says how), push a new revision, and submit again.",
    ),
    "engine:unknown": ErrorText(
        Fault.INFRA,
        "The run names an engine this worker does not have.",
        "Use one of the engines in workers.engines.ENGINES, or set SPECHUB_DEFAULT_ENGINE.",
        retryable=False,
    ),
    "engine:no-server": ErrorText(
        Fault.INFRA,
        "The run's engine cannot serve requests, and speed is measured against servers.",
        "Certify with an engine that has a server (vllm); the reference engine only checks outputs.",
        retryable=False,
    ),
    "engine:start-failed": ErrorText(
        Fault.INFRA,
        "The engine could not start on this worker.",
        "Check the worker's memory and device; the run retries on another attempt.",
    ),
    "engine:refused-pair": ErrorText(
        Fault.USER,
        "The engine refused to load this pair.",
        "Read the engine's message; fix the draft's config or pick a method the engine serves.",
    ),
    "serve:start-failed": ErrorText(
        Fault.INFRA,
        "A measuring server (`vllm serve` with the published arguments) did not come up.",
        "The offline engine had loaded the same pair, so this is the engine's server or the machine: "
        "read the server log tail in the message; the run retries on another attempt.",
    ),
    "serve:request-failed": ErrorText(
        Fault.INFRA,
        "A measuring server failed requests during the timed blocks.",
        "Read the server's error in the message; the run retries on another attempt.",
    ),
    "workload:invalid": ErrorText(
        Fault.USER,
        "The workload file has a request SpecHub cannot read.",
        'Fix the line and field named in the message (docs/catalog.md, "Your own traffic", lists the formats), '
        "then upload or run again.",
    ),
    "workload:placeholder": ErrorText(
        Fault.USER,
        "The workload holds a SPEED-Bench row whose prompt is a placeholder; nothing of the upload was kept.",
        "Resolve the dataset first: run the preparation step SPEED-Bench's dataset card gives, which fetches each such "
        "row's text from its source (by source and src_id) into `turns`, then upload the file it writes; or drop the "
        "rows named.",
    ),
    "workload:too-large": ErrorText(
        Fault.USER,
        "The workload is over a size limit.",
        "Upload a smaller sample: SpecHub down-samples large files itself, but the file must fit the limits named.",
    ),
    "workload:too-long": ErrorText(
        Fault.USER,
        "A prompt does not fit the engine's context once templated.",
        "Shorten or remove the request named, or lower its max_tokens, so the prompt plus its output fits.",
    ),
    "workload:template-unsafe": ErrorText(
        Fault.USER,
        "The verifier's chat template tried something the sandbox forbids.",
        "Chat templates may only format messages: use a verifier whose template stays out of Python internals, "
        "or upload plain prompts.",
    ),
    "workload:template-invalid": ErrorText(
        Fault.USER,
        "The verifier's chat template failed to render these messages.",
        "Read the template's error in the message; upload plain prompts, or messages the template accepts.",
    ),
    "workload:template-too-costly": ErrorText(
        Fault.USER,
        "Rendering the verifier's chat template spent its budget; nothing of the upload was kept.",
        "A chat template formats messages: use a verifier whose template does not loop or build strings without end, "
        "or upload plain prompts.",
    ),
    "run:invalid-spec": ErrorText(
        Fault.USER,
        "The run's specification is invalid.",
        "Fix the pair or the run parameters named in the message and submit again.",
    ),
}


class RunError(Exception):
    """An error that ends or retries a run; its code is a key of ERRORS."""

    def __init__(self, code: str, detail: str = "") -> None:
        if code not in ERRORS:
            raise KeyError(f"unknown error code {code!r}; add it to kernel/errors.py")
        self.code = code
        self.text = ERRORS[code]
        self.detail = detail
        super().__init__(self.message)

    @property
    def fault(self) -> Fault:
        return self.text.fault

    @property
    def retryable(self) -> bool:
        return self.fault is Fault.INFRA and self.text.retryable

    @property
    def message(self) -> str:
        base = f"{self.text.message} {self.detail}".strip()
        return f"{base} What to do: {self.text.hint}"


class UserError(RunError):
    """The submitter's fault: a bad repo or an incompatible pair. Never retried."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(code, detail)
        if self.fault is not Fault.USER:
            raise ValueError(f"{code!r} is an infrastructure error; raise InfraError")


class InfraError(RunError):
    """The infrastructure's fault: OOM, a lost worker, a download. Retried with backoff."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(code, detail)
        if self.fault is not Fault.INFRA:
            raise ValueError(f"{code!r} is a user error; raise UserError")
