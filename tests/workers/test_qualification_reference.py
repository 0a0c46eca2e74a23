"""The controls themselves are right: the reference engine's rejection sampler passes them, and its
deliberately wrong sampler (accept every draft token) fails them.

One mode only: the reference engine runs every sample as its own sequence either way. The controls are sized for a
TV of 0.2, a quarter of the default's samples: the subject here is what the controls decide on a known-right and a
known-wrong sampler; the sizing for a stated TV and power is test_qualification_power.py's (and TV 0.1 on vLLM
in test_qualification_vllm.py).
"""

from __future__ import annotations

import pytest

from kernel import qualification as q
from workers.qualification import Settings, qualify

pytestmark = pytest.mark.engine
TV = 0.2


def by_name(record: q.Record) -> dict[str, q.Control]:
    return {control["name"]: control for control in record["controls"]}


def test_the_reference_engines_correct_sampler_passes_every_control_it_can_run():
    record = qualify(Settings(engine="reference", modes=("one-request",), tv=TV))
    controls = by_name(record)
    assert {name: c["outcome"] for name, c in controls.items()} == {
        "verifier-alone": "pass", "self-draft": "pass", "draft_model": "pass",
        "eagle3": "not-supported", "eagle3-reduced": "not-supported", "ngram": "not-supported",
        "synthetic-rejection": "pass",  # the detector catches synthetic acceptance (every drafted token kept)
    }  # fmt: skip
    assert controls["self-draft"]["greedy"]["acceptance_length"] == 5.0
    assert "implements draft_model" in controls["eagle3"]["error"]
    probes = [p for m in controls["draft_model"]["sampling"] for p in m["probes"]]
    assert all(p["detectable_tv"] <= TV and p["samples"] >= p["power"]["samples_needed"] for p in probes), probes
    assert q.load(record)["digest"] == record["digest"]
    detector = controls["synthetic-rejection"]
    assert detector.get("detector") and detector["method"] is None  # a blind detector would convict every method
    assert detector["summary"].startswith("catches the lossy sampler") and detector["sampling"][0]["outcome"] == "fail"


def test_a_sampler_that_accepts_every_draft_token_fails_the_draft_model_control():
    wrong = qualify(Settings(engine="reference", controls=("draft_model",), modes=("one-request",), tv=TV,
                             engine_extra={"accept_rule": "always"}))  # fmt: skip
    control = by_name(wrong)["draft_model"]
    assert control["outcome"] == "fail"
    # Both probes reject at the Monte Carlo p-value's floor; the one the draft disagrees with most stands out by its TV.
    worst = max(control["sampling"][0]["probes"], key=lambda p: p["observed_tv"])
    assert all(p["p_value"] < p["power"]["alpha"] for p in control["sampling"][0]["probes"])
    # It samples the draft's distribution, which differs from the verifier's by about 0.56 after this prefix.
    assert worst["prefix"] == "Once upon a time" and worst["observed_tv"] > 0.3, worst
