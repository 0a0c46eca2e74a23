"""The stage factory a worker uses by default.

Measuring stages (fetch, gate, baseline, speculative, equivalence, throughput,
verdict) arrive with the certification work; until a worker build ships them,
the factory returns none and the director refuses the run with
`director:no-stages`, rather than publishing results nobody measured.
"""

from __future__ import annotations

from workers.director import Stage


def default_stages() -> list[Stage]:
    """Return the measuring stages installed on this worker (none yet)."""
    return []
