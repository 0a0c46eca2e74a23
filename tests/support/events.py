"""One well-formed body of each pair event, for tests about delivery rather than about what a body says."""

from __future__ import annotations

from registry.notifications.payloads import Certified, Expired, Regressed

CERTIFIED: Certified = {"run": 1, "certificate_digest": "0" * 64, "mean_acceptance_length": 2.5, "speedup": 1.4}
REGRESSED: Regressed = {
    "run": 2,
    "previous_run": 1,
    "regressions": {
        "speedup": {"previous": 1.4, "current": 1.1, "change": -0.21, "interval": [0.7, 0.9], "detectable_drop": 0.1}
    },
}
EXPIRED: Expired = {"certificate_digest": "0" * 64, "expires_at": "2026-01-01T00:00:00+00:00"}
