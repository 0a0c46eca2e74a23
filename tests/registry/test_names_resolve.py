"""Ties that live in strings: every dotted name the code and the settings spell out resolves.

A task is sent by name, stages and the qualifier are found by dotted path, engines by a table of dotted paths: a
rename that misses one of these strings fails only when that string is used. This test reads them all at once.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.utils.module_loading import import_string

from registry.celery import app
from tests.support.processes import ROOT
from tests.test_layers import project_modules

pytestmark = pytest.mark.unit
DOTTED_PREFIXES = ("registry.", "kernel.", "workers.", "zoo.")  # not "spechub.": files are named so (spechub.sqlite3)


def spelled_names() -> Iterator[tuple[str, str]]:
    """(where, name) for every string constant in the project's code that is a whole dotted project name."""
    for module, path in project_modules().items():
        if module.split(".")[0] in ("tests", "bench"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _dotted(node.value):
                yield f"{path.relative_to(ROOT)}:{node.lineno}", node.value


def setting_names() -> Iterator[tuple[str, str]]:
    """(setting, name) for every dotted project name in Django's settings, at any depth (env values included)."""

    def walk(value: object) -> Iterator[str]:
        if isinstance(value, str):
            yield from [value] if _dotted(value) else []
        elif isinstance(value, dict):
            for item in value.values():
                yield from walk(item)
        elif isinstance(value, list | tuple | set | frozenset):
            for item in value:
                yield from walk(item)

    for setting in dir(settings):
        if setting.isupper():
            yield from ((setting, name) for name in walk(getattr(settings, setting)))


def _dotted(value: str) -> bool:
    return value.startswith(DOTTED_PREFIXES) and all(part.isidentifier() for part in value.split("."))


def resolves(name: str) -> bool:
    """A module, an attribute of one, or a Celery task registered under that name."""
    if name in app.tasks:
        return True
    try:
        importlib.import_module(name)
        return True
    except ImportError:
        pass
    try:
        import_string(name)
        return True
    except ImportError:
        return False


def test_every_dotted_name_in_the_code_and_the_settings_resolves():
    importlib.import_module("registry.tasks")  # registers every task
    names = [*spelled_names(), *setting_names()]
    assert len(names) > 30  # the reader finds them (settings' middleware, the stage and engine paths, task names)
    assert [f"{where}: {name}" for where, name in names if not resolves(name)] == []


def test_a_misspelt_name_would_be_found():
    assert not resolves("workers.stages.default_stagez") and not resolves("registry.certfy")
    assert resolves("registry.certify") and resolves("workers.certify")  # the task, and its old name for queued messages


def test_the_certify_task_keeps_its_old_name_for_messages_queued_before_the_rename():
    new, old = app.tasks["registry.certify"], app.tasks["workers.certify"]
    assert type(new).run is type(old).run  # one function under both names
    assert (new.soft_time_limit, new.time_limit, new.acks_late) == (old.soft_time_limit, old.time_limit, old.acks_late)
