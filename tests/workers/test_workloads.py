"""Workload suites: versioned files identified by content, and clear refusals of bad ones."""

from __future__ import annotations

import json

import pytest

from kernel.errors import UserError
from workers.workloads import CATEGORIES, load_suite, parse_suite
from workers.workloads.build import build


def test_the_toy_suite_covers_every_category_and_is_what_the_builder_writes():
    suite = load_suite("toy-v1")
    assert set(suite.categories) == set(CATEGORIES)
    assert parse_suite(build()).sha256 == suite.sha256  # the committed file is reproducible


def test_editing_one_prompt_makes_a_new_suite_identity(tmp_path):
    document = build()
    document["categories"]["math"][0] += " "
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(document))
    assert load_suite(str(path)).sha256 != load_suite("toy-v1").sha256


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "JSON object"),
        ({"name": "x", "version": 1, "max_tokens": 8, "categories": {"poetry": ["a"]}}, "subset"),
        ({"name": "x", "version": 1, "max_tokens": 8, "categories": {"math": [""]}}, "non-empty prompts"),
        ({"name": "x", "version": "1", "max_tokens": 8, "categories": {"math": ["a"]}}, "version"),
    ],
)
def test_a_malformed_suite_is_refused_naming_what_is_wrong(document, message):
    with pytest.raises(UserError, match=message) as refused:
        parse_suite(document)
    assert refused.value.code == "run:invalid-spec"


def test_a_missing_suite_file_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="cannot be read"):
        load_suite(str(tmp_path / "nothing.json"))
