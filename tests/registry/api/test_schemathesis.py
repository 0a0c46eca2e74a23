"""schemathesis generates requests from the OpenAPI schema; no answer may be a server error."""

from __future__ import annotations

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())


@pytest.fixture
def token(db, hub_settings):  # generated repo ids are then simply not found on olah
    # Like Django's test client: a request must not close the test's connection mid-transaction.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    user, _ = User.objects.get_or_create(username="fuzzer", defaults={"is_staff": True})
    yield Token.objects.get_or_create(user=user)[0].key
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@pytest.mark.django_db
def test_no_generated_request_gets_a_server_error(case, token):
    response = case.call(headers={"Authorization": f"Token {token}"})
    assert response.status_code < 500, (case.method, case.formatted_path, case.body, response.text[:800])


@schema.include(path_regex="webhooks|compatibility|workloads").parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@pytest.mark.django_db
def test_the_webhook_and_gate_endpoints_take_many_hostile_requests_without_a_server_error(case, token):
    """The endpoints that take URLs, repo ids and uploads from anyone, fuzzed harder than the rest."""
    response = case.call(headers={"Authorization": f"Token {token}"})
    assert response.status_code < 500, (case.method, case.formatted_path, case.body, response.text[:800])
