"""The libraries vLLM's CPU processes preload (workers/preload.py), and the run's own list of what it started
(workers/audit.py): what each records, named as a reader and a user's machine need them."""

from __future__ import annotations

import time

import pytest

from kernel import settings
from workers import audit, preload


@pytest.fixture
def chosen(monkeypatch):
    """Set SPECHUB_CPU_PRELOAD (and this process's LD_PRELOAD) for one test, settings read afresh."""

    def choose(names: str, given: str = "") -> None:
        monkeypatch.setenv("SPECHUB_CPU_PRELOAD", names)
        monkeypatch.setenv("LD_PRELOAD", given)
        settings.current.cache_clear()

    yield choose
    settings.current.cache_clear()


def test_the_wanted_libraries_come_in_the_guides_order_and_a_missing_one_is_left_out_and_said(chosen, monkeypatch):
    chosen("iomp,tcmalloc")
    assert preload.wanted() == ("tcmalloc", "iomp")  # the allocator first, whatever order the setting names them in
    monkeypatch.setitem(preload.LIBRARIES, "tcmalloc", lambda: "libtcmalloc_minimal.so.4")
    monkeypatch.setitem(preload.LIBRARIES, "iomp", lambda: None)  # a machine without the venv's Intel OpenMP
    assert preload.value() == "libtcmalloc_minimal.so.4"
    assert preload.described() == {"tcmalloc": "libtcmalloc_minimal.so.4", "iomp": None}
    assert preload.published() == {"LD_PRELOAD": "libtcmalloc_minimal.so.4"}


def test_what_the_process_preloads_already_stays_first_and_is_not_repeated(chosen, monkeypatch):
    chosen("tcmalloc,iomp", given="/opt/mine.so:libtcmalloc_minimal.so.4")
    monkeypatch.setitem(preload.LIBRARIES, "tcmalloc", lambda: "libtcmalloc_minimal.so.4")
    monkeypatch.setitem(preload.LIBRARIES, "iomp", lambda: "/venv/lib/libiomp5.so")
    assert preload.value() == "/opt/mine.so:libtcmalloc_minimal.so.4:/venv/lib/libiomp5.so"
    assert preload.published() == {"LD_PRELOAD": "libtcmalloc_minimal.so.4:$VIRTUAL_ENV/lib/libiomp5.so"}


def test_none_preloads_nothing_and_an_unknown_name_is_refused_with_the_known_ones(chosen):
    chosen("none")
    assert preload.wanted() == () and preload.value() == "" and preload.published() == {}
    chosen("tcmalloc,jemalloc")
    with pytest.raises(ValueError, match="SPECHUB_CPU_PRELOAD names jemalloc; known: tcmalloc, iomp, or none"):
        preload.wanted()


def test_a_run_keeps_each_start_with_its_stage_and_the_seconds_until_it_answered(monkeypatch):
    monkeypatch.setattr(audit, "record", lambda kind, detail: None)  # nothing started: the session's log says so
    starts: list[audit.Start] = []
    outside = audit.started("engine", "not this run's")  # outside `counting`: recorded to the log only
    with audit.counting(starts, "baseline"):
        engine = audit.started("engine", "vllm verifier-alone")
        time.sleep(0.05)
        engine.answered()
    with audit.counting(starts, "gate"):
        server = audit.started("server", "speculative")  # never answered: a start that failed
    assert outside not in starts and [s.stage for s in starts] == ["baseline", "gate"]
    first, second = (start.as_record() for start in starts)
    assert first["kind"] == "engine" and first["detail"] == "vllm verifier-alone" and first["seconds"] is not None
    assert 0.05 <= first["seconds"] < 5
    assert second == {"kind": "server", "detail": "speculative", "stage": "gate", "seconds": None}
    server.answered()
    assert server.as_record()["seconds"] is not None


def test_intel_openmp_replaces_the_gnu_openmp_vllm_preloaded_itself(chosen, monkeypatch):
    chosen("iomp", given="/venv/lib/python3.11/site-packages/torch/lib/libgomp.so.1")  # after an engine started without
    monkeypatch.setitem(preload.LIBRARIES, "iomp", lambda: "/venv/lib/libiomp5.so")
    assert preload.value() == "/venv/lib/libiomp5.so"  # vLLM asserts it is never given both
