"""The Dynamic SD schedule composed from the levels a certification measured (kernel/schedule.py)."""

from __future__ import annotations

from typing import Any

from kernel import schedule
from kernel.schedule import AtLevel, Range


def test_ranges_run_between_the_levels_from_batch_1_and_a_slower_level_drafts_nothing():
    ranges = schedule.compose([AtLevel(4, 4, True), AtLevel(1, 3, False), AtLevel(2, 2, False), AtLevel(8, 2, True)])
    assert ranges == [Range(1, 1, 3), Range(2, 3, 2), Range(4, schedule.MAX_BATCH, 0)]  # 4 and 8 merged: both k = 0
    assert [schedule.k_at(ranges, b) for b in (1, 2, 3, 4, 7, 9)] == [3, 2, 2, 0, 0, 0]


def test_one_k_everywhere_is_one_range_and_the_config_keeps_the_runs_k_as_its_cap():
    fixed = schedule.compose([AtLevel(1, 4, False), AtLevel(4, 4, False)])
    assert fixed == [Range(1, schedule.MAX_BATCH, 4)]
    mixed = schedule.compose([AtLevel(1, 4, False), AtLevel(4, 1, False)])
    config = schedule.speculative_config({"method": "draft_model", "num_speculative_tokens": 4}, mixed)
    assert config["num_speculative_tokens"] == 4
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 3, 4], [4, schedule.MAX_BATCH, 1]]
    assert schedule.compose([]) == [] and schedule.k_at([], 3) == 0


def test_the_command_to_serve_is_the_schedule_only_where_it_was_measured_better():
    from kernel import result

    def document(serve_it: bool | None, environment: dict[str, str] | None = None) -> Any:
        servers: dict[str, Any] = {"speculative_recipe": "vllm serve fixed-k"}
        if environment is not None:
            servers["environment"] = environment
        throughput: dict[str, Any] = {"levels": {}, "servers": servers}
        if serve_it is not None:
            served = {"serve_it": serve_it, "recipe": "vllm serve schedule", "ranges": [[1, 1024, 2]], "levels": {}}
            throughput["choice_of_k"] = {"run_k": 4, "levels": {}, "recipes": {}, "schedule": served}
        return {"schema_version": 3, "stages": {"throughput": throughput}}

    assert result.serve_command(document(True)) == "vllm serve schedule"
    assert result.serve_command(document(False)) == "vllm serve fixed-k"
    assert result.serve_command(document(None)) == "vllm serve fixed-k"
    assert result.serve_command({"schema_version": 3, "stages": {}}) is None  # type: ignore[arg-type]
    # What the servers ran with goes before whichever line is served (issue 62 §4: a CPU user's server needs it too).
    cpu = {"VLLM_CPU_KVCACHE_SPACE": "1", "LD_PRELOAD": "libtcmalloc_minimal.so.4:$VIRTUAL_ENV/lib/libiomp5.so"}
    prefix = "LD_PRELOAD=libtcmalloc_minimal.so.4:$VIRTUAL_ENV/lib/libiomp5.so VLLM_CPU_KVCACHE_SPACE=1 "
    assert result.serve_command(document(True, cpu)) == prefix + "vllm serve schedule"
    assert result.serve_command(document(None, cpu)) == prefix + "vllm serve fixed-k"
    assert result.serve_command(document(None, {})) == "vllm serve fixed-k"
