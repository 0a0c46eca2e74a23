"""A registry as compose runs it, for self-hosted workers (issue 41): the web tier holding the public key only, and
a Celery worker on the default queue holding the signing key (it finishes uploads). `python -m workers serve` reaches
it with nothing of ours in its environment."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernel import certificates
from registry.certificates.services import signing_key
from tests.support.processes import BIN, compose_command, process_env, serving, start_worker, worker_database_url

SECRETS = ("DATABASE_URL", "CELERY_BROKER_URL", "SPECHUB_SIGNING_KEY", "DJANGO_SETTINGS_MODULE", "SECRET_KEY")


@contextmanager
def registry_serving(tmp_path: Path, **settings: str) -> Iterator[str]:
    """The registry's web tier and signer (both reading `settings`), on the test database; yields its base URL."""
    with signing(tmp_path, **settings), web_serving(tmp_path, **settings) as base:
        yield base


@contextmanager
def web_serving(tmp_path: Path, **settings: str) -> Iterator[str]:
    """The web tier, as compose runs it, with the registry's public key and not its signing key."""
    public = certificates.public_key_text(signing_key().public_key())
    web = {"DATABASE_URL": worker_database_url(), "SPECHUB_SIGNING_PUBLIC_KEY": public, **settings}
    with serving(compose_command("web"), tmp_path, web, drop=("SPECHUB_SIGNING_KEY",)) as base:
        yield base


@contextmanager
def signing(tmp_path: Path, **settings: str) -> Iterator[None]:
    """A Celery worker holding the signing key, on the default queue only (it finishes uploads): a run's hardware
    queue is left to whoever claims the run."""
    signer = start_worker("worker-cpu", tmp_path, queues="default", **settings)
    try:
        yield
    finally:
        signer.stop()


def serve_command(base: str, token: str | None, credentials: Path, stages: str, *extra: str) -> list[str]:
    """`python -m workers serve` as a team runs it, registering with `token` (or reading `credentials`)."""
    registration = ["--token", token] if token else []
    return [str(BIN / "python"), "-m", "workers", "serve", "--registry", base, *registration, "--credential-file",
            str(credentials), "--stages", stages, "--name", "team-box", *extra]  # fmt: skip


def worker_env(**extra: str) -> dict[str, str]:
    """A self-hosted worker's environment: this machine's, less every secret of the registry's."""
    env = process_env(extra, drop=SECRETS)
    assert not set(SECRETS) & set(env)
    return env
