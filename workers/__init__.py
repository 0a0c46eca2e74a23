"""SpecHub's certification workers.

`workers.tasks` is the thin Celery interface; everything else here is the core,
which imports nothing from Django and can run alone on a GPU box.
"""
