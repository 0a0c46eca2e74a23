"""Gated repos and Hub tokens, with the real huggingface_hub client against a loopback test double of the Hub's
401/403 answers (olah serves no gated repos): each failure says whose it is, and the token never shows."""

from __future__ import annotations

import pytest

from kernel.errors import RunError
from kernel.hub import HubClient
from kernel.settings import Settings
from tests.support.hub_auth_double import GRANTED, NOT_GRANTED, REPO, SHA, hub_auth_double


def failure(token: str | bool) -> RunError:
    with hub_auth_double() as double, pytest.raises(RunError) as failed:
        HubClient(endpoint=double.endpoint, token=token, retries=1).metadata(REPO, "main")
    return failed.value


def test_a_granted_token_reads_a_gated_repos_config_with_the_test_double():
    with hub_auth_double() as double:
        meta = HubClient(endpoint=double.endpoint, token=GRANTED, retries=1).metadata(REPO, "main")
    assert meta.sha == SHA and meta.config and meta.config["hidden_size"] == 256
    assert f"Bearer {GRANTED}" in double.authorizations


def test_a_token_not_granted_access_is_the_submitters_to_fix_with_the_test_double():
    error = failure(NOT_GRANTED)
    assert (error.code, error.fault, error.retryable) == ("hub:gated", "user", False)
    assert "Accept the repository's conditions for SpecHub's Hub account" in error.message


def test_no_token_at_all_is_the_operators_to_fix_and_never_retried_with_the_test_double():
    error = failure(False)
    assert (error.code, error.fault, error.retryable) == ("hub:gated-no-token", "infra", False)
    assert "HF_TOKEN" in error.message


def test_a_token_the_hub_rejects_is_the_operators_to_fix_and_never_shown_with_the_test_double():
    error = failure("hf_revoked_secret_value")
    assert (error.code, error.fault, error.retryable) == ("hub:token-rejected", "infra", False)
    assert "hf_revoked_secret_value" not in error.message and "hf_revoked_secret_value" not in repr(
        HubClient(token="hf_revoked_secret_value")
    )


def test_workers_take_the_read_token_from_their_settings():
    def token(**environ: str) -> str | bool:
        return HubClient.from_settings(Settings.from_environment(environ)).token

    assert token(HF_TOKEN="hf_from_environment") == "hf_from_environment"
    assert token(HF_TOKEN="hf_from_environment", SPECHUB_HUB_READ_TOKEN="hf_spechub_setting") == "hf_spechub_setting"
    assert token() is False
