"""Fuzz: generated malformed configs never crash the gate, and each one ends in an error finding."""

from __future__ import annotations

import contextlib
import random
from typing import Any

import pytest

from kernel.formats import judge
from kernel.formats.findings import HINTS, Severity
from tests.kernel.formats.configs import EAGLE3_LLAMA, LLAMA_31_8B, edited, gate_input, mapping


class _Delete:
    """Remove the field. A stable repr keeps the test ids the same in every process (pytest-xdist compares them)."""

    def __repr__(self) -> str:
        return "<delete>"


DELETE = _Delete()
# Every field the gate checks in a speculators config, with values that must not pass.
DRAFT_MUTATIONS: dict[str, list[Any]] = {
    "speculators_model_type": [DELETE, 3, "", [], "eagle99", {"a": 1}, "eagle", "mtp"],
    "speculators_config": [DELETE, [], "x", 1],
    "speculators_config__proposal_methods": [DELETE, [], {}, "greedy", [1], [[]]],
    "speculators_config__proposal_methods__0__speculative_tokens": [DELETE, 0, -1, "5", 5.5, True, 2**40, []],
    "speculators_config__default_proposal_method": ["tree", 7, ""],
    "speculators_config__verifier": [DELETE, [], "meta-llama/Llama-3.1-8B-Instruct"],
    "speculators_config__verifier__name_or_path": [DELETE, "", "../x", "/abs", 5, ["a"], "a/b/c", "org/other", "x" * 400],
    "speculators_config__verifier__architectures": ["LlamaForCausalLM", [1], ["Qwen3ForCausalLM"], {}, [""]],
    "transformer_layer_config": [DELETE, [], "llama", 0],
    "transformer_layer_config__hidden_size": [DELETE, "4096", -1, 0, 1.5, 2048, True, 2**40],
    "transformer_layer_config__vocab_size": [DELETE, "x", -5, 128000, [128256]],
    "transformer_layer_config__model_type": [3, "mistral", "", ["llama"]],
    "transformer_layer_config__max_position_embeddings": ["2048", -1, {}],
    "draft_vocab_size": ["32000", -1, 0, 99_999_999, 1.0, 64000],
    "target_hidden_size": ["4096", 0, 1024, False],
    "eagle_aux_hidden_state_layer_ids": ["1,2", [1.5], [3, 2, 1], [0, 0], [99], [-1, 2], {}, [True]],
    "norm_before_residual": ["yes", 1, []],
    "architectures": ["Eagle3Speculator", [None], {}],
    "auto_map": ["eagle3.py", [1], 7],
}
VERIFIER_MUTATIONS: dict[str, list[Any]] = {
    "architectures": [DELETE, "LlamaForCausalLM", [], [3]],
    "hidden_size": [DELETE, "4096", 0, 2048],
    "num_hidden_layers": [DELETE, -1, "32", 2],
    "vocab_size": [DELETE, 128256.0, "big"],
}
GARBAGE: list[Any] = [
    None,
    [],
    "config",
    42,
    True,
    1.5,
    {},
    {"speculators_model_type": "eagle3"},
    [EAGLE3_LLAMA],
    {"a": {"b": {"c": []}}},
]


def mutate(document: Any, path: str, value: Any) -> Any:
    return edited(document, **{path: None if value is DELETE else value})


def single_mutations() -> list[tuple[str, Any, Any]]:
    cases = [
        (f"draft {path}={value!r:.30}", mutate(EAGLE3_LLAMA, path, value), LLAMA_31_8B)
        for path, values in DRAFT_MUTATIONS.items()
        for value in values
    ]
    cases += [
        (f"verifier {path}={value!r:.30}", EAGLE3_LLAMA, mutate(LLAMA_31_8B, path, value))
        for path, values in VERIFIER_MUTATIONS.items()
        for value in values
    ]
    cases += [(f"garbage draft {value!r:.30}", value, LLAMA_31_8B) for value in GARBAGE]
    cases += [(f"garbage verifier {value!r:.30}", EAGLE3_LLAMA, value) for value in GARBAGE]
    return cases


def combined_mutations(count: int, seed: int = 20261129) -> list[tuple[str, Any, Any]]:
    """Two to four mutations at once, on distinct fields, chosen by a seeded generator."""
    rng = random.Random(seed)
    cases = []
    for number in range(count):
        paths = rng.sample(sorted(DRAFT_MUTATIONS), rng.randint(2, 4))
        draft: Any = EAGLE3_LLAMA
        for path in sorted(paths, key=lambda p: p.count("__")):
            # A parent already replaced by a non-object stays that way: a malformed config too.
            with contextlib.suppress(KeyError, IndexError, TypeError, ValueError, AttributeError):
                draft = mutate(draft, path, rng.choice(DRAFT_MUTATIONS[path]))
        cases.append((f"combined-{number}", draft, LLAMA_31_8B))
    return cases


CASES = single_mutations() + combined_mutations(150)


def test_the_fuzz_corpus_is_large_enough_and_the_baseline_is_compatible():
    assert len(CASES) >= 200
    assert judge(gate_input(EAGLE3_LLAMA, tensors=mapping(32000, 128256))).compatible


@pytest.mark.parametrize(("draft", "verifier"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_malformed_config_ends_in_an_error_finding_not_a_crash(draft, verifier):
    report = judge(gate_input(draft, verifier, tensors=mapping(32000, 128256)))
    errors = [f for f in report.findings if f.severity == Severity.ERROR]
    assert errors, [f.as_dict() for f in report.findings]
    assert not report.compatible and report.recipe is None
    assert all(f.code in HINTS for f in report.findings)
    report.as_dict()  # the stored form serialises too


def test_a_mapping_tensor_decodes_to_a_compact_array_not_a_python_int_per_entry():
    import sys

    from kernel.formats.inputs import decode_tensor

    raw = bytes(8 * 1_000_000)
    decoded = decode_tensor({"dtype": "I64", "shape": [1_000_000]}, raw)
    assert decoded.problem is None and len(decoded.values) == 1_000_000
    assert sys.getsizeof(decoded.values) < 2 * len(raw)  # a tuple of ints would take several times more
