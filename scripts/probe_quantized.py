"""Which quantized checkpoint formats the pinned vLLM build serves on this machine, found by starting it (issue 53 §2).

Builds each format of zoo/quantized.py from the committed toy draft (and verifier) into var/quant-probe/, then starts
vLLM once per case, each in its own process: the unquantized pair (the baseline the quantized pair is compared with),
each format as the draft beside the unquantized verifier, and as the verifier alone. A case that starts generates the
suite's prompts greedily and keeps each prompt's own counters, so the quantized pair's AL change can be paired per
prompt (kernel.quantized.al_change). Each case's outcome, with the engine's own error text, goes to
var/quant-probe/results.json. Run: `.venv/bin/python scripts/probe_quantized.py [case ...]`; each case costs one engine
start (about 1-2 minutes and 3 GiB here).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ZOO = ROOT / "zoo" / "models" / "spechub-toy"
OUT = ROOT / "var" / "quant-probe"
K = 4
PER_CATEGORY = 4  # 28 prompts: enough for a per-prompt interval (prompt_intervals.MIN_PROMPTS_FOR_INTERVAL is 12)
# case: (verifier folder, draft folder or None)
CASES = {
    "baseline": ("llama-verifier", "llama-draft-1l"),
    "w8a8-int8-draft": ("llama-verifier", "q/llama-draft-1l-w8a8-int8"),
    "w8a8-int8-verifier": ("q/llama-verifier-w8a8-int8", None),
    "fp8-dynamic-draft": ("llama-verifier", "q/llama-draft-1l-fp8-dynamic"),
    "fp8-dynamic-verifier": ("q/llama-verifier-fp8-dynamic", None),
    "torchao-int8wo-draft": ("llama-verifier", "q/llama-draft-1l-torchao-int8wo"),
    # Both quantized at once, the kernels vLLM picks in its INFO log: fp8 as the verifier, int8 as its draft.
    "fp8-verifier-int8-draft": ("q/llama-verifier-fp8-dynamic", "q/llama-draft-1l-w8a8-int8"),
    # gpt-oss as published (issue 60): the toy gpt-oss verifier, bf16 and with its experts in MXFP4.
    "gpt-oss-bf16-verifier": ("gpt-oss-verifier", None),
    "gpt-oss-mxfp4-verifier": ("q/gpt-oss-verifier-mxfp4", None),
}


def folder(name: str) -> Path:
    return OUT / name.removeprefix("q/") if name.startswith("q/") else ZOO / name


def build() -> None:
    from zoo.quantized import FORMATS

    for form, make in FORMATS.items():
        for model in ("gpt-oss-verifier",) if form == "mxfp4" else ("llama-draft-1l", "llama-verifier"):
            target = OUT / f"{model}-{form}"
            if not (target / "README.md").is_file():
                make(ZOO / model, target)


def prompts() -> list[list[int]]:
    from workers.suites import load_suite, tokenize

    suite = load_suite("toy-v2")
    chosen = [p for category in suite.categories.values() for p in list(category)[:PER_CATEGORY]]
    return tokenize(ZOO / "llama-verifier", chosen)


def run_case(case: str) -> dict[str, object]:
    """Start the engine for one case (in this process) and return its outcome."""
    from workers.engines.base import EngineConfig, Sampling
    from workers.engines.vllm import VllmEngine

    verifier, draft = CASES[case]
    spec = {"method": "draft_model", "model": str(folder(draft)), "num_speculative_tokens": K} if draft else None
    engine = VllmEngine()
    try:
        engine.start(EngineConfig(verifier=str(folder(verifier)), speculative_config=spec))
        done = engine.generate(prompts(), Sampling(temperature=0.0, max_tokens=64))
        per_prompt = [[c.counters.drafts, c.counters.accepted] if c.counters else None for c in done]
        return {"case": case, "served": True, "per_prompt": per_prompt, "tokens": [list(c.token_ids) for c in done]}
    except Exception as exc:  # noqa: BLE001  # any failure is the finding, in the engine's own words
        return {"case": case, "served": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-4000:]}
    finally:
        with contextlib.suppress(Exception):  # a start that failed half-way may leave nothing to stop
            engine.stop()


def main(cases: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    build()
    results_file = OUT / "results.json"
    results = json.loads(results_file.read_text()) if results_file.is_file() else {}
    for case in cases:
        child = subprocess.run([sys.executable, __file__, "--one", case], capture_output=True, text=True, timeout=900)
        (OUT / f"{case}.log").write_text(child.stdout + child.stderr)
        lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
        failed = {"case": case, "served": False, "error": f"exit {child.returncode}: {child.stderr[-2000:]}"}
        results[case] = json.loads(lines[-1]) if lines else failed
        print(case, "served" if results[case]["served"] else results[case]["error"][:500], flush=True)
        results_file.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(run_case(sys.argv[2])), flush=True)
    else:
        main(sys.argv[1:] or list(CASES))
