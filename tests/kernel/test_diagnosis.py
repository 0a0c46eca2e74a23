"""A low acceptance named (issue 53 §3): six constructed misconfigurations, each named by its cause, and a healthy pair
that names none."""

from __future__ import annotations

from dataclasses import replace

from kernel import diagnosis
from kernel.diagnosis import Setup, causes_text, diagnose, is_low
from kernel.formats import judge
from kernel.spec import Thresholds
from kernel.verdict import judge_document
from tests.kernel.formats.configs import EAGLE3_LLAMA, gate_input, mapping

VERIFIER = "spechub-toy/llama-verifier@abc123"
DRAFT = "spechub-toy/llama-draft-1l@def456"
# The distilled draft against its verifier, as certified: greedy through the template with thinking off.
CERTIFIED = Setup(
    method="draft_model",
    draft=DRAFT,
    verifier=VERIFIER,
    verifier_quantization=diagnosis.UNQUANTIZED,
    draft_tokenizer="a1" * 32,
    verifier_tokenizer="a1" * 32,
    chat_template_kwargs={"enable_thinking": False},
)
LOW_AL, LOW_RATE = 1.02, 0.005  # "AL is 1.00", "nothing is accepted"


def named(served: Setup, al: float = LOW_AL, rate: float = LOW_RATE) -> list[str]:
    return [cause["code"] for cause in diagnose(al, rate, served, CERTIFIED)]


def test_the_healthy_pair_names_no_cause():
    assert named(CERTIFIED) == []
    assert causes_text(diagnose(LOW_AL, LOW_RATE, CERTIFIED, CERTIFIED)) == "none of the causes SpecHub checks is in evidence"


def test_an_acceptance_that_is_not_low_names_nothing_whatever_differs():
    lossy = replace(CERTIFIED, draft="other/draft@1", options={"rejection_sample_method": "synthetic"})
    assert not is_low(2.6, 0.4) and named(lossy, al=2.6, rate=0.4) == []
    assert is_low(1.05, None) and is_low(None, 0.01) and not is_low(None, None)


def test_eagle_served_for_an_eagle3_head_names_the_method_against_the_format():
    # The gate's own finding on the served config.
    report = judge(gate_input(EAGLE3_LLAMA, method="eagle", tensors=mapping(32000, 128256)))
    served = replace(CERTIFIED, method="eagle", findings=[f.as_dict() for f in report.findings])
    causes = diagnose(LOW_AL, LOW_RATE, served, replace(CERTIFIED, method="eagle3"))
    assert [c["code"] for c in causes] == [diagnosis.METHOD_FORMAT]
    assert any("the gate:" in e and "'eagle3'" in e for e in causes[0]["evidence"])
    assert "served with method 'eagle'; certified with 'eagle3'" in causes[0]["evidence"]


def test_another_draft_revision_names_the_draft():
    served = replace(CERTIFIED, draft="spechub-toy/llama-draft-1l@0000aa")
    causes = diagnose(LOW_AL, LOW_RATE, served, CERTIFIED)
    assert [c["code"] for c in causes] == [diagnosis.DRAFT_REVISION]
    assert causes[0]["evidence"] == [f"served draft spechub-toy/llama-draft-1l@0000aa; certified draft {DRAFT}"]


def test_no_draft_path_names_the_draft_too():
    causes = diagnose(LOW_AL, 0.0, replace(CERTIFIED, draft=None), CERTIFIED)
    assert [c["code"] for c in causes] == [diagnosis.DRAFT_REVISION]
    assert causes[0]["evidence"] == ["method 'draft_model' names no draft, so the verifier is loaded as its own draft"]


def test_mtp_without_a_draft_repo_is_not_told_the_verifier_is_its_own_draft():
    """MTP drafts with the verifier's own layers by design; Gemma 4's assistant is a draft repo, compared as one."""
    own_layers = replace(CERTIFIED, method="mtp", draft=None)
    causes = diagnose(LOW_AL, 0.0, own_layers, own_layers)
    assert not any("its own draft" in e for c in causes for e in c["evidence"])
    assistant = replace(CERTIFIED, method="mtp", draft="spechub-toy/gemma4-assistant@1111aa")
    causes = diagnose(LOW_AL, LOW_RATE, replace(assistant, draft="spechub-toy/gemma4-assistant@2222bb"), assistant)
    assert [c["code"] for c in causes] == [diagnosis.DRAFT_REVISION]


def test_a_tokenizer_that_differs_names_the_vocabulary():
    served = replace(CERTIFIED, draft_tokenizer="b2" * 32)
    causes = diagnose(LOW_AL, LOW_RATE, served, CERTIFIED)
    assert [c["code"] for c in causes] == [diagnosis.VOCABULARY]
    assert causes[0]["evidence"] == [f"the draft's tokenizer hashes to {'b2' * 6}, the verifier's to {'a1' * 6}"]


def test_a_quantized_verifier_the_draft_was_not_certified_with_names_the_quantized_target():
    served = replace(CERTIFIED, verifier_quantization="compressed-tensors:w8a8-int8")
    causes = diagnose(LOW_AL, LOW_RATE, served, CERTIFIED)
    assert [c["code"] for c in causes] == [diagnosis.QUANTIZED_TARGET]
    assert "compressed-tensors:w8a8-int8" in causes[0]["evidence"][0] and "unquantized" in causes[0]["evidence"][0]


def test_a_synthetic_or_fly_rejection_method_names_the_lossy_rejection():
    for options in (
        {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.1]},
        {"rejection_sample_method": "fly"},
    ):
        causes = diagnose(LOW_AL, LOW_RATE, replace(CERTIFIED, options=options), CERTIFIED)
        assert [c["code"] for c in causes] == [diagnosis.LOSSY_REJECTION]
        assert "not lossless" in causes[0]["evidence"][0]
    assert named(replace(CERTIFIED, options={"rejection_sample_method": "block"})) == []  # lossless


def test_thinking_on_against_a_pair_certified_with_thinking_off_names_the_thinking_mode():
    served = replace(CERTIFIED, chat_template_kwargs={"enable_thinking": True})
    causes = diagnose(LOW_AL, LOW_RATE, served, CERTIFIED)
    assert [c["code"] for c in causes] == [diagnosis.THINKING_MODE]
    assert causes[0]["evidence"] == ["thinking on in the requests served; certified with thinking off"]
    assert named(replace(CERTIFIED, chat_template_kwargs=None)) == []  # not known: not checked


def test_what_is_not_known_checks_nothing():
    assert diagnose(LOW_AL, LOW_RATE, Setup()) == []
    assert diagnose(LOW_AL, LOW_RATE, Setup(method="draft_model", draft=DRAFT), None) == []


def test_the_verdict_names_the_causes_beside_a_low_acceptance_and_says_none_for_a_healthy_pair():
    spec = {"method": "draft_model", "verifier": {"repo_id": "spechub-toy/llama-verifier", "sha": "abc123"},
            "draft": {"repo_id": "spechub-toy/llama-draft-1l", "sha": "def456"},
            "options": {"rejection_sample_method": "fly"}}  # fmt: skip
    stages = {"speculative": {"acceptance": {"mean_acceptance_length": 1.01, "acceptance_rate": 0.003}}}
    _, reasons, properties = judge_document(stages, method="draft_model", thresholds=Thresholds(), qualification=None, spec=spec)
    judged = properties["acceptance"]
    assert judged["outcome"] == "measured" and [c["code"] for c in judged["evidence"]["causes"]] == [diagnosis.LOSSY_REJECTION]
    assert judged["reason"].startswith("acceptance length 1.01 (vLLM's own counters); low, likely causes: the rejection")
    assert judged["reason"] in reasons
    _, reasons, properties = judge_document(stages, method="draft_model", thresholds=Thresholds(), qualification=None,
                                            spec={**spec, "options": {}})  # fmt: skip
    assert properties["acceptance"]["evidence"]["causes"] == [] and "none of the causes" in properties["acceptance"]["reason"]
    hostile = {"method": 3, "draft": "x", "options": [1]}  # an uploaded document's spec: unknown, never a crash
    assert judge_document(stages, method="draft_model", thresholds=Thresholds(), qualification=None, spec=hostile)[2]


def test_a_result_documents_mode_and_gate_report_are_read_for_the_causes():
    """The thinking mode a run's figures hold for (issue 53 §1's `acceptance.mode`) against the certified one."""
    spec = {"method": "draft_model", "draft": {"repo_id": "spechub-toy/llama-draft-1l", "sha": "def456"},
            "verifier": {"repo_id": "spechub-toy/llama-verifier", "sha": "abc123"}}  # fmt: skip
    mode = {"rendered": "chat template", "chat_template_kwargs": {"enable_thinking": True}}
    vocab = {"rule": "tokenizer", "code": "gate:tokenizer-content", "severity": "error", "message": "tokenizers differ"}
    stages = {"speculative": {"acceptance": {"mode": mode}}, "gate": {"findings": [vocab]}}
    served = diagnosis.served_by(spec, stages)
    assert served.draft == DRAFT and served.chat_template_kwargs == {"enable_thinking": True}
    causes = diagnose(LOW_AL, LOW_RATE, served, CERTIFIED)
    assert [c["code"] for c in causes] == [diagnosis.VOCABULARY, diagnosis.THINKING_MODE]
    assert causes[0]["evidence"] == ["the gate: tokenizers differ"]
