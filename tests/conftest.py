from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import override_settings

from kernel import settings as kernel_settings
from kernel.hub import HubClient
from tests.support.factories import HubModelFactory, PairFactory
from zoo import variants
from zoo.localhub import LocalHub

pytest_plugins = [
    "tests.support.certified",  # the session's one real certification
    "tests.support.balance",  # the parallel tier, longest module first
]

TIERS = ("browser", "engine", "process")  # what a test needs beyond the database, heaviest first
DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup", "live_server", "django_db_blocker"}


def pytest_configure(config: pytest.Config) -> None:
    """Build the zoo's format variants where they are missing (a fresh clone): tests read them straight from the zoo."""
    if not hasattr(config, "workerinput"):  # once, in the controller, before any xdist worker starts
        variants.ensure()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give every test a tier: `browser`, `engine` and `process` are marked where the test is; the rest is `db`
    (it touches the database) or `unit` (it needs nothing). `make test-fast` runs unit and db tests only;
    every test under tests/browser is `browser`.

    The shared certification's own readers are marked `serial` where they are (it times its servers, so it runs
    where nothing else does, once); `make pytest` hands it over to the parallel step's readers
    (tests/support/certified.py)."""
    browser = Path(__file__).parent / "browser"
    for item in items:
        if browser in item.path.parents:
            item.add_marker(pytest.mark.browser)
        if any(item.get_closest_marker(tier) for tier in TIERS):
            continue
        uses_db = item.get_closest_marker("django_db") or DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        item.add_marker(pytest.mark.db if uses_db else pytest.mark.unit)


@pytest.fixture(autouse=True)
def fresh_kernel_settings():
    """A test that sets an environment variable (monkeypatch.setenv) sees it: the kernel reads its settings once."""
    kernel_settings.current.cache_clear()
    yield
    kernel_settings.current.cache_clear()


@pytest.fixture(autouse=True)
def quick_password_hashing(request: pytest.FixtureRequest) -> Iterator[None]:
    """A password hashed in half a second is the point in production and 0.5 s per user in a test: the tests that run
    in this process alone hash with MD5. A test whose servers run in processes of their own (gunicorn, Celery, a
    browser's) keeps the real hasher, since those processes read the real settings."""
    if any(request.node.get_closest_marker(tier) for tier in TIERS):
        yield
        return
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture
def pair(db):
    return PairFactory.create()


@pytest.fixture
def verifier(db):
    return HubModelFactory.create(role="verifier")


@pytest.fixture(scope="session")
def local_hub():
    """olah serving the toy zoo on loopback, for the whole session; HF_ENDPOINT points at it."""
    with LocalHub() as hub, pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_ENDPOINT", hub.endpoint)
        yield hub


@pytest.fixture(scope="session")
def registry_hub_cache(tmp_path_factory):
    """One download cache for the registry's Hub reads all session: every file in it is pinned to a commit, so a
    test that moves a branch still reads the new commit from olah."""
    return tmp_path_factory.mktemp("registry-hub-cache")


@pytest.fixture
def hub_settings(settings, local_hub, registry_hub_cache):
    """Point the registry's Hub reads (the gate, submissions) at olah for one test."""
    settings.SPECHUB_HUB_ENDPOINT = local_hub.endpoint
    settings.SPECHUB_HUB_CACHE = registry_hub_cache
    return local_hub


@pytest.fixture
def hub_client(local_hub, tmp_path):
    return HubClient(endpoint=local_hub.endpoint, cache_dir=tmp_path / "hub-cache", backoff=0.05)
