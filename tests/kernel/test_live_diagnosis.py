"""A live window's low acceptance named from the counters (issue 53 §3): k is checkable, the rest is what to check."""

from __future__ import annotations

from kernel import diagnosis, live
from kernel.live_diagnosis import DRAFTS_PER_STEP, is_low, named, text

COLLAPSED = live.Counts(drafts=400, draft_tokens=1200, accepted=8, per_position=(), requests=20)


def test_a_collapsed_window_drafting_another_k_names_it_from_draft_tokens_per_step():
    certified = diagnosis.Setup(method="draft_model", draft="spechub-toy/llama-draft-1l@abc",
                                chat_template_kwargs={"enable_thinking": False})  # fmt: skip
    found = named(COLLAPSED, None, 4, certified)
    assert [c["code"] for c in found["causes"]] == [DRAFTS_PER_STEP]
    assert found["causes"][0]["evidence"] == ["3 tokens drafted a step in this window; certified k=4"]
    assert [u["code"] for u in found["unchecked"]] == list(diagnosis.CAUSES)  # all six, each with what to check
    shown = text(found)
    assert "certified: spechub-toy/llama-draft-1l@abc" in shown and "certified mode (thinking off)" in shown


def test_only_collapse_or_below_near_al_1_is_low():
    assert is_low(live.COLLAPSE, COLLAPSED)
    assert is_low(live.BELOW, COLLAPSED)
    healthy = live.Counts(drafts=400, draft_tokens=1600, accepted=900, requests=20)
    assert not is_low(live.BELOW, healthy) and not is_low(live.WITHIN, COLLAPSED)
    assert named(healthy, 4, 4, None)["causes"] == []  # the certified k, nothing else the counters show
