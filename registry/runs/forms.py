"""The submission form: field validation only; the gate and the registration are services."""

from __future__ import annotations

from django import forms

from registry.validation import validate_repo_id, validate_revision


class SubmissionForm(forms.Form):
    repo_id = forms.CharField(label="Draft repo id", max_length=200, validators=[validate_repo_id])
    revision = forms.CharField(label="Revision", initial="main", max_length=200, validators=[validate_revision])
    verifier_repo_id = forms.CharField(
        label="Verifier repo id",
        required=False,
        max_length=200,
        validators=[validate_repo_id],
        help_text="Leave empty when the draft's speculators config names its verifier.",
    )
    verifier_revision = forms.CharField(label="Verifier revision", initial="main", max_length=200, validators=[validate_revision])
