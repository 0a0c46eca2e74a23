from __future__ import annotations

from itertools import pairwise

from registry.states import FINAL_STATES, TRANSITIONS, RunState, can_transition


def test_every_state_has_a_row_in_the_transition_table():
    assert set(TRANSITIONS) == set(RunState)


def test_final_states_have_no_way_out():
    for state in FINAL_STATES:
        assert TRANSITIONS[state] == frozenset()


def test_every_state_can_reach_a_final_state():
    for start in RunState:
        seen, frontier = {start}, [start]
        while frontier:
            for nxt in TRANSITIONS[frontier.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        assert seen & FINAL_STATES, start


def test_the_happy_path_is_legal_in_order():
    path = ["queued", "fetching", "gating", "measuring", "publishing", "finished"]
    assert all(can_transition(a, b) for a, b in pairwise(path))


def test_it_cannot_skip_from_queued_to_finished():
    assert not can_transition("queued", "finished")
    assert not can_transition("queued", "stale")
