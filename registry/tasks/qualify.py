"""The engine qualification task: run the controls on a worker of the build's hardware class, store the record.

The controls are the workers' core (SPECHUB_QUALIFIER, a dotted path), so nothing here imports
it; the record comes back as a document, like a certification's.
"""

from __future__ import annotations

from registry.celery import app
from registry.runs.qualifications import build_qualify_here


@app.task(name="registry.qualify_engine", acks_late=True)
def qualify_engine(engine: str, hardware: str, engine_build: str, dtype: str) -> str:
    """Qualify the engine build installed here, unless the build already has a qualification; return its digest."""
    return build_qualify_here(engine=engine, hardware=hardware, engine_build=engine_build, dtype=dtype)
