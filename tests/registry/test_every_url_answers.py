"""Every page, every API GET and every admin page answers, anonymous, signed in and as staff: never a 500.

The routes come from walking the URL configuration, so a page added later is covered without editing this
test (a route whose parameter this module cannot fill fails, saying which). Catalog data is present: the
toy zoo's pairs, a certified run with a serving document and its signed certificate, an engine
qualification, a workload and a webhook of the signed-in user. `make pytest` runs this module on
PostgreSQL and again on the embedded default, SQLite (the `both_databases` marker).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from registry.deployments.services import deployment_create
from registry.fleet.services import registration_token_create, worker_register
from registry.models import (
    Certificate,
    CertificationRun,
    Deployment,
    EngineQualification,
    Pair,
    WebhookEndpoint,
    Worker,
    Workload,
)
from registry.notifications.services import webhook_endpoint_create
from registry.runs.demo import demo_catalog_load
from registry.runs.qualifications import qualification_record
from registry.traffic.services import workload_create
from tests.registry.test_pair_and_run_pages import serving_document
from tests.support.processes import ROOT
from tests.support.qualification import record
from tests.support.runs import finish_run

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]
USERS = ("anonymous", "signed-in", "staff")
# A pk parameter names its object by the route's name; the first word found wins.
OBJECTS: dict[str, type[Any]] = {
    "deployment": Deployment,
    "certificate": Certificate,
    "workload": Workload,
    "webhook": WebhookEndpoint,
    "run": CertificationRun,
    "pair": Pair,
    "worker": Worker,
}


def routes(resolver: URLResolver | None = None, namespace: str = "") -> Iterator[tuple[str, list[str]]]:
    """Yield (namespaced name, parameter names) for every named route; unnamed ones cannot be reversed."""
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from routes(entry, inner)
        elif isinstance(entry, URLPattern) and entry.name:
            yield f"{namespace}{entry.name}", list(entry.pattern.regex.groupindex)


ROUTES = sorted(dict(routes()).items())


@pytest.fixture(scope="module")
def catalog(django_db_setup, django_db_blocker, local_hub, tmp_path_factory) -> Iterator[None]:
    """One catalog for the module's requests, committed, then flushed away."""
    from django.test import override_settings

    with (
        django_db_blocker.unblock(),
        override_settings(SPECHUB_HUB_ENDPOINT=local_hub.endpoint, SPECHUB_HUB_CACHE=tmp_path_factory.mktemp("hub")),
        override_settings(CELERY_TASK_ALWAYS_EAGER=False),  # nothing is certified: the runs are finished by hand
    ):
        _fill()
        yield
        call_command("flush", interactive=False, verbosity=0)


def _fill() -> None:
    owner = User.objects.create_user("owner", password="pw")
    User.objects.create_user("staff", password="pw", is_staff=True, is_superuser=True)
    pairs = demo_catalog_load(zoo_dir=ROOT / "zoo" / "models")
    run = finish_run(pairs[0])  # through the services: the registry signs its certificate
    assert run.result is not None
    run.result = {**serving_document(), "spec": run.result["spec"]}
    run.save(update_fields=["result"])
    qualification_record(document=dict(record()))
    request = {"messages": [{"role": "user", "content": "Is the tree small?"}], "max_tokens": 16}
    workload_create(owner=owner, name="mine", verifier_repo_id=pairs[0].verifier.repo_id, chunks=[json.dumps(request).encode()])
    webhook_endpoint_create(owner=owner, url="http://127.0.0.1:9/hook", events=[])
    deployment_create(owner=owner, name="prod-eu-1", pair=pairs[0])
    _, token = registration_token_create(owner=owner, labels=["cpu"])
    worker_register(secret=token, name="team-box", engine_build="0.32.0", evidence={})


def arguments(name: str, parameters: list[str]) -> dict[str, Any]:
    """Fill a route's parameters from the catalog; fail saying which parameter has no value here."""
    values: dict[str, Any] = {}
    for parameter in parameters:
        if parameter == "digest":
            values[parameter] = EngineQualification.objects.get().digest
        elif parameter == "pk":
            model = next((m for word, m in OBJECTS.items() if word in name), None)
            assert model is not None, f"{name}: no object for its pk here; add the word its name uses to OBJECTS"
            values[parameter] = model.objects.order_by("pk").first().pk
        elif parameter == "app_label":  # the admin's app index
            values[parameter] = "registry"
        elif parameter in ("object_id", "id"):  # the admin's change, history, delete pages: `admin:<app>_<model>_<page>`
            values[parameter] = _admin_object(name)
        elif parameter == "content_type_id":  # the admin's "view on site" shortcut
            values[parameter] = ContentType.objects.get_for_model(Pair).pk
        else:
            values[parameter] = _other(name, parameter)
    return values


def _admin_object(name: str) -> int:
    """The first row of the model an admin route belongs to (0 where it has none: the admin's own "not found"
    path); a pair for the "view on site" shortcut."""
    for model in admin.site._registry:
        if name.startswith(f"admin:{model._meta.app_label}_{model._meta.model_name}_"):
            found = model._default_manager.order_by("pk").first()
            return found.pk if found is not None else 0
    pair = Pair.objects.order_by("pk").first()
    assert pair is not None
    return pair.pk


def _other(name: str, parameter: str) -> Any:
    known = {"uidb64": "MQ", "token": "set-password", "concurrency": "1"}  # the password reset link; a level
    assert parameter in known, f"{name}: no value for its parameter {parameter!r}; add one to this test"
    return known[parameter]


def client_for(who: str) -> Client:
    client = Client()
    if who != "anonymous":
        client.force_login(User.objects.get(username="staff" if who == "staff" else "owner"))
    return client


@pytest.mark.parametrize("who", USERS)
@pytest.mark.parametrize(("name", "parameters"), ROUTES, ids=[name for name, _ in ROUTES])
def test_every_route_answers_a_get_without_a_server_error(catalog, name, parameters, who):
    url = reverse(name, kwargs=arguments(name, parameters))
    response = client_for(who).get(url, HTTP_ACCEPT="text/html,application/json")
    assert response.status_code < 500, (url, who, response.status_code, response.content[:2000])


def test_the_walk_reaches_the_pages_the_api_and_the_admin():
    names = {name for name, _ in ROUTES}
    assert {"catalog", "pair", "run", "workloads", "workload", "api-pairs", "api-workload-report", "admin:index"} <= names
