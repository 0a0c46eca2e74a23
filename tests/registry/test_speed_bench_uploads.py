"""A SPEED-Bench upload through the API and its report: a placeholder row refused by its row, AL by category, and the
note that only the first turn was sent. The real certification of such an upload is
tests/test_workload_certified_by_a_real_worker.py's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from kernel.traffic.speed_bench import FIRST_TURN_ONLY, PLACEHOLDER
from registry.models import Workload
from registry.traffic.report import by_category, notes

# On PostgreSQL and on the embedded default, SQLite, where `make demo` keeps its workloads.
pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]


def test_a_placeholder_row_is_refused_through_the_api_with_its_row_number_and_nothing_is_kept(verifier):
    rows = [{"question_id": f"q{i}", "category": "qa", "turns": [f"Question {i}?"], "multiturn": False} for i in range(4)]
    rows[3]["turns"] = [f"{PLACEHOLDER}. See the dataset card."]
    client = Client()
    client.force_login(User.objects.create_user("owner", password="pw"))
    content = "".join(json.dumps(row) + "\n" for row in rows)
    refused = client.post(
        "/api/v1/workloads/", {"verifier": verifier.repo_id, "content": content}, content_type="application/json"
    )
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "workload:placeholder" and "line 4: row 4 (question_id 'q3')" in error["message"]
    assert "Resolve the dataset first" in error["message"]
    assert not Workload.objects.exists()


def test_the_report_gives_al_by_category_in_the_order_categories_are_listed_and_says_the_first_turn_only():
    def measured(al: float) -> dict[str, Any]:
        return {"acceptance": {"mean_acceptance_length": al, "acceptance_rate": (al - 1) / 4, "prompts": 80}}

    document: Any = {"workloads": {"writing": measured(2.5), "coding": measured(3.0), "math": measured(2.0)}}
    rows = by_category(document)
    assert [(row["category"], row["mean_acceptance_length"], row["prompts"]) for row in rows] == [
        ("math", 2.0, 80), ("coding", 3.0, 80), ("writing", 2.5, 80)]  # fmt: skip
    assert by_category(None) == []
    assert notes(Workload(format="speed-bench")) == [FIRST_TURN_ONLY] and notes(Workload(format="openai-chat")) == []
