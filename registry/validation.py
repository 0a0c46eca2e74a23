"""Validators for hostile identifiers: repo ids, revisions and commit shas."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError

from kernel.formats.inputs import is_repo_id
from kernel.formats.options import not_lossless
from registry.params import echo

_SHA = re.compile(r"^[0-9a-f]{40}$")
_REVISION = re.compile(r"^(?![./-])(?!.*\.\.)(?!.*//)[A-Za-z0-9_./-]{1,200}(?<![./])$")


def validate_repo_id(value: str) -> None:
    """Raise ValidationError unless value is a Hub repo id such as 'org/name'."""
    if not is_repo_id(value):
        raise ValidationError(
            f"{echo(value)} is not a Hub repo id; use 'org/name' with letters, digits, '-', '_' or '.'.",
            code="invalid-repo-id",
        )


def validate_sha(value: str) -> None:
    """Raise ValidationError unless value is a full 40-hex commit sha."""
    if not _SHA.fullmatch(value):
        raise ValidationError(f"{echo(value)} is not a full 40-character lowercase commit sha.", code="invalid-sha")


def validate_revision(value: str) -> None:
    """Raise ValidationError unless value is a safe branch, tag or sha."""
    if not _REVISION.fullmatch(value):
        raise ValidationError(
            f"{echo(value)} is not a valid revision; use a branch, a tag or a commit sha without '..' or leading '/'.",
            code="invalid-revision",
        )


def validate_lossless_options(options: object) -> None:
    """Refuse pair options that make speculation lossy, with the gate's own reasons (kernel.formats.rules)."""
    if not isinstance(options, dict):
        raise ValidationError("Options must be a JSON object of speculative-config keys.", code="invalid")
    problems = [message for _, message in not_lossless(options)]
    if problems:
        raise ValidationError(" ".join(problems), code="not-lossless")
