"""SpecHub's certification core: the measuring stages, the engines, the workloads and the figures.

It imports nothing from Django and nothing from the registry, so it runs alone on a GPU box
(`python -m workers certify`). The Celery task that drives it lives in registry.tasks and finds
its stages by dotted path (SPECHUB_DIRECTOR_STAGES).
"""
