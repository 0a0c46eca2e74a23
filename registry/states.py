"""The certification run's state machine: the states and every legal transition."""

from __future__ import annotations

from django.db import models


class RunState(models.TextChoices):
    QUEUED = "queued"
    FETCHING = "fetching"
    GATING = "gating"
    MEASURING = "measuring"
    PUBLISHING = "publishing"
    FINISHED = "finished"
    FAILED_USER = "failed_user"
    FAILED_INFRA = "failed_infra"
    CANCELLED = "cancelled"
    # Marked by the system when a heartbeat goes quiet; a stale run is re-queued.
    STALE = "stale"


FINAL_STATES = frozenset({RunState.FINISHED, RunState.FAILED_USER, RunState.FAILED_INFRA, RunState.CANCELLED})
# The active states in the order a run goes through them.
ACTIVE_PATH = (RunState.FETCHING, RunState.GATING, RunState.MEASURING, RunState.PUBLISHING)
ACTIVE_STATES = frozenset(ACTIVE_PATH)

_ENDINGS = {RunState.FAILED_USER, RunState.FAILED_INFRA, RunState.CANCELLED, RunState.STALE}

TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    # A run for its owner's own machines only fails unstarted when none of their workers comes for it in time.
    RunState.QUEUED: frozenset({RunState.FETCHING, RunState.FAILED_USER, RunState.CANCELLED}),
    # An active run may move on, fail, be cancelled, go stale, or go back to
    # the queue for an infrastructure retry.
    RunState.FETCHING: frozenset({RunState.GATING, RunState.QUEUED, *_ENDINGS}),
    RunState.GATING: frozenset({RunState.MEASURING, RunState.QUEUED, *_ENDINGS}),
    RunState.MEASURING: frozenset({RunState.PUBLISHING, RunState.QUEUED, *_ENDINGS}),
    RunState.PUBLISHING: frozenset({RunState.FINISHED, RunState.QUEUED, *_ENDINGS}),
    RunState.STALE: frozenset({RunState.QUEUED, RunState.FAILED_INFRA, RunState.CANCELLED}),
    RunState.FINISHED: frozenset(),
    RunState.FAILED_USER: frozenset(),
    RunState.FAILED_INFRA: frozenset(),
    RunState.CANCELLED: frozenset(),
}

# Which run state each director stage belongs to.
STAGE_STATES: dict[str, RunState] = {
    "fetch": RunState.FETCHING,
    "gate": RunState.GATING,
    "baseline": RunState.MEASURING,
    "speculative": RunState.MEASURING,
    "equivalence": RunState.MEASURING,
    "throughput": RunState.MEASURING,
    "smoke": RunState.MEASURING,
    "verdict": RunState.MEASURING,
}


def can_transition(source: str, target: str) -> bool:
    """Return whether the state machine allows source → target."""
    return RunState(target) in TRANSITIONS[RunState(source)]
