"""Identifiers are matched whole: a final newline (which `$` lets through) is refused, not passed on to the Hub."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from kernel.hub import is_safe_filename
from registry.validation import validate_repo_id, validate_revision, validate_sha

SHA = "a" * 40


@pytest.mark.parametrize(
    ("validate", "good", "bad"),
    [
        (validate_repo_id, "org/name", "org\n/name"),
        (validate_repo_id, "org/name", "org/name\n"),
        (validate_revision, "main", "main\n"),
        (validate_revision, "v1.0", "v1.0\n"),
        (validate_sha, SHA, SHA + "\n"),
    ],
)
def test_a_value_with_a_newline_is_refused_where_the_same_value_without_it_passes(validate, good, bad):
    validate(good)
    with pytest.raises(ValidationError):
        validate(bad)


def test_a_file_name_with_a_final_newline_is_not_safe():
    assert is_safe_filename("config.json") and not is_safe_filename("config.json\n")


@pytest.mark.django_db
def test_the_api_answers_a_newline_in_a_repo_id_with_a_400_naming_the_field():
    response = APIClient().post("/api/v1/compatibility/", {"verifier": "org\n/name"}, format="json")
    assert response.status_code == 400 and "verifier" in response.json()["error"]["details"]


def test_a_pair_with_lossy_options_is_refused_wherever_it_is_saved_with_the_gates_reason(db):
    from django.core.exceptions import ValidationError

    from registry.catalog.services import hub_model_get_or_create, pair_get_or_create

    verifier = hub_model_get_or_create(repo_id="org/verifier", sha="a" * 40, role="verifier")[0]
    with pytest.raises(ValidationError) as refused:
        pair_get_or_create(verifier=verifier, draft=None, method="ngram", num_speculative_tokens=4,
                           options={"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 3.5})  # fmt: skip
    said = str(refused.value)
    assert "which is not lossless: it accepts drafts at an invented rate" in said and "invented acceptance" in said
