"""The shared cache: Redis that fails open.

Rate limits and cached gate reports live here. When Redis is unreachable a request must still
be served (the broker-down path already is), so an unreachable cache reads as a miss and
writes are dropped, with one log line each, instead of a 500.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)
UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)


class FailOpenRedisCache(RedisCache):
    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        try:
            return super().get(key, default, version)
        except UNREACHABLE as exc:
            logger.warning("cache unreachable, read as a miss: %s", exc)
            return default

    def set(self, key: Any, value: Any, timeout: Any = None, version: int | None = None) -> None:
        try:
            super().set(key, value, timeout, version)
        except UNREACHABLE as exc:
            logger.warning("cache unreachable, write dropped: %s", exc)

    def add(self, key: Any, value: Any, timeout: Any = None, version: int | None = None) -> bool:
        try:
            return super().add(key, value, timeout, version)
        except UNREACHABLE as exc:
            logger.warning("cache unreachable, write dropped: %s", exc)
            return False
