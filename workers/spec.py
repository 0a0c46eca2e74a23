"""The run specification handed to the director, and nothing Django."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModelRef:
    """A Hub repo pinned to a commit."""

    repo_id: str
    sha: str


@dataclass(frozen=True)
class RunSpec:
    """Everything one certification needs; built by the registry, read by the director."""

    run_id: int
    attempt: int
    verifier: ModelRef
    draft: ModelRef | None
    method: str
    num_speculative_tokens: int
    engine: str
    hardware: str
    verifier_dtype: str = "auto"
    draft_dtype: str = "auto"
    options: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
