"""SPEED-Bench's record format, read: categories as they are, the first user turn only, placeholder rows refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel.errors import UserError
from kernel.traffic import Limits, Workload, read_workload
from kernel.traffic.requests import SPEED_BENCH_CATEGORIES

RECORDS = Path(__file__).parents[1] / "fixtures/speed_bench_qualitative.jsonl"  # written for the tests: not the dataset
PLACEHOLDER = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE. See the dataset card."


def read(text: str) -> Workload:
    return read_workload([text.encode()], limits=Limits())


def record(question_id: str, category: str, **fields: object) -> dict[str, object]:
    return {"question_id": question_id, "category": category, "sub_category": "x", "turns": ["What is 7 + 5?"],
            "source": "gsm8k", "src_id": "7", "difficulty": "easy", "multiturn": False, **fields}  # fmt: skip


def test_records_keep_their_11_categories_and_send_only_the_first_user_turn():
    workload = read(RECORDS.read_text())
    assert workload.format == "speed-bench"
    assert workload.categories == dict.fromkeys(SPEED_BENCH_CATEGORIES, 1)
    multiturn = next(r for r in workload.sample if r.category == "writing")  # two turns in the file
    assert multiturn.messages == (("user", "Write a short story about a quiet garden."),)
    # The same records as one JSON list are the same workload.
    as_list = json.dumps([json.loads(line) for line in RECORDS.read_text().splitlines()])
    assert read(as_list).sha256 == workload.sha256


def test_resolved_messages_send_the_first_user_turn_and_throughput_classes_carry_over():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Sum the list."},
                {"role": "assistant", "content": "6"}, {"role": "user", "content": "Now the product."}]  # fmt: skip
    rows = [record("t1", "low_entropy", messages=messages), record("t2", "high_entropy"), record("t3", "mixed")]
    for row in rows:
        if "messages" in row:
            del row["turns"]
    workload = read("".join(json.dumps(row) + "\n" for row in rows))
    assert workload.sample[0].messages == (("user", "Sum the list."),)
    assert workload.categories == {"low_entropy": 1, "mixed": 1, "high_entropy": 1}


def test_a_placeholder_row_is_refused_with_its_row_number_and_how_to_resolve_it():
    rows = [record("q1", "math"), record("q2", "qa"), record("q3", "rag", turns=[PLACEHOLDER], source="hotpotqa", src_id="77")]
    with pytest.raises(UserError) as refused:
        read("".join(json.dumps(row) + "\n" for row in rows))
    assert refused.value.code == "workload:placeholder"
    said = refused.value.message
    assert "row 3 (question_id 'q3', source 'hotpotqa', src_id '77')" in said and "fetched from its source" in said


def test_a_record_with_a_category_nobody_named_is_refused_at_its_line():
    with pytest.raises(UserError) as refused:
        read(json.dumps(record("q1", "math")) + "\n" + json.dumps(record("q2", "poetry")) + "\n")
    assert refused.value.code == "workload:invalid" and "line 2: `category` must be one of" in refused.value.message
