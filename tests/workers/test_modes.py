"""Acceptance by thinking mode (issue 53): the pure parts, from constructed counters."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from kernel.spec import ModelRef, RunSpec
from kernel.traffic import ChatTemplate, Request
from kernel.traffic.templates import switches
from workers import certification, modes
from workers.engines.base import Completion, SpecCounters
from workers.prompt_intervals import difference_interval
from workers.suites import chat_template
from workers.workbench import Workbench, total_counters
from zoo.tokenizer import CHAT_TEMPLATE, CHAT_TEMPLATE_THINKING

ZOO = Path(__file__).resolve().parents[2] / "zoo" / "models" / "spechub-toy"

TEMPLATE = ChatTemplate(CHAT_TEMPLATE_THINKING, bos_token="<|bos|>")


def counted(steps: int, accepted: int, n: int = 12) -> tuple[SpecCounters, list[SpecCounters]]:
    prompts = [SpecCounters(drafts=steps + i % 3, draft_tokens=4 * (steps + i % 3), accepted=accepted + i % 5,
                            per_position=(accepted, accepted // 2, 0, 0)) for i in range(n)]  # fmt: skip
    return sum(prompts, SpecCounters()), prompts


def test_each_mode_has_al_with_its_interval_and_the_difference_is_paired_over_the_same_prompts():
    found = modes.by_mode("enable_thinking", "as asked", {"thinking on": counted(10, 8), "thinking off": counted(10, 14)})
    on, off = found["modes"]
    assert (on["mode"], on["chat_template_kwargs"]) == ("thinking on", {"enable_thinking": True})
    assert off["chat_template_kwargs"] == {"enable_thinking": False} and found["switch"] == "enable_thinking"
    for row in (on, off):
        low, high = row["mean_acceptance_length_interval"]
        assert row["mean_acceptance_length"] is not None and low <= row["mean_acceptance_length"] <= high
        assert row["prompts"] == 12
    apart = found["difference"]
    assert apart["of"] == ["thinking on", "thinking off"] and apart["paired_over"] == "prompts" and apart["prompts"] == 12
    difference, first, second = apart["mean_acceptance_length"], on["mean_acceptance_length"], off["mean_acceptance_length"]
    assert difference is not None and first is not None and second is not None
    assert abs(difference - (first - second)) < 1e-12
    low, high = apart["interval"]
    assert low <= difference <= high < 0


def test_too_few_prompts_give_figures_and_no_interval():
    found = modes.by_mode("enable_thinking", "as asked", {"thinking on": counted(10, 8, 4), "thinking off": counted(9, 8, 4)})
    assert "interval" not in found["difference"] and "mean_acceptance_length_interval" not in found["modes"][0]


def test_both_modes_ask_the_same_prompts_and_a_prompt_too_long_in_either_is_left_out_of_both():
    asked = [Request(0, "qa", prompt="short"), Request(0, "qa", prompt="x" * 20), Request(0, "chat", prompt="mid")]

    def encode(text: str) -> list[int]:
        return list(range(len(text)))

    room = len("<|bos|><|user|>\nx\n<|assistant|>\n") + 25  # the long prompt fits thinking on, not off
    found = modes.rendered(asked, TEMPLATE, "enable_thinking", encode, room)
    assert {mode: {c: len(b) for c, b in batches.items()} for mode, batches in found.items()} == {
        "thinking on": {"qa": 1, "chat": 1}, "thinking off": {"qa": 1, "chat": 1}}  # fmt: skip
    assert len(found["thinking off"]["qa"][0]) - len(found["thinking on"]["qa"][0]) == len("<think>\n\n</think>\n")


def test_the_figures_say_which_mode_they_hold_for():
    chat = Request(1, "chat", messages=(("user", "hi"),), chat_template_kwargs={"enable_thinking": False})
    assert modes.figures_mode([Request(0, "qa", prompt="p")]) == {"rendered": "as written", "chat_template_kwargs": {}}
    assert modes.figures_mode([chat]) == {"rendered": "chat template", "chat_template_kwargs": {"enable_thinking": False}}
    mixed = modes.figures_mode([chat, Request(2, "chat", messages=(("user", "yo"),))])
    assert mixed["rendered"] == "chat template, switches differ by request"


def _draw(rng: np.random.Generator, n: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """Prompts whose acceptance moves with the mode, each prompt its own level and length in both."""
    quality = rng.beta(4, 2, n)
    steps_on = np.round(rng.lognormal(np.log(20), 0.6, n)).astype(int) + 1
    steps_off = np.maximum(1, np.round(steps_on * rng.uniform(0.7, 1.1, n))).astype(int)
    accepted_on = rng.poisson(steps_on * 3 * quality)
    accepted_off = rng.poisson(steps_off * 3 * np.clip(quality + 0.1 + rng.normal(0, 0.1, n), 0, 1))
    return steps_on.tolist(), accepted_on.tolist(), steps_off.tolist(), accepted_off.tolist()


def test_the_paired_interval_holds_the_populations_difference_at_least_95_percent_of_the_time():
    """Simulated: 16 prompts drawn from a population whose difference is known; measured 0.98-0.99 at 8-32 prompts
    over 1000 runs (conservative: t on a third of the effective number, as each mode's own interval)."""
    rng = np.random.default_rng(53)
    steps_on, accepted_on, steps_off, accepted_off = _draw(rng, 200_000)
    truth = sum(accepted_on) / sum(steps_on) - sum(accepted_off) / sum(steps_off)
    held = runs = 0
    for _ in range(300):
        d_on, a_on, d_off, a_off = _draw(rng, 16)
        interval = difference_interval((d_on, d_off), (a_on, a_off))
        assert interval is not None
        runs, held = runs + 1, held + (interval[0] <= truth <= interval[1])
    assert held / runs >= 0.95


class _Counting:
    """An engine that drafts more the longer the prompt, and counts per request as vLLM does."""

    def __init__(self) -> None:
        self.total = SpecCounters()
        self.asked: list[list[int]] = []

    def generate(self, prompts: list[list[int]], sampling: object) -> list[Completion]:
        done: list[Completion] = []
        for prompt in prompts:
            own = SpecCounters(drafts=len(prompt) % 7 + 2, draft_tokens=4 * (len(prompt) % 7 + 2), accepted=len(prompt) % 5)
            self.total, done = self.total + own, [*done, Completion(token_ids=(1,), counters=own)]
        self.asked.extend(prompts)
        return done

    def counters(self) -> SpecCounters:
        return self.total


def test_the_acceptance_stage_asks_the_suite_twice_more_on_its_own_engine_with_the_switch_set_each_way(tmp_path):
    """certification._modes on the bundled suite and the toy verifier's new template: 32 prompts a mode, the same
    prompts, the engine the stage holds (no start), and the document's by_mode from its counters."""
    verifier = tmp_path / "verifier"
    shutil.copytree(ZOO / "llama-verifier", verifier)
    config = json.loads((verifier / "tokenizer_config.json").read_text())
    (verifier / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": CHAT_TEMPLATE_THINKING}))
    spec = RunSpec(run_id=1, attempt=1, verifier=ModelRef("v", "a" * 40), draft=ModelRef("d", "b" * 40), method="draft_model",
                   num_speculative_tokens=4, engine="vllm", hardware="cpu")  # fmt: skip
    bench = Workbench.for_spec(spec)
    bench.paths["verifier"] = verifier
    bench.template = chat_template(verifier)
    bench.switches = switches(bench.template)
    engine = _Counting()
    found = certification._modes(engine, bench)  # type: ignore[arg-type]  # the two hooks it calls
    assert list(found) == ["thinking on", "thinking off"] and len(engine.asked) == 64
    on, off = engine.asked[:32], engine.asked[32:]
    assert all(b[: len(a) - 1] == a[:-1] and len(b) > len(a) for a, b in zip(on, off, strict=True))  # same prompt, switch off
    runs = {mode: (total_counters(c), certification._prompts_of(c)) for mode, c in found.items()}
    by_mode = modes.by_mode("enable_thinking", modes.prompts_as(bench.suite.asked()), runs)
    assert [row["prompts"] for row in by_mode["modes"]] == [32, 32] and by_mode["difference"]["prompts"] == 32
    bench.switches = switches(ChatTemplate(CHAT_TEMPLATE))
    assert certification._modes(engine, bench) == {}  # type: ignore[arg-type]  # main's template takes no switch
    bench.template = ChatTemplate("{% if messages[0].role != 'system' %}{{ raise_exception('a system turn first') }}{% endif %}"
                                  "{% if enable_thinking %}{% endif %}")  # fmt: skip
    bench.switches = switches(bench.template)
    assert certification._modes(engine, bench) == {}  # type: ignore[arg-type]  # refused as chats: the run goes on


def test_a_reasoning_effort_is_measured_at_each_level_and_low_is_set_against_high():
    """gpt-oss's harmony template (issue 60): three modes, each its own row; the difference pairs the extremes."""
    runs = {"effort low": counted(10, 14), "effort medium": counted(10, 11), "effort high": counted(10, 8)}
    found = modes.by_mode("reasoning_effort", "as asked", runs)
    assert [(r["mode"], r["chat_template_kwargs"]) for r in found["modes"]] == [
        ("effort low", {"reasoning_effort": "low"}),
        ("effort medium", {"reasoning_effort": "medium"}),
        ("effort high", {"reasoning_effort": "high"}),
    ]
    apart = found["difference"]
    centre = apart["mean_acceptance_length"]
    assert apart["of"] == ["effort low", "effort high"] and centre is not None and 0 < apart["interval"][0] <= centre


def test_the_gpt_oss_toys_template_is_measured_by_its_reasoning_effort_rendered_in_each_level():
    from zoo.families import BY_NAME

    template = ChatTemplate(BY_NAME["gpt-oss"].chat_template, bos_token="<|bos|>")
    assert switches(template).measured == "reasoning_effort" and switches(template).thinking is None
    found = modes.rendered([Request(0, "qa", prompt="Q: 1 + 1?")], template, "reasoning_effort", lambda t: [0] * len(t), 10**6)
    assert list(found) == ["effort low", "effort medium", "effort high"]
    lengths = [len(found[mode]["qa"][0]) for mode in found]
    assert lengths[1] - lengths[0] == len("medium") - len("low") and lengths[2] - lengths[0] == len("high") - len("low")
    qwen3 = ChatTemplate(BY_NAME["qwen3"].chat_template)
    assert switches(qwen3).measured == switches(qwen3).thinking == "enable_thinking"
