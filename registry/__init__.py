"""SpecHub's registry: the Django project and the catalog app.

The Celery app lives in registry.celery (`celery -A registry.celery ...`); it is
not imported here so that the Django-free parts (formats, hub, repos) can be
used by the workers' core without pulling in Django.
"""
