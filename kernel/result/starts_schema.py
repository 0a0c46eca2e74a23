"""What a certification started, as its document lists them (issue 62 §2)."""

from __future__ import annotations

from typing import TypedDict

from kernel.result.figures import Amount


class Start(TypedDict):
    """One engine or server a certification started (workers/audit.py): what, by which stage, and how long it took
    to answer (None: it never did)."""

    kind: str  # "engine" (vLLM offline), "server" (vLLM's OpenAI server), "reference" (transformers)
    detail: str  # its method or name, and its flags
    stage: str
    seconds: Amount | None
