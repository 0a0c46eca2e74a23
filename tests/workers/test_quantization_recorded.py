"""The worker records which checkpoints of a pair are quantized, and from what, for the registry to pair the run with
the unquantized pair's per prompt (issue 53 §2). No engine: it reads the snapshots' config.json."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from workers.certification import _quantization
from zoo.variants import ZOO, ensure


def test_the_zoo_quantized_draft_is_recorded_with_its_base_and_the_verifier_as_unquantized(tmp_path):
    ensure()
    toy = ZOO / "spechub-toy"
    bench = cast(Any, SimpleNamespace(paths={"draft": toy / "llama-draft-1l-w8a8-int8", "verifier": toy / "llama-verifier"}))
    assert _quantization(bench) == {
        "draft": {"scheme": "compressed-tensors:w8a8-int8", "base_model": "spechub-toy/llama-draft-1l"},
        "verifier": None,
    }
    (tmp_path / "config.json").write_text("{not json")  # the gate judged it already: here it names no scheme
    assert _quantization(cast(Any, SimpleNamespace(paths={"verifier": tmp_path}))) == {"draft": None, "verifier": None}
