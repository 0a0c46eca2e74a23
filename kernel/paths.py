"""Where SpecHub keeps its local state outside Django's settings (the workers and the kernel read it here)."""

from __future__ import annotations

import os
from pathlib import Path


def var_dir() -> Path:
    """SPECHUB_VAR_DIR, or var/ at the checkout's root, as registry.settings.VAR_DIR reads it."""
    return Path(os.environ.get("SPECHUB_VAR_DIR") or Path(__file__).parents[1] / "var")
