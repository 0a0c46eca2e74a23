"""A document from outside is read as every reader reads it before it is kept (kernel/result/check.py, kernel/typed.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kernel import result
from kernel.evidence import UnreadableEvidence
from kernel.evidence import readable as evidence_readable
from kernel.result import UnreadableResult
from kernel.typed import mismatch, unstorable


def document(**stages: Any) -> dict[str, Any]:
    levels = {"1": {"speedup": 1.4, "speedup_interval": [1.3, 1.5], "block_ratios": [1.4, 1.4]}}
    return {"schema_version": 3, "spec": {}, "environment": {"engine_build": "0.32.0"}, "workloads": {},
            "stages": {"throughput": {"levels": levels}, "speculative": {"acceptance": {"mean_acceptance_length": 3.0}},
                       **stages}}  # fmt: skip


def refused(raw: dict[str, Any]) -> str:
    with pytest.raises(UnreadableResult) as caught:
        result.readable(raw)
    return str(caught.value)


def test_a_document_every_reader_takes_is_read_as_the_current_version():
    assert result.readable(document())["schema_version"] == 3
    minimal = {"schema_version": 1, "spec": {"engine": "vllm"}, "stages": {}, "environment": {"versions": {"vllm": "0.32.0"}}}
    assert result.engine_build(result.readable(minimal)) == "0.32.0"


@pytest.mark.parametrize("version", [True, 1.0, "3", None])
def test_the_schema_version_is_an_integer_never_true(version):
    assert "schema_version" in refused({**document(), "schema_version": version})
    with pytest.raises(UnreadableResult, match="an integer"):
        result.load({**document(), "schema_version": version})


def test_a_field_of_the_wrong_type_is_named_by_its_path():
    raw = document()
    raw["stages"]["throughput"]["levels"]["1"]["speedup_interval"] = ["a", "b"]
    assert "stages.throughput.levels.1.speedup_interval[0] must be a number, not 'a'" in refused(raw)
    raw = document(speculative={"acceptance": {"mean_acceptance_length": "many"}})
    assert "stages.speculative.acceptance.mean_acceptance_length must be a number or null, not 'many'" in refused(raw)
    raw = document(verdict={"verdict": "certified", "reasons": "none"})
    assert "stages.verdict.reasons must be a list, not 'none'" in refused(raw)


@pytest.mark.parametrize("value", [10**30, -(2**60), float("inf"), True])
def test_a_number_out_of_range_or_a_bool_is_no_measurement(value):
    raw = document()
    raw["stages"]["throughput"]["levels"]["1"]["speedup"] = value
    assert "stages.throughput.levels.1.speedup " in refused(raw)


def test_levels_are_whole_concurrencies():
    raw = document()
    raw["stages"]["throughput"]["levels"]["a"] = raw["stages"]["throughput"]["levels"]["1"]
    assert "stages.throughput.levels are concurrencies" in refused(raw)


def test_a_shape_a_reader_trips_on_is_refused_naming_the_reader():
    raw = document()
    raw["stages"]["throughput"]["choice_of_k"] = {"run_k": 4, "verifier_seconds_per_token": 0.1, "recipes": {},
                                                  "levels": {"1": {"best_k": 2, "predicted": []}}}  # fmt: skip
    assert "fails on it (StopIteration" in refused(raw)  # no prediction for the best k


def test_unstorable_text_and_numbers_are_found_with_their_place():
    assert unstorable({"a": [{"b": "x\ud800"}]}, "document") == (
        "document.a[0].b holds half of a UTF-16 surrogate pair (U+D800), which is no text; send the whole pair or remove it"
    )
    assert unstorable({"k\udc00": 1}) is not None and "k\\udc00" in (unstorable({"k\udc00": 1}) or "")
    assert "NUL" in (unstorable(["\x00"]) or "") and "too large" in (unstorable({"x": float("inf")}) or "")
    assert unstorable({"fine": ["text", 1, 2.5, None, True]}) is None


def test_mismatch_reads_unions_literals_and_optional_keys():
    assert mismatch({"a": 1}, dict[str, int], "x") is None
    assert mismatch([1, "b"], list[int | None], "x") == "x[1] must be a whole number or null, not 'b'"
    assert mismatch(2.5, int, "x") == "x must be a whole number, not 2.5"


def test_evidence_is_read_as_the_run_pages_show_it():
    assert evidence_readable({"devices": ["cpu"]}) == {"devices": ["cpu"]}
    assert evidence_readable({"platform": "Linux", "cpus": None, "devices": [{"name": "H100", "memory": 1 << 36}]})
    for wrong, named in (({"devices": 5}, "evidence.devices must be a list"), ({"cpus": "many"}, "evidence.cpus")):
        with pytest.raises(UnreadableEvidence, match=named):
            evidence_readable(wrong)
