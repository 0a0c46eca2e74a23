"""Speculator and draft formats, the serving recipe, and the compatibility gate; no I/O."""

from __future__ import annotations

from kernel.formats.findings import Finding, Severity
from kernel.formats.gate import Report, ReportDict, judge
from kernel.formats.inputs import GateInput, RepoMetadata, TensorData, tokenizer_hash
from kernel.formats.parse import DraftFormat, describe_draft, describe_verifier
from kernel.formats.recipe import Conditions, Recipe, serve_arguments, serve_line, serving_recipe, speculative_config

__all__ = [
    "Conditions",
    "DraftFormat",
    "Finding",
    "GateInput",
    "Recipe",
    "RepoMetadata",
    "Report",
    "ReportDict",
    "Severity",
    "TensorData",
    "describe_draft",
    "describe_verifier",
    "judge",
    "serve_arguments",
    "serve_line",
    "serving_recipe",
    "speculative_config",
    "tokenizer_hash",
]
