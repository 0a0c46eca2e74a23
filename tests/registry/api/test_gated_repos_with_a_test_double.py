"""The registry reads gated repos with its read token (SPECHUB_HUB_READ_TOKEN or HF_TOKEN), against a loopback
test double of the Hub's 401/403 answers; without a token the refusal says an operator must set one."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from tests.support.hub_auth_double import GRANTED, REPO, hub_auth_double

pytestmark = pytest.mark.django_db


def compatibility(settings: Any, token: str) -> tuple[int, dict[str, Any], list[str]]:
    cache.clear()  # gate reports are kept per (repo, sha): each test reads afresh
    with hub_auth_double() as double:
        settings.SPECHUB_HUB_ENDPOINT, settings.SPECHUB_HUB_READ_TOKEN = double.endpoint, token
        answer = APIClient().post("/api/v1/compatibility/", {"verifier": REPO, "method": "ngram"}, format="json")
    return answer.status_code, answer.json(), double.authorizations


def test_the_gate_reads_a_gated_verifier_with_the_read_token_from_settings_with_the_test_double(settings):
    status, report, sent = compatibility(settings, GRANTED)
    assert status == 200 and report["method"] == "ngram" and "hub:" not in str(report), report
    assert f"Bearer {GRANTED}" in sent


def test_without_a_read_token_the_refusal_names_the_operators_fix_and_no_token_is_sent_with_the_test_double(settings):
    status, answer, sent = compatibility(settings, "")
    assert status == 503 and answer["error"]["code"] == "hub:gated-no-token", answer
    assert "HF_TOKEN" in answer["error"]["message"] and not any(sent)
