"""The engine qualification task: run the controls on a worker of the build's hardware class, store the record.

The controls are the workers' core (SPECHUB_QUALIFIER, a dotted path), so this module imports
nothing from it; the record comes back as a document, like a certification's.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.utils.module_loading import import_string

from kernel.builds import installed_engine_build
from registry.celery import app
from registry.selectors import qualification_for
from registry.services.qualifications import qualification_record

logger = logging.getLogger(__name__)


@app.task(name="registry.qualify_engine", acks_late=True)
def qualify_engine(engine: str, hardware: str, engine_build: str, dtype: str) -> str:
    """Qualify the engine build installed here, unless the build already has a qualification; return its digest."""
    installed = installed_engine_build(engine)
    if installed != engine_build:  # a worker of another build took it: the build's own workers report it again
        logger.warning("asked to qualify %s %s, but %s is installed here", engine, engine_build, installed)
        return "other-build"
    if qualification_for(engine=engine, engine_build=engine_build, hardware=hardware, dtype=dtype):
        return "already-qualified"
    qualify = import_string(settings.SPECHUB_QUALIFIER)
    record = qualify(engine=engine, hardware=hardware, dtype=dtype, tv=settings.SPECHUB_QUALIFY_TV,
                     controls=settings.SPECHUB_QUALIFY_CONTROLS)  # fmt: skip
    return qualification_record(document=record).digest
