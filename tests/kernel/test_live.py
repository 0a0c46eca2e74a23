"""Live acceptance's arithmetic: what a snapshot may say, windows across restarts, the interval, the verdict."""

from __future__ import annotations

import numpy as np
import pytest

from kernel import live
from kernel.live import Certified, Counts, Refused, Snapshot

EPOCH = 1.8e9  # read_at is seconds since the epoch: these tests count from January 2027


def snap(read_at: float, drafts: int, accepted: int, positions: tuple[int, ...], requests: int, **given: object) -> Snapshot:
    return Snapshot(EPOCH + read_at, drafts, 4 * drafts, accepted, positions, requests, **given)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("snapshot", "code"),
    [
        (snap(10, -1, 0, (), 0), "live:invalid-count"),
        (Snapshot(EPOCH, 5, 20, 3, (2, 1), 1.5), "live:invalid-count"),  # type: ignore[arg-type]
        (Snapshot(EPOCH, 5, 10, 11, (5, 5), 1), "live:impossible-ratio"),  # more accepted than drafted
        (snap(10, 5, 9, (6, 3), 1), "live:impossible-ratio"),  # position 1 accepted more often than steps ran
        (snap(10, 5, 6, (2, 4), 1), "live:impossible-ratio"),  # a later position more often than an earlier
        (snap(10, 5, 10, (5, 3, 1, 1, 0), 1, k=4), "live:positions-beyond-k"),
        (snap(float("nan"), 5, 2, (2,), 1), "live:invalid-time"),
        (snap(-EPOCH + 10, 5, 2, (2,), 1), "live:invalid-time"),  # ten seconds after 1970: not a time a watcher read
    ],
    ids=[
        "negative",
        "fraction",
        "accepted-over-drafted",
        "position-over-steps",
        "rising-positions",
        "beyond-k",
        "nan-time",
        "not-epoch-seconds",
    ],
)
def test_a_snapshot_no_engine_could_count_is_refused_with_its_reason(snapshot, code):
    with pytest.raises(Refused) as refused:
        live.check(snapshot)
    assert refused.value.code == code and refused.value.message


def test_a_window_is_the_difference_and_a_restart_gives_the_new_processes_counts_never_a_negative_window():
    first = snap(100, 1000, 2400, (900, 700, 500, 300), 50, started_at=1.0)
    second = snap(160, 1500, 3500, (1350, 1000, 700, 450), 75, started_at=1.0)
    assert live.window(first, second).counts == Counts(500, 2000, 1100, (450, 300, 200, 150), 25)
    restarted = snap(220, 40, 90, (35, 25, 20, 10), 2, started_at=2.0)  # the server came back and counted 40 steps
    after = live.window(second, restarted)
    assert after.reset and after.counts == Counts(40, 160, 90, (35, 25, 20, 10), 2)
    # Without a start time, every counter falling at once is a restart; some up and some down is not.
    assert live.window(snap(1, 900, 2000, (), 40), snap(2, 10, 20, (), 1)).reset
    with pytest.raises(Refused, match="backwards"):
        live.window(snap(1, 900, 2000, (), 40), snap(2, 950, 1900, (), 41))
    with pytest.raises(Refused, match="backwards"):
        live.window(first, snap(160, 900, 2000, (800, 600, 400, 200), 60, started_at=1.0))
    with pytest.raises(Refused, match="not after"):
        live.window(second, first)


def test_windows_sum_into_longer_ones_so_a_lost_push_loses_nothing():
    a, b, c = (snap(t, n, 2 * n, (n, n // 2), n // 10) for t, n in ((1, 100), (2, 300), (3, 700)))
    assert live.window(a, b).counts + live.window(b, c).counts == live.window(a, c).counts


def test_the_interval_takes_the_variance_from_the_positions_and_requests_as_its_units():
    # Every step accepts exactly 2 of 4: no spread, so the interval is the point.
    counts = Counts(drafts=400, draft_tokens=1600, accepted=800, per_position=(400, 400, 0, 0), requests=20)
    assert live.al_interval(counts) == (3.0, 3.0)
    # Half the steps accept 4, half 0: variance 4; 25 requests of spread lengths count as 25 / e = 9.2 units,
    # so t(8) * sqrt(4 / 9.2).
    spread = Counts(drafts=400, draft_tokens=1600, accepted=800, per_position=(200, 200, 200, 200), requests=25)
    low, high = live.al_interval(spread)  # type: ignore[misc]
    assert high - 3.0 == pytest.approx(2.306 * 2 / (25 / np.e) ** 0.5, rel=1e-3) and low == pytest.approx(6 - high)


def simulated_windows(rng: np.random.Generator, windows: int, k: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Windows of 40 requests; each request accepts each position with its own chance (Beta(4, 2)) over 5-40 steps."""
    counts = []
    for _ in range(windows):
        chance = rng.beta(4, 2, size=40)
        steps = rng.integers(5, 41, size=40)
        chances = np.repeat(chance, steps)
        leading = np.cumprod(rng.random((chances.size, k)) < chances[:, None], axis=1)  # positions 1..i all accepted
        counts.append((chances.size, leading.sum(axis=0), 40))
    drafts = np.array([c[0] for c in counts])
    positions = np.array([c[1] for c in counts])
    return drafts, positions, np.array([c[2] for c in counts])


def test_the_request_level_interval_keeps_its_coverage_where_a_step_level_one_would_not():
    """Simulated: steps within a request accept alike. The true AL is 1 + E[p + p^2 + p^3 + p^4] over Beta(4, 2)."""
    rng = np.random.default_rng(7)
    draws = rng.beta(4, 2, size=2_000_000)
    truth = 1 + float(np.mean(draws + draws**2 + draws**3 + draws**4))
    drafts, positions, requests = simulated_windows(rng, 600)
    covered = steps_covered = 0
    for n, per_position, units in zip(drafts, positions, requests, strict=True):
        counts = Counts(int(n), 4 * int(n), int(per_position.sum()), tuple(int(p) for p in per_position), int(units))
        low, high = live.al_interval(counts)  # type: ignore[misc]
        covered += low <= truth <= high
        as_steps = Counts(counts.drafts, counts.draft_tokens, counts.accepted, counts.per_position, counts.drafts)
        low, high = live.al_interval(as_steps)  # type: ignore[misc]
        steps_covered += low <= truth <= high
    assert covered / 600 >= 0.95, covered / 600  # at least its stated 95 % (it bounds the variance from above)
    assert steps_covered / 600 < 0.8, steps_covered / 600  # steps as units would claim far more than the data hold


CERTIFIED = Certified(band=(3.2, 3.6), k=4, engine_version="0.32.0")


@pytest.mark.parametrize(
    ("counts", "k", "version", "verdict"),
    [
        (Counts(1000, 4000, 2400, (900, 700, 500, 300), 50), 4, "0.32.0", live.WITHIN),
        (Counts(1000, 4000, 1200, (600, 350, 200, 50), 200), 4, "0.32.0", live.BELOW),
        (Counts(1000, 4000, 30, (25, 4, 1, 0), 50), 4, "0.32.0", live.COLLAPSE),
        (Counts(100, 400, 240, (90, 70, 50, 30), 5), 4, "0.32.0", live.TOO_SMALL),
        (Counts(1000, 3000, 1200, (600, 350, 250), 50), 3, "0.32.0", live.MISMATCH),
        (Counts(1000, 4000, 2400, (900, 700, 500, 300), 50), 4, "0.33.1", live.MISMATCH),
    ],
    ids=["within", "below", "collapse", "too-small", "other-k", "other-engine"],
)
def test_each_verdict_with_its_reason(counts, k, version, verdict):
    # "below" needs the window before to read under the band too, and the bound at the family's level: 200 requests
    # for AL 2.2 against [3.2, 3.6] (50 were enough for the single window's 95 % interval this replaced).
    found, reason = live.judge(counts, CERTIFIED, k=k, engine_version=version, before=counts)
    assert found == verdict and reason


def test_one_window_under_the_band_reads_below_only_when_the_one_before_did_too():
    low = Counts(1000, 4000, 1200, (600, 350, 200, 50), 200)
    fine = Counts(1000, 4000, 2400, (900, 700, 500, 300), 200)
    for before in (None, fine):
        found, reason = live.judge(low, CERTIFIED, k=4, engine_version=None, before=before)
        assert found == live.WITHIN and "in this window alone" in reason
    found, reason = live.judge(low, CERTIFIED, k=4, engine_version=None, before=low)
    assert found == live.BELOW and "wholly below the certified [3.20, 3.60]" in reason


def test_a_point_band_is_no_band_never_below_and_within_names_the_drop_it_would_miss():
    point = Certified(band=None, k=4, engine_version="0.32.0", al=3.4)
    low = Counts(1000, 4000, 1200, (600, 350, 200, 50), 200)
    found, reason = live.judge(low, point, k=4, engine_version=None, before=low)
    assert found == live.NO_BAND and reason.startswith("no band: re-certify to hold it live") and "AL 3.40" in reason
    assert live.unseen_drop(low, point) is None
    # AL 3.4 over 50 requests: the bound reaches 1.08 above it; held to [3.2, 3.6] from 3.4, a true AL under 2.38
    # (30 % down), where the bound reaches less (as the root of AL - 1), would read under the band.
    counts = Counts(1000, 4000, 2400, (900, 700, 500, 300), 50)
    found, reason = live.judge(counts, CERTIFIED, k=4, engine_version=None)
    drop = live.unseen_drop(counts, CERTIFIED)
    assert found == live.WITHIN and reason.endswith(f"a drop under {drop * 100:.0f} % would not show at this traffic")  # type: ignore[operator]
    bound, al = live.al_bound(counts, 4), live.acceptance_length(counts)
    assert bound is not None and al is not None
    highest = CERTIFIED.centre * (1 - drop)  # type: ignore[operator]
    assert highest + (bound - al) * ((highest - 1) / (al - 1)) ** 0.5 == pytest.approx(3.2)
    assert live.unseen_drop_text(1.0) == "at this traffic no drop would show"
