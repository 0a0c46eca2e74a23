"""Per-user serialisation: a user's quota-counted writes take their user row's lock first."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model


def user_lock(user: Any) -> None:
    """Hold `user`'s row until the transaction ends, so two requests of one user (in two web processes) count each
    other's rows before either creates its own; checking a quota, then creating, without it let 8 uploads at once
    reach 13 workloads against a limit of 10."""
    get_user_model().objects.select_for_update().filter(pk=user.pk).exists()
