"""Soft and hard time limits enforced inside the task.

Celery's solo pool, which engine workers need, runs tasks inline and ignores
`soft_time_limit` and `time_limit`, so the task enforces them itself: the soft
limit raises SoftTimeLimitExceeded in the task (SIGALRM, main thread only), and
the hard limit reports the failure and ends the worker process, as prefork
would end its child.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType

from celery.exceptions import SoftTimeLimitExceeded

HARD_LIMIT_EXIT_CODE = 70


class TimeLimits:
    """Raise SoftTimeLimitExceeded after `soft` seconds; call `on_hard` and exit after `hard`."""

    def __init__(self, soft: float, hard: float, on_hard: Callable[[], None]) -> None:
        self.soft, self.hard, self._on_hard = soft, hard, on_hard
        self._done = threading.Event()
        self._watchdog = threading.Thread(target=self._watch, name="spechub-hard-limit", daemon=True)
        self._armed = threading.current_thread() is threading.main_thread()
        self._previous: object = None

    def __enter__(self) -> TimeLimits:
        if self._armed:
            self._previous = signal.signal(signal.SIGALRM, self._raise_soft)
            signal.setitimer(signal.ITIMER_REAL, self.soft)
        self._watchdog.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)  # type: ignore[arg-type]
        self._done.set()
        self._watchdog.join()

    def _raise_soft(self, signum: int, frame: FrameType | None) -> None:
        raise SoftTimeLimitExceeded(f"soft time limit ({self.soft:g} s) exceeded")

    def _watch(self) -> None:
        if self._done.wait(self.hard):
            return
        try:
            self._on_hard()
        finally:
            os._exit(HARD_LIMIT_EXIT_CODE)
