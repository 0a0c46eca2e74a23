from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from kernel.formats.vllm_support import DRAFTLESS_METHODS, METHODS
from registry.catalog.services import hub_model_get_or_create, pair_get_or_create
from registry.models import HubModel, Method, Pair
from tests.support.factories import HubModelFactory, fake_sha
from tests.support.processes import ROOT, process_env, worker_database_url


@pytest.mark.django_db
def test_the_same_pair_is_found_not_created_twice():
    verifier, draft = HubModelFactory.create(role="verifier"), HubModelFactory.create()
    first, created = pair_get_or_create(verifier=verifier, draft=draft, method="draft_model", num_speculative_tokens=4)
    again, created_again = pair_get_or_create(verifier=verifier, draft=draft, method="draft_model", num_speculative_tokens=4)
    assert (created, created_again, again.pk) == (True, False, first.pk)


@pytest.mark.django_db
def test_a_different_k_or_dtype_is_a_different_pair():
    verifier, draft = HubModelFactory.create(role="verifier"), HubModelFactory.create()
    base: dict[str, Any] = {"verifier": verifier, "draft": draft, "method": "draft_model"}
    a, _ = pair_get_or_create(**base, num_speculative_tokens=4)
    b, _ = pair_get_or_create(**base, num_speculative_tokens=5)
    c, _ = pair_get_or_create(**base, num_speculative_tokens=4, draft_dtype="bfloat16")
    assert len({a.pk, b.pk, c.pk}) == 3


def test_a_pair_holds_exactly_the_methods_the_gate_accepts():
    assert set(Method.values) == METHODS


@pytest.mark.django_db
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_the_gate_accepts_makes_a_pair(method):
    verifier, draft = HubModelFactory.create(role="verifier"), HubModelFactory.create()
    pair, created = pair_get_or_create(
        verifier=verifier, draft=None if method in DRAFTLESS_METHODS else draft, method=method, num_speculative_tokens=4
    )
    assert created and pair.method == method


@pytest.mark.django_db
def test_an_ngram_pair_needs_no_draft_and_refuses_one():
    verifier = HubModelFactory.create(role="verifier")
    pair, _ = pair_get_or_create(verifier=verifier, draft=None, method="ngram", num_speculative_tokens=4)
    assert pair.draft is None
    with pytest.raises(ValidationError, match="uses no draft model"):
        pair_get_or_create(verifier=verifier, draft=HubModelFactory.create(), method="ngram", num_speculative_tokens=4)


@pytest.mark.django_db
def test_a_draft_method_without_a_draft_is_refused():
    with pytest.raises(ValidationError, match="needs a draft model"):
        pair_get_or_create(
            verifier=HubModelFactory.create(role="verifier"), draft=None, method="eagle3", num_speculative_tokens=4
        )
    assert not Pair.objects.exists()


@pytest.mark.django_db
def test_k_out_of_range_is_refused():
    with pytest.raises(ValidationError, match="num_speculative_tokens"):
        pair_get_or_create(
            verifier=HubModelFactory.create(), draft=HubModelFactory.create(), method="draft_model", num_speculative_tokens=0
        )


@pytest.mark.django_db
@pytest.mark.parametrize("repo_id", ["../etc/passwd", "org/name/extra", "org/..", "-org/x", "org/na me", "a" * 97])
def test_a_hostile_repo_id_is_refused(repo_id):
    with pytest.raises(ValidationError, match="not a Hub repo id"):
        hub_model_get_or_create(repo_id=repo_id, sha=fake_sha(1), role="draft")
    assert not HubModel.objects.exists()


@pytest.mark.django_db
def test_a_short_or_uppercase_sha_is_refused():
    for sha in ["abc123", fake_sha(1).upper()]:
        with pytest.raises(ValidationError, match="40-character"):
            hub_model_get_or_create(repo_id="org/name", sha=sha, role="draft")


RACER = """
import json, sys, time, django
django.setup()
from registry.models import HubModel
from registry.catalog.services import pair_get_or_create
verifier, draft = HubModel.objects.get(pk=sys.argv[1]), HubModel.objects.get(pk=sys.argv[2])
start = float(sys.argv[3])
time.sleep(max(0.0, start - time.time()))
out = []
for k in range(1, 21):
    pair, created = pair_get_or_create(verifier=verifier, draft=draft, method="draft_model", num_speculative_tokens=k)
    out.append([k, pair.pk, created])
print(json.dumps(out))
"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.process
def test_processes_racing_to_submit_the_same_pair_create_one_row():
    verifier, draft = HubModelFactory.create(role="verifier"), HubModelFactory.create()
    env = process_env({"DATABASE_URL": worker_database_url(), "DJANGO_SETTINGS_MODULE": "registry.settings"})
    start = time.time() + 4  # every racer has imported Django by then
    args = [sys.executable, "-c", RACER, str(verifier.pk), str(draft.pk), str(start)]
    racers = [subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True) for _ in range(4)]
    results = [json.loads(racer.communicate(timeout=120)[0]) for racer in racers]
    assert all(racer.returncode == 0 for racer in racers)
    for k in range(1, 21):
        answers = [result[k - 1] for result in results]
        assert len({pk for _, pk, _ in answers}) == 1, f"k={k}: racers got different pairs {answers}"
        assert sum(created for _, _, created in answers) == 1, f"k={k}: {answers}"
    assert Pair.objects.count() == 20
