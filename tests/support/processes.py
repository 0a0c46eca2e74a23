"""Start and stop the real processes tests need: workers, beat, web servers."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import yaml
from django.db import connection

from tests.services import free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def compose_command(service: str) -> list[str]:
    """Return the command docker-compose.yml runs for `service`."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    command: list[str] = list(compose["services"][service]["command"])
    return command


def worker_database_url() -> str:
    """Return a DATABASE_URL for the test database the current test uses."""
    db = connection.settings_dict
    host = quote(db["HOST"] or "", safe="") if str(db["HOST"]).startswith("/") else db["HOST"]
    port = f":{db['PORT']}" if db["PORT"] else ""
    auth = db["USER"] + (f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{host}{port}/{db['NAME']}"


def process_env(overrides: Mapping[str, str] | None = None, *, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """Return this process's environment with the venv first on PATH, less `drop`, plus overrides."""
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONUNBUFFERED="1")
    env.update(overrides or {})
    return env


class Process:
    """A child process in its own session, with its output in a log file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._log_file = log.open("wb")
        self.popen = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_output(self, needle: str, timeout: float = 60) -> None:
        wait_until(lambda: needle in self.output() or self.popen.poll() is not None, timeout, f"{needle!r} in {self.log}")
        if needle not in self.output():
            raise AssertionError(f"process exited with {self.popen.returncode} before {needle!r}:\n{self.output()[-3000:]}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, sig)
        self.popen.wait(timeout=30)
        self._log_file.close()

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        self._log_file.close()


def run_whole(args: list[str], env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run a command to its end; if it overruns or the test is interrupted, end every process it started.

    vLLM spawns its engine core and workers. Killing only the command would leave them spinning on a core,
    slowing every later test.
    """
    with subprocess.Popen(
        args, cwd=ROOT, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def certifying_worker_env(hub_endpoint: str, tmp_path: Path) -> dict[str, str]:
    """Return the environment of a worker that certifies with the real stages against the local Hub."""
    return {
        "HF_ENDPOINT": hub_endpoint,
        "SPECHUB_HUB_CACHE": str(tmp_path / "worker-hub-cache"),
        "SPECHUB_BASELINE_CACHE": str(tmp_path / "baselines"),
        "SPECHUB_HEARTBEAT_SECONDS": "2",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }


def start_worker(service: str, tmp_path: Path, *, queues: str = "", **env: str) -> Process:
    """Start the compose service's worker command against the test database (on `queues`, where given, rather than
    the service's)."""
    args = compose_command(service)
    if queues:
        args[args.index("-Q") + 1] = queues
    args = [*args, "-n", f"{service}-{uuid.uuid4().hex[:6]}@%h"]
    log = tmp_path / f"{service}-{uuid.uuid4().hex[:6]}.log"
    worker = Process(args, process_env({"DATABASE_URL": worker_database_url(), **env}), log)
    worker.wait_for_output(" ready.", timeout=90)
    return worker


@contextmanager
def serving(
    args: list[str], tmp_path: Path, env: Mapping[str, str] | None = None, *, drop: tuple[str, ...] = ()
) -> Iterator[str]:
    """Run a web server command on a free port while the block runs; yield its base URL."""
    port = free_port()
    args = [arg.replace("0.0.0.0:8000", f"127.0.0.1:{port}").replace("127.0.0.1:8000", f"127.0.0.1:{port}") for arg in args]
    server = Process(args, process_env(env, drop=drop), tmp_path / f"web-{port}.log")
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: _answers(base) or server.popen.poll() is not None, 90, f"{base} to answer")
    if server.popen.poll() is not None:
        raise AssertionError(f"web server exited with {server.popen.returncode}:\n{server.output()[-3000:]}")
    try:
        yield base
    finally:
        server.stop()


def _answers(base: str) -> bool:
    try:
        httpx.get(f"{base}/healthz", timeout=10)
    except httpx.HTTPError:
        return False
    return True


def loaded_libraries(pid: int, names: tuple[str, ...], *, descendants_only: bool = False) -> set[str]:
    """Which of the libraries `names` (file names) a process or any of its descendants (only those, if asked) has
    mapped: what the loader preloaded into it, or it loaded itself (workers/preload.py)."""
    import psutil

    found: set[str] = set()
    root = psutil.Process(pid)
    for process in [*([] if descendants_only else [root]), *root.children(recursive=True)]:
        try:
            maps = Path(f"/proc/{process.pid}/maps").read_text()
        except OSError:  # gone meanwhile
            continue
        found |= {name for name in names if name in maps}
    return found
