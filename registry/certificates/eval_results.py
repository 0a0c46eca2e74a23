"""A certificate's figures in the Hub's `.eval_results/*.yaml` format, which model pages display with a badge.

The entries are built with huggingface_hub's own `EvalResultEntry` and serialized by its
`eval_result_entries_to_yaml`, so they follow the Hub's format as that library does. The
"benchmark" is SpecHub's workload suite (`spechub/<suite>`), one task per figure; the notes say
against which verifier, hardware, engine build and dtype, and the speedup's interval.
"""

from __future__ import annotations

from typing import Any

import yaml
from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

from kernel import certificates
from registry.catalog.selectors import pair_public_url
from registry.models import Certificate


def eval_results_path(certificate: Certificate) -> str:
    """Return the file the PR adds: one per verifier and hardware class, so a draft lists each pairing."""
    verifier = certificate.pair.verifier.repo_id.replace("/", "--")
    return f".eval_results/spechub-{verifier}-{certificate.run.hardware}.yaml"


def eval_results_yaml(certificate: Certificate) -> bytes:
    """Return the YAML of the certificate's headline figures: acceptance length, speedup at c=1, greedy exact match."""
    payload = certificates.payload_of(certificate.document.encode())
    context = _context(payload)
    common = {"dataset_id": f"spechub/{_suite(payload)}", "date": payload["issued_at"],
              "source_url": pair_public_url(pair=certificate.pair), "source_name": "SpecHub certificate"}  # fmt: skip
    entries = [
        EvalResultEntry(task_id=task, value=round(value, 4), notes=f"{context}{extra}", **common)
        for task, value, extra in _figures(payload)
        if value is not None
    ]
    return yaml.safe_dump(eval_result_entries_to_yaml(entries), sort_keys=False, allow_unicode=True).encode()


def _suite(payload: certificates.Payload) -> str:
    workloads: Any = payload["environment"].get("workloads") or {}
    return str(workloads.get("suite") or payload["inputs"]["plan"]["workloads"])


def _context(payload: certificates.Payload) -> str:
    inputs, environment = payload["inputs"], payload["environment"]
    verifier = inputs["verifier"]
    return (f"with {verifier['repo_id']}@{verifier['sha'][:12]}, {inputs['method']} k={inputs['num_speculative_tokens']}, "
            f"{inputs['hardware']}, {inputs['engine']} {environment.get('engine_build', '')}, {inputs['plan']['dtype']}; "
            f"verdict {payload['verdict']}")  # fmt: skip


def _figures(payload: certificates.Payload) -> list[tuple[str, float | None, str]]:
    results = payload["results"]
    acceptance: Any = results["speculative"]["acceptance"] or {}
    throughput: Any = results["throughput"] or {}
    level = (throughput.get("levels") or {}).get("1") or {}
    interval = level.get("speedup_interval") or []
    greedy: Any = results["equivalence"]["greedy"] or {}
    exact = [figures["exact_match"] for figures in greedy.values() if figures.get("exact_match") is not None]
    return [
        ("acceptance_length", acceptance.get("mean_acceptance_length"), ""),
        ("speedup_concurrency_1", level.get("speedup"),
         f"; 95 % interval [{interval[0]:.3f}, {interval[1]:.3f}]" if len(interval) == 2 else ""),
        ("greedy_exact_match", min(exact) if exact else None, "; the lowest over the suite's categories"),
    ]  # fmt: skip


def model_card_section(certificate: Certificate) -> str:
    """Return a short model-card section the draft's author can paste, offered in the PR's description."""
    payload = certificates.payload_of(certificate.document.encode())
    rows = "\n".join(f"| {task} | {value:.3f}{extra} |" for task, value, extra in _figures(payload) if value is not None)
    return (
        "## Speculative decoding, certified by SpecHub\n\n"
        f"Measured {_context(payload)}.\n\n| figure | value |\n|---|---|\n{rows}\n\n"
        f"Signed certificate: `spechub/certificate-{certificate.run_id}.json` "
        f"(verify with `spechub verify`). Details: {pair_public_url(pair=certificate.pair)}\n"
    )
