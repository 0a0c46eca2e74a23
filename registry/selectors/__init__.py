"""Selectors: every read the pages, API and tasks make, one module per concern.

`catalog` (pairs, recommendations, the export), `runs` (a run's spec, plan, document, figures and the queue),
`engines` (builds and their qualification), `accounts` (quotas, webhooks, imports). Users' traffic has its own
reads in registry.traffic.selectors.
"""

from __future__ import annotations

from registry.selectors.accounts import hub_imports, submission_quota, submission_window, webhooks_of
from registry.selectors.catalog import (
    EXPORT_COLUMNS,
    catalog_choices,
    compatibility_matrix,
    export_rows,
    pair_owner,
    pair_page,
    pair_public_url,
    pairs_filtered,
    pairs_list,
    pairs_to_certify,
    recommendations,
)
from registry.selectors.engines import (
    BuildPage,
    ControlRow,
    engine_qualifications,
    engines_page,
    qualification_by_digest,
    qualification_for,
)
from registry.selectors.runs import (
    HEADLINE_METRICS,
    PROPERTY_TITLES,
    TONES,
    PropertyRow,
    RunFigures,
    RunSummary,
    latest_finished_run,
    lineage_block_ratios,
    measuring_plan,
    previous_lineage_run,
    property_rows,
    regression_detectable,
    run_document,
    run_figures,
    run_headline,
    run_spec,
    run_summary,
    runs_queue,
)

__all__ = [
    "EXPORT_COLUMNS",
    "HEADLINE_METRICS",
    "PROPERTY_TITLES",
    "TONES",
    "BuildPage",
    "ControlRow",
    "PropertyRow",
    "RunFigures",
    "RunSummary",
    "catalog_choices",
    "compatibility_matrix",
    "engine_qualifications",
    "engines_page",
    "export_rows",
    "hub_imports",
    "latest_finished_run",
    "lineage_block_ratios",
    "measuring_plan",
    "pair_owner",
    "pair_page",
    "pair_public_url",
    "pairs_filtered",
    "pairs_list",
    "pairs_to_certify",
    "previous_lineage_run",
    "property_rows",
    "qualification_by_digest",
    "qualification_for",
    "recommendations",
    "regression_detectable",
    "run_document",
    "run_figures",
    "run_headline",
    "run_spec",
    "run_summary",
    "runs_queue",
    "submission_quota",
    "submission_window",
    "webhooks_of",
]
