"""`python -m workers serve`: a self-hosted worker that reaches the registry only through /api/v1/workers/ (issue 41).

It holds no database URL, broker URL or signing key: a registration token, traded once for its own credential (kept
in a file only its user reads), and the registry's URL. It claims a run on its labels, runs the same director and
stages a hosted worker runs, beats while it measures, and uploads the document; the registry checks it and signs
the certificate. A failure is reported with its fault code, and the run's lease goes back to the queue.

It trusts no answer: each is read field by field (workers/answers.py), a name that becomes a path here must be one
(a hash, a commit, a repo id, a bundled suite) and the path stays in its folder, and a wrong answer stops the worker
with the field named. A refused upload ends that run; the worker claims the next.
"""

from __future__ import annotations

import itertools
import json
import os
import pkgutil
import platform
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

import httpx

from kernel.builds import installed_engine_build
from kernel.director import Director, load_stages
from kernel.errors import RunError
from kernel.evidence import HardwareEvidence
from kernel.heartbeat import Heartbeat
from kernel.spec import InputFields, RunSpec, spec_of
from kernel.traffic import handoff
from workers.answers import Garbled, Refused, answered, field, named, number, quoted, strings

API = "/api/v1/workers"
UPLOAD_REFUSED = 5  # the exit status of `serve --once` whose run's upload was refused, as of a refusal that stops it
Outcome = Literal["none", "done", "refused"]  # no run waited; one ran (or failed and was handed back); its upload refused
SHA256 = re.compile(r"[0-9a-f]{64}")
COMMIT = re.compile(r"[0-9a-f]{40}")
# Names the registry sends that become paths here: a Hub repo id (the Hub cache) and a bundled suite's name, which
# has no suffix (a name with one is read as a file of this machine's: workers.suites.load_suite).
REPO_ID = re.compile(r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")
SUITE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


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
    """The registry's error message ({"error": {"message", "details": {"detail"}}}), else the start of the body."""
    try:
        found = answer.json()
    except (ValueError, RecursionError):
        found = None
    error = found.get("error") if isinstance(found, dict) else None
    error = error if isinstance(error, dict) else {}
    details = error.get("details")
    detail = details.get("detail") if isinstance(details, dict) else None
    return str(detail or error.get("message") or answer.text)[:500]


class Credential(TypedDict):
    """The file a worker keeps its credential in, with the registry and the build it registered."""

    registry: str
    credential: str
    worker: int
    engine_build: str


def evidence(engine: str) -> HardwareEvidence:
    """What this machine is, as torch sees it (device names and memory, where it sees CUDA devices), and the engine
    build's version: what the registry shows of it, and judges nothing by (kernel/evidence.py, the type's one home)."""
    found: HardwareEvidence = {
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
        answer = answered(registry.call("POST", "/register/", body, retry=False), "POST /register/")
        secret = field(answer, "credential", str, "POST /register/")
        _keep(path, {"registry": registry.url, "credential": secret, "worker": field(answer, "worker", int, "POST /register/"),
                     "engine_build": build})  # fmt: skip
        return secret
    stored = _stored(path)
    if stored.get("registry") != registry.url:
        raise Refused(f"No credential for {registry.url} in {path}: give --token a registration token from your "
                      "workers page (one hour, one use).")  # fmt: skip
    if stored.get("engine_build") != build:
        raise Refused(f"This machine's {engine} is {build}, and the worker registered {stored.get('engine_build')}: its "
                      "uploads would be refused. Register it again with a new token (--token).")  # fmt: skip
    if not isinstance(stored.get("credential"), str):
        raise Refused(f"{path} holds no credential: register again with --token and a new registration token from your "
                      "workers page.")  # fmt: skip
    return str(stored["credential"])


def _stored(path: Path) -> dict[str, Any]:
    """The credential file's fields ({} when there is none); Refused, saying how to start again, when unreadable."""
    if not path.exists():
        return {}
    try:
        stored: object = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        stored = exc
    if not isinstance(stored, dict):
        wrong = f"{type(stored).__name__}: {stored}" if isinstance(stored, Exception) else "not a JSON object"
        raise Refused(f"{path} is not a credential file this worker wrote ({wrong}): remove it, and register again with "
                      "--token and a new registration token from your workers page.")  # fmt: skip
    return stored


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
    asked = f"GET /runs/{spec.run_id}/workload/"
    answer = registry.call("GET", f"/runs/{spec.run_id}/workload/", attempt=spec.attempt)
    if answer.status_code == 204:
        yield
        return
    sample = answered(answer, asked)
    sha256, requests = named(sample, "sha256", SHA256, asked), field(sample, "requests", list, asked)
    if not all(isinstance(request, dict) for request in requests):
        raise Garbled(f"{asked}: the registry's `requests` must be a list of JSON objects.")
    if spec.plan.workloads != f"sha256:{sha256}":
        raise Garbled(f"{asked}: the registry's `sha256` {sha256[:12]}... is not the workload the run's spec names "
                      f"({quoted(spec.plan.workloads)}).")  # fmt: skip
    path = _inside(handoff.workload_dir(), handoff.workload_path(sha256, spec.run_id))
    path.parent.mkdir(parents=True, exist_ok=True)
    handoff.write_sample(path, sha256, requests)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def _inside(folder: Path, path: Path) -> Path:
    """`path`, resolved, when it lies in `folder` (resolved too); Garbled otherwise. The name was checked already:
    this holds the line should the check or the naming ever change, or a link lead elsewhere."""
    where, within = path.resolve(), folder.resolve()
    if where.parent != within:
        raise Garbled(f"the workload's path {where} is not a file in {within}; nothing was written.")
    return where


def claimed_spec(answer: httpx.Response) -> RunSpec:
    """The run a claim leased, read field by field; Garbled naming the first field this worker does not read."""
    asked = "POST /claim/"
    claimed = answered(answer, asked)
    run, attempt, fields = (field(claimed, "run", int, asked), field(claimed, "attempt", int, asked),
                            field(claimed, "spec", dict, asked))  # fmt: skip
    if run < 1 or attempt < 1:
        raise Garbled(f"{asked}: the registry's run {run} and attempt {attempt} must both be 1 or more.")
    _check_paths(fields, asked)
    try:
        return spec_of(cast(InputFields, fields), run_id=run, attempt=attempt)
    except KeyError as missing:
        raise Garbled(f"{asked}: the registry's `spec` lacks {missing}.") from None
    except (TypeError, ValueError, AttributeError) as wrong:
        raise Garbled(f"{asked}: the registry's `spec` is not a run spec this worker reads ({wrong}).") from None


def _check_paths(fields: Mapping[str, Any], asked: str) -> None:
    """The spec's names that become paths here: each model's repo id and commit (the Hub cache), and the workload,
    which is a bundled suite's name or a registry workload's hash, never a file of this machine's to read."""
    for role in ("verifier", "draft"):
        if role == "draft" and fields.get(role) is None:
            continue
        model = field(fields, role, dict, f"{asked} spec")
        named(model, "repo_id", REPO_ID, f"{asked} spec.{role}")
        named(model, "sha", COMMIT, f"{asked} spec.{role}")
    plan = field(fields, "plan", dict, f"{asked} spec")
    workloads = field(plan, "workloads", str, f"{asked} spec.plan")
    if not (handoff.REFERENCE.fullmatch(workloads) or SUITE.fullmatch(workloads)):
        raise Garbled(f"{asked}: the registry's `spec.plan.workloads` {quoted(workloads)} is neither a bundled suite's "
                      "name nor sha256:<hex>; a worker reads no file the registry names.")  # fmt: skip


def one_run(registry: Registry, stages: str, heartbeat_seconds: float, say: Callable[[str], object]) -> Outcome:
    """Claim, measure and upload one run. `say` writes a line to the terminal."""
    answer = registry.call("POST", "/claim/", retry=False)
    if answer.status_code == 204:
        return "none"
    spec = claimed_spec(answer)
    with Heartbeat(_beat(registry, spec), heartbeat_seconds):  # through the upload too: the lease holds while it waits
        try:
            with _workload(registry, spec):
                document = Director(load_stages(stages)).run(spec, _progress(registry, spec))
        except RunError as error:
            _fail(registry, spec, error.code, error.detail)
            return "done"
        except Garbled as garbled:  # the registry's answer, not the run: hand the lease back, and stop on its word
            _fail(registry, spec, "worker:crashed", f"The registry's answer could not be read: {garbled}")
            raise
        except Exception as crashed:  # the worker's own bug: the run is not the pair's to fail
            _fail(registry, spec, "worker:crashed", f"{type(crashed).__name__}: {crashed}.")
            raise
        # The upload holds the whole measurement: a registry being redeployed is waited out longer than other calls.
        return "done" if _upload(registry, spec, document, say) else "refused"


def _upload(registry: Registry, spec: RunSpec, document: object, say: Callable[[str], object]) -> bool:
    """Send the document; False when the registry refused it. A refusal ends this run, not the worker (another upload
    of it may be stored already, or the lease gone); a refused credential (401) ends the worker, since every later
    call would be refused too."""
    try:
        registry.call("POST", f"/runs/{spec.run_id}/result/", {"attempt": spec.attempt, "document": document}, patience=600)
        return True
    except Refused as refused:
        if refused.status == 401 or not 400 <= refused.status < 500:
            raise
        said, stored_nothing = str(refused), refused.status == 400
    say(f"run {spec.run_id} attempt {spec.attempt} ends without its upload, and the worker goes on: {said}\n")
    if stored_nothing:  # the document itself was refused: hand the lease back now rather than at its expiry
        _fail(registry, spec, "worker:crashed", f"The registry refused the result document: {said}")
    return False


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
    asked = field(answered(registry.call("GET", "/me/"), "GET /me/"), "qualify", dict, "GET /me/")
    hardware = strings(asked, "hardware", "GET /me/ qualify")
    if not hardware:
        return []
    settings = {"dtype": field(asked, "dtype", str, "GET /me/ qualify"), "tv": number(asked, "tv", "GET /me/ qualify"),
                "controls": strings(asked, "controls", "GET /me/ qualify")}  # fmt: skip
    qualify = pkgutil.resolve_name(qualifier)
    for each in hardware:
        registry.call("POST", "/qualification/", {"document": qualify(engine=engine, hardware=each, **settings)})
    return hardware


def serve(registry: Registry, *, stages: str, poll_seconds: float, once: bool, heartbeat_seconds: float = 30.0,
          say: Callable[[str], object] | None = None) -> int:  # fmt: skip
    """Claim and certify runs until stopped (or, with `once`, until one run is done or none is waiting); `say` writes
    a line for the terminal (by default to stderr)."""
    while True:
        outcome = one_run(registry, stages, heartbeat_seconds, say or sys.stderr.write)
        if once:
            return UPLOAD_REFUSED if outcome == "refused" else 0
        if outcome == "none":
            time.sleep(poll_seconds)
