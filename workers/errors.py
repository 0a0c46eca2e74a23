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
            raise KeyError(f"unknown error code {code!r}; add it to workers/errors.py")
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
