"""Reads about certificates: which ones a user may see."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from kernel import result, vllm_results
from registry.models import Certificate, CertificationRun
from registry.runs.selectors import run_document


def visible_certificates(user: Any) -> QuerySet[Certificate]:
    """Certificates of the runs `user` may see: a private workload's are its owner's (and staff's)."""
    return Certificate.objects.filter(run__in=CertificationRun.objects.visible_to(user))


def level_as_bench_result(*, certificate: Certificate, concurrency: int) -> dict[str, Any] | None:
    """The certificate's run at `concurrency` as `vllm bench serve --save-result` writes a run (kernel.vllm_results);
    None where the run measured no such level."""
    run = certificate.run
    try:
        document = run_document(run)
    except result.UnreadableResult:  # a document this code cannot read has no level to write
        return None
    label = (f"spechub certificate {certificate.pk} ({certificate.digest[:12]}), pair {certificate.pair_id}, "
             f"{run.hardware}, vLLM {run.engine_version or '?'}, c={concurrency}; spec_decode_* are the certified "
             "acceptance (the suite's prompts, greedy)")  # fmt: skip
    try:
        return vllm_results.level_file(document, concurrency, model_id=run.pair.verifier.repo_id, label=label,
                                       date=certificate.issued_at.strftime("%Y%m%d-%H%M%S"))  # fmt: skip
    except KeyError:
        return None
