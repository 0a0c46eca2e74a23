"""`python -m workers serve`: a self-hosted worker that reaches the registry only through /api/v1/workers/ (issue 41).

It holds no database URL, broker URL or signing key: a registration token, traded once for its own credential (kept
in a file only its user reads), and the registry's URL. It claims a run on its labels, runs the same director and
stages a hosted worker runs, beats while it measures, and uploads the document; the registry checks it and signs
the certificate. A failure is reported with its fault code, and the run's lease goes back to the queue.
"""

from __future__ import annotations

import itertools
import json
import os
import pkgutil
import platform
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import httpx

from kernel.builds import installed_engine_build
from kernel.director import Director, load_stages
from kernel.errors import RunError
from kernel.heartbeat import Heartbeat
from kernel.spec import RunSpec, spec_of
from kernel.traffic import handoff

API = "/api/v1/workers"


class Refused(Exception):
    """The registry said no; its reason, as it gave it."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Registry:
    """The worker API, with this worker's credential once it has one."""

    url: str
    credential: str = ""
    timeout: float = 60.0

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")

    def call(
        self,
        method: str,
        path: str,
        body: Mapping[str, object] | None = None,
        *,
        retry: bool = True,
        patience: float = 60.0,
        **params: Any,
    ) -> httpx.Response:
        """One call; with `retry`, a registry restarting is waited out for `patience` seconds. Only calls that are safe
        to repeat retry: a registration or a claim whose answer was lost is not sent again (the token is spent, the
        lease taken)."""
        headers = {"Authorization": f"Worker {self.credential}"} if self.credential else {}

        def send() -> httpx.Response:
            return httpx.request(method, f"{self.url}{API}{path}", json=body, params=params, headers=headers,
                                 timeout=self.timeout)  # fmt: skip

        answer = self._retried(send, patience) if retry else send()
        if answer.status_code >= 400:
            raise Refused(f"{method} {path}: HTTP {answer.status_code}: {_message(answer)}", answer.status_code)
        return answer

    def _retried(self, send: Callable[[], httpx.Response], patience: float) -> httpx.Response:
        """A registry restarting (a deploy) is waited out, a few seconds at a time, for `patience` seconds; its
        answers are not retried. An upload retried after its answer was lost is stored once (the registry keeps its
        digest)."""
        deadline = time.monotonic() + patience
        for attempt in itertools.count():
            try:
                answer = send()
            except httpx.TransportError:
                if time.monotonic() >= deadline:
                    raise
            else:
                if answer.status_code not in (502, 503, 504) or time.monotonic() >= deadline:
                    return answer
            time.sleep(min(2**attempt, 15, max(deadline - time.monotonic(), 0.1)))
        raise AssertionError("unreachable")


def _message(answer: httpx.Response) -> str:
    try:
        error = answer.json().get("error", {})
        return str(error.get("details", {}).get("detail") or error.get("message") or answer.text)[:500]
    except ValueError:
        return answer.text[:500]


class Device(TypedDict):
    name: str
    memory: int  # bytes


class Evidence(TypedDict):
    """What a worker tells the registry of its machine when it registers; the registry shows it, it judges nothing."""

    platform: str
    cpus: int | None
    engine_build: str | None
    devices: NotRequired[list[Device]]  # where torch sees CUDA devices


class Credential(TypedDict):
    """The file a worker keeps its credential in, with the registry and the build it registered."""

    registry: str
    credential: str
    worker: int
    engine_build: str


def evidence(engine: str) -> Evidence:
    """What this machine is, as torch sees it (device names and memory), and the engine build's version."""
    found: Evidence = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "engine_build": installed_engine_build(engine),
    }
    try:
        import torch

        if torch.cuda.is_available():
            found["devices"] = [
                {"name": torch.cuda.get_device_name(i), "memory": torch.cuda.get_device_properties(i).total_memory}
                for i in range(torch.cuda.device_count())
            ]
    except ImportError:
        pass
    return found


def credential(registry: Registry, path: Path, token: str | None, name: str, engine: str) -> str:
    """The worker's credential: got for a registration token (a new token is a new registration) and kept in `path`
    (0600, written whole), or read from there on later starts, for the same registry and engine build."""
    build = installed_engine_build(engine) or "unknown"
    if token:
        body = {"registration_token": token, "name": name, "engine_build": build, "evidence": evidence(engine)}
        answer = registry.call("POST", "/register/", body, retry=False).json()
        _keep(path, {"registry": registry.url, "credential": answer["credential"], "worker": answer["worker"],
                     "engine_build": build})  # fmt: skip
        return str(answer["credential"])
    stored: dict[str, str] = json.loads(path.read_text()) if path.is_file() else {}
    if stored.get("registry") != registry.url:
        raise Refused(f"No credential for {registry.url} in {path}: give --token a registration token from your "
                      "workers page (one hour, one use).")  # fmt: skip
    if stored.get("engine_build") != build:
        raise Refused(f"This machine's {engine} is {build}, and the worker registered {stored.get('engine_build')}: its "
                      "uploads would be refused. Register it again with a new token (--token).")  # fmt: skip
    return stored["credential"]


def _keep(path: Path, stored: Credential) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump(stored, file)
    os.chmod(partial, 0o600)  # a file left from before keeps its mode through O_CREAT
    os.replace(partial, path)


@contextmanager
def _workload(registry: Registry, spec: RunSpec) -> Iterator[None]:
    """The run's workload on disk while it measures, where the suites read it (as a hosted worker leaves it)."""
    answer = registry.call("GET", f"/runs/{spec.run_id}/workload/", attempt=spec.attempt)
    if answer.status_code == 204:
        yield
        return
    sample = answer.json()
    path = handoff.workload_path(sample["sha256"], spec.run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    handoff.write_sample(path, sample["sha256"], sample["requests"])
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def one_run(registry: Registry, stages: str, heartbeat_seconds: float) -> bool:
    """Claim, measure and upload one run; False when there was none to claim."""
    answer = registry.call("POST", "/claim/", retry=False)
    if answer.status_code == 204:
        return False
    claimed = answer.json()
    spec = spec_of(claimed["spec"], run_id=claimed["run"], attempt=claimed["attempt"])
    with Heartbeat(_beat(registry, spec), heartbeat_seconds):  # through the upload too: the lease holds while it waits
        try:
            with _workload(registry, spec):
                document = Director(load_stages(stages)).run(spec, _progress(registry, spec))
        except RunError as error:
            _fail(registry, spec, error.code, error.detail)
            return True
        except Exception as crashed:  # the worker's own bug: the run is not the pair's to fail
            _fail(registry, spec, "worker:crashed", f"{type(crashed).__name__}: {crashed}.")
            raise
        # The upload holds the whole measurement: a registry being redeployed is waited out longer than other calls.
        body = {"attempt": spec.attempt, "document": document}
        registry.call("POST", f"/runs/{spec.run_id}/result/", body, patience=600)
    return True


def _fail(registry: Registry, spec: RunSpec, code: str, detail: str) -> None:
    """Hand the attempt back with its fault code; one whose lease is gone already has nothing to hand back."""
    try:
        registry.call("POST", f"/runs/{spec.run_id}/fail/", {"attempt": spec.attempt, "code": code, "detail": detail[:2000]})
    except Refused as refused:
        if refused.status not in (401, 403):
            raise


def _beat(registry: Registry, spec: RunSpec) -> Callable[[], bool]:
    def beat() -> bool:
        try:
            registry.call("POST", f"/runs/{spec.run_id}/heartbeat/", {"attempt": spec.attempt})
        except Refused as refused:
            return refused.status not in (401, 403)  # the lease is gone (revoked, taken over): stop beating
        except httpx.HTTPError:
            pass  # the registry is away a moment: beat again next time
        return True

    return beat


def _progress(registry: Registry, spec: RunSpec) -> Callable[[str, int], None]:
    def report(stage: str, percent: int) -> None:
        registry.call("POST", f"/runs/{spec.run_id}/progress/", {"attempt": spec.attempt, "stage": stage, "percent": percent})

    return report


def qualify_where_asked(registry: Registry, engine: str, qualifier: str) -> list[str]:
    """Run the engine build's controls here on each hardware class the registry asks for (it claims no run there
    before), and send their records; returns the classes qualified. `qualifier` is the dotted path of the controls'
    entry point, as the hosted pool's SPECHUB_QUALIFIER."""
    asked = registry.call("GET", "/me/").json()["qualify"]
    if not asked["hardware"]:
        return []
    qualify = pkgutil.resolve_name(qualifier)
    for hardware in asked["hardware"]:
        record = qualify(engine=engine, hardware=hardware, dtype=asked["dtype"], tv=asked["tv"], controls=asked["controls"])
        registry.call("POST", "/qualification/", {"document": record})
    return list(asked["hardware"])


def serve(registry: Registry, *, stages: str, poll_seconds: float, once: bool, heartbeat_seconds: float = 30.0) -> int:
    """Claim and certify runs until stopped (or, with `once`, until one run is done or none is waiting)."""
    while True:
        ran = one_run(registry, stages, heartbeat_seconds)
        if once:
            return 0
        if not ran:
            time.sleep(poll_seconds)
