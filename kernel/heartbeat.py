"""A background heartbeat for long stages (an engine start alone can take a minute)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType


class Heartbeat:
    """Call `beat` every `interval` seconds on a thread until the block ends or beat returns False."""

    def __init__(self, beat: Callable[[], bool], interval: float) -> None:
        self._beat = beat
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="spechub-heartbeat", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            if not self._beat():
                return

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
