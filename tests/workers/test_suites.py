"""Workload suites: versioned files identified by content, and clear refusals of bad ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel.errors import UserError
from kernel.traffic import Request, workload_path, write_sample
from workers import metrics
from workers.suites import CATEGORIES, load_suite, parse_suite, tokenize
from workers.suites.build import build

VERIFIER = Path(__file__).parents[2] / "zoo" / "models" / "spechub-toy" / "llama-verifier"


def test_the_toy_suite_covers_every_category_and_is_what_the_builder_writes():
    suite = load_suite("toy-v2")
    assert set(suite.categories) == set(CATEGORIES)
    assert parse_suite(build()).sha256 == suite.sha256  # the committed file is reproducible
    assert load_suite("toy-v1").label == "toy-v1"  # kept as it was, for the certificates that name it


def test_the_toy_suite_reaches_every_prompt_length_bucket_the_toy_context_holds():
    lengths = [len(ids) for ids in tokenize(VERIFIER, [prompt for _, prompt in load_suite("toy-v2").prompts()])]
    edges = metrics.length_buckets(512, 32)
    assert all(any(low < n <= high for n in lengths) for low, high in zip([0, *edges], edges, strict=False)), lengths


def test_editing_one_prompt_makes_a_new_suite_identity(tmp_path):
    document = build()
    document["categories"]["math"][0] += " "
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(document))
    assert load_suite(str(path)).sha256 != load_suite("toy-v2").sha256


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


def test_a_stored_workload_reaches_the_worker_as_stored_with_no_reading_sampling_hashing_or_rendering(monkeypatch, tmp_path):
    """The registry parsed, sampled, hashed and rendered the upload once; the worker takes its sample as it is."""
    monkeypatch.setenv("SPECHUB_WORKLOAD_DIR", str(tmp_path))
    chat = Request(3, "chat", messages=(("user", "Hi?"),), max_tokens=24, count=2, text="<|user|>Hi?<|assistant|>", tokens=7)
    plain = Request(5, "code", prompt="def f():", max_tokens=16, text="def f():", tokens=4)
    sha = "ab" * 32
    write_sample(workload_path(sha, 41), sha, [chat.as_dict(), plain.as_dict()])

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the worker read, sampled or rendered a stored workload again")

    for name in ("read_workload", "rendered"):
        monkeypatch.setattr(f"workers.suites.{name}", forbidden)
    monkeypatch.setattr("kernel.traffic.formats.collect", forbidden)
    suite = load_suite(f"sha256:{sha}", 41)
    assert suite.private and suite.sha256 == sha and suite.max_tokens == 24
    assert suite.prompts() == [("code", "def f():"), ("chat", "<|user|>Hi?<|assistant|>")]  # the rendered text, not the messages
    assert suite.rendered(tmp_path, 512) is suite  # nothing left to render
