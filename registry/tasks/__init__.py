"""Celery tasks: thin interfaces that load ids, call one service, and own retry policy.

The registry app imports this package when it is ready, so every task is registered under
its name before a service sends one (registry.dispatch sends by name, never by import).
"""

from registry.tasks import certify, qualify, revoke, upkeep

__all__ = ["certify", "qualify", "revoke", "upkeep"]
