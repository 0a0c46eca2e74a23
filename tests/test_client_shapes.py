"""The client's answer shapes (spechub/shapes.py) against what the server publishes and writes.

Every key a shape names must be a property the server's published OpenAPI schema declares for that answer, at the
same place in it: a field the server renames or drops fails here, not in a user's `spechub` command. A shape met
where the schema says only "an object" is held to the place the schema does declare it (the run inside a pair's page
is the run's own answer); the answers the schema declares free-form today are held to the answer the server's code
writes instead. The schema's `required` lists are not compared: its components serve the requests too, so they say
what a request must send, while a ModelSerializer answers every field.
"""

from __future__ import annotations

import copy
import dataclasses
import time
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest
from django.contrib.auth.models import User
from django.test import Client as WebClient
from django.utils import timezone

from kernel.transparency.entries import ConsistencyProof, EntryPage, EntryProof
from registry.states import FINAL_STATES
from spechub import checked, client, shapes, watch
from tests.support.factories import PairFactory, RunFactory
from tests.support.runs import finish_run

Node = Mapping[str, Any]
ZOO = Path(__file__).parents[1] / "zoo" / "models" / "spechub-toy"


class ObservationsPush(TypedDict):
    """The body `spechub watch` posts (Client.push_observations)."""

    snapshots: list[shapes.Snapshot]


# Each answer the client reads, by (method, path, status) in the published schema, and the shape it reads it as.
ANSWERS: dict[tuple[str, str, str], object] = {
    ("post", "/api/v1/compatibility/", "200"): shapes.GateReport,
    ("post", "/api/v1/submissions/", "201"): shapes.Submission,
    ("post", "/api/v1/submissions/", "200"): shapes.Submission,
    ("get", "/api/v1/runs/", "200"): shapes.RunPage,
    ("get", "/api/v1/runs/{id}/", "200"): shapes.Run,
    ("get", "/api/v1/pairs/{id}/", "200"): shapes.PairDetail,
    ("get", "/api/v1/recommendations/", "200"): shapes.Recommendations,
    ("post", "/api/v1/workloads/", "201"): shapes.Workload,
    ("post", "/api/v1/workloads/", "200"): shapes.Workload,
    ("post", "/api/v1/workloads/{id}/runs/", "201"): list[shapes.Run],
    ("get", "/api/v1/workloads/{id}/report/", "200"): shapes.WorkloadReport,
    ("get", "/api/v1/certificates/public-key/", "200"): shapes.PublicKey,
    ("post", "/api/v1/deployments/{id}/observations/", "201"): shapes.Ingested,
    ("get", "/api/v1/log/checkpoint", "200"): shapes.LogCheckpoint,
    ("get", "/api/v1/log/proof/inclusion", "200"): EntryProof,
    ("get", "/api/v1/log/proof/consistency", "200"): ConsistencyProof,
    ("get", "/api/v1/log/entries", "200"): EntryPage,
    ("post", "/api/v1/judge/", "200"): shapes.Judgement,
}
# And each request body it sends that carries a shape.
REQUESTS: dict[tuple[str, str], object] = {("post", "/api/v1/deployments/{id}/observations/"): ObservationsPush}

# Answers the published schema declares free-form: each would be held to the answer the server's code writes. None is
# today; the gate's report was, until the compatibility endpoint published its ReportDict.
FROM_SERVER_CODE: dict[object, str] = {}
CLIENT_ONLY = {shapes.Settings: "the config file's settings: no server answer"}


@dataclasses.dataclass
class Walk:
    """Shapes compared with the schema: the keys it does not declare, the shapes it declares, those it leaves open."""

    schema: Node
    undeclared: list[str] = dataclasses.field(default_factory=list)
    declared: set[object] = dataclasses.field(default_factory=set)
    free_form: dict[object, str] = dataclasses.field(default_factory=dict)

    def hint(self, annotation: object, node: Node, where: str) -> None:
        """Compare what `annotation` says a value holds with what the schema says at `node`."""
        if is_typeddict(annotation):
            self.shape(annotation, node, where)
        elif get_origin(annotation) in (Union, types.UnionType):
            for each in get_args(annotation):
                self.hint(each, node, where)
        elif get_origin(annotation) is list:
            for items in [branch["items"] for branch in self.branches(node) if "items" in branch]:
                self.hint(get_args(annotation)[0], items, f"{where}[]")
        elif get_origin(annotation) is dict:  # a mapping by name: each value the schema names is held to the shape
            for branch in self.branches(node):
                named = dict(branch.get("properties", {}))
                if isinstance(branch.get("additionalProperties"), dict):
                    named["*"] = branch["additionalProperties"]
                for name, value in named.items():
                    self.hint(get_args(annotation)[1], value, f"{where}.{name}")

    def shape(self, shape: object, node: Node, where: str) -> None:
        objects = [branch["properties"] for branch in self.branches(node) if "properties" in branch]
        if not objects:
            self.free_form.setdefault(shape, where)
            return
        self.declared.add(shape)
        for key, annotation in get_type_hints(shape).items():
            found = [properties[key] for properties in objects if key in properties]
            if not found:
                self.undeclared.append(f"{where}.{key} ({getattr(shape, '__name__', shape)})")
            for each in found:
                self.hint(annotation, each, f"{where}.{key}")

    def branches(self, node: Node) -> Iterator[Node]:
        """`node` and what it stands for: its $ref resolved, and each branch of its allOf, oneOf and anyOf."""
        if "$ref" in node:
            yield from self.branches(self.schema["components"]["schemas"][node["$ref"].removeprefix("#/components/schemas/")])
        for combined in ("allOf", "oneOf", "anyOf"):
            for branch in node.get(combined, ()):
                yield from self.branches(branch)
        yield node


def walked(schema: Node) -> Walk:
    """Every answer and request the client reads or sends, compared with the schema."""
    walk = Walk(schema)
    for (method, path, status), shape in ANSWERS.items():
        walk.hint(shape, content(schema["paths"][path][method]["responses"][status]), f"{method.upper()} {path} {status}")
    for (method, path), shape in REQUESTS.items():
        walk.hint(shape, content(schema["paths"][path][method]["requestBody"]), f"{method.upper()} {path} request")
    return walk


def content(described: Node) -> Node:
    """The JSON schema of an answer or a request body."""
    found: Node = described["content"]["application/json"]["schema"]
    return found


def absent(annotation: object, value: object, where: str) -> Iterator[str]:
    """The keys `annotation` names that the answer `value` lacks, at any depth (NotRequired keys may be absent)."""
    if is_typeddict(annotation) and isinstance(value, dict):
        hints, written = get_type_hints(annotation), get_type_hints(annotation, include_extras=True)
        for key, hint in hints.items():
            if key in value:
                yield from absent(hint, value[key], f"{where}.{key}")
            elif get_origin(written[key]) is not NotRequired:
                yield f"{where}.{key} ({getattr(annotation, '__name__', annotation)})"
    elif get_origin(annotation) in (Union, types.UnionType):
        for each in get_args(annotation):
            yield from absent(each, value, where)
    elif get_origin(annotation) is list and isinstance(value, list):
        for item in value:
            yield from absent(get_args(annotation)[0], item, f"{where}[]")


def shapes_in(annotation: object) -> Iterator[object]:
    """The shapes an annotation names, inside lists, unions and other shapes too."""
    if is_typeddict(annotation):
        yield annotation
        for each in get_type_hints(annotation).values():
            yield from shapes_in(each)
    for each in get_args(annotation):
        yield from shapes_in(each)


@pytest.fixture(scope="module")
def schema() -> Node:
    """The OpenAPI schema the server publishes at /api/schema/."""
    answer = WebClient().get("/api/schema/", HTTP_ACCEPT="application/json")
    assert answer.status_code == 200, answer.content[:300]
    found: Node = answer.json()
    return found


def test_every_key_a_shape_names_is_declared_by_the_servers_schema_for_that_answer(schema):
    assert walked(schema).undeclared == []


def test_a_field_the_server_renames_fails_the_comparison(schema):
    renamed = copy.deepcopy(schema)
    properties = renamed["components"]["schemas"]["RunOut"]["properties"]
    properties["status"] = properties.pop("state")
    assert "GET /api/v1/runs/{id}/ 200.state (Run)" in walked(renamed).undeclared


def test_every_shape_is_held_to_the_schema_or_to_the_server_code_that_writes_it(schema):
    walk = walked(schema)
    defined = {value for value in vars(shapes).values() if is_typeddict(value) and value.__module__ == shapes.__name__}
    assert defined - walk.declared - FROM_SERVER_CODE.keys() - CLIENT_ONLY.keys() == set()
    # A shape the schema leaves open wherever the client meets it must be checked against the server's code below.
    assert walk.free_form.keys() - walk.declared - FROM_SERVER_CODE.keys() == set(), walk.free_form


def test_every_shape_the_client_returns_or_sends_is_among_the_answers_compared():
    compared = {found for shape in [*ANSWERS.values(), *REQUESTS.values()] for found in shapes_in(shape)}
    methods = [method for name, method in vars(client.Client).items() if callable(method) and not name.startswith("_")]
    used = {found for method in methods for hint in get_type_hints(method).values() for found in shapes_in(hint)}
    assert used - compared == set()


def test_the_watchers_snapshot_sends_every_field_it_reads():
    assert [field.name for field in dataclasses.fields(watch.Snapshot)] == list(get_type_hints(shapes.Snapshot))


def test_the_clients_final_states_are_the_servers():
    assert {str(state) for state in FINAL_STATES} == client.FINAL_STATES


@pytest.mark.django_db
def test_the_watchers_own_snapshot_is_taken_and_answered_with_every_key_its_shape_names():
    """The body as `spechub watch` builds it, posted to the real endpoint; and the answer it reads, as written."""
    owner = User.objects.create_user("owner")
    pair = PairFactory.create()
    document = {"schema_version": 3, "stages": {"speculative": {"acceptance": {"mean_acceptance_length": 3.4}}}}
    RunFactory.create(pair=pair, state="finished", finished_at=timezone.now(), result=document, engine_version="0.32.0")
    web = WebClient()
    web.force_login(owner)
    registered = web.post("/api/v1/deployments/", {"name": "prod", "pair": pair.pk}, content_type="application/json")
    assert registered.status_code == 201, registered.content
    shot = watch.Snapshot(read_at=time.time() - 60, drafts=100, draft_tokens=400, accepted=240, per_position=[90, 70, 50, 30],
                          requests=10, started_at=time.time() - 600, engine_version="0.32.0", k=4)  # fmt: skip
    body: ObservationsPush = {"snapshots": [shot.as_dict()]}
    answer = WebClient().post(f"/api/v1/deployments/{registered.json()['id']}/observations/", body,
                              content_type="application/json",
                              headers={"Authorization": f"Bearer {registered.json()['ingest_token']}"})  # fmt: skip
    assert answer.status_code == 201, answer.content
    assert list(absent(shapes.Ingested, answer.json(), "POST /api/v1/deployments/<id>/observations/")) == []


@pytest.mark.django_db
def test_the_servers_own_answers_pass_the_run_time_check_every_spechub_command_reads_them_through():
    """A finished run, the runs page, the pair page and the recommendations, as the server writes them, held to the
    types their shapes say (spechub.checked): a shape stricter than the server would refuse a real answer."""
    pair = PairFactory.create()
    run = finish_run(pair, ratios=[1.4, 1.5, 1.6, 1.5])
    web = WebClient()
    web.force_login(User.objects.create_user("staff", is_staff=True))
    asked = {
        f"/api/v1/runs/{run.pk}/": shapes.Run,
        "/api/v1/runs/": shapes.RunPage,
        f"/api/v1/pairs/{pair.pk}/": shapes.PairDetail,
        f"/api/v1/recommendations/?verifier={pair.verifier.repo_id}&hardware=cpu": shapes.Recommendations,
    }
    for path, shape in asked.items():
        answer = web.get(path)
        assert answer.status_code == 200, (path, answer.content[:300])
        checked.check(answer.json(), shape)
