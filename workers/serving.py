"""The two servers speed is measured on: the verifier alone (A) and the pair (B), started at the same time.

Each runs the command the pair page publishes (the engine's `server_command`), under the worker's process group
(kernel.children), with the front ends kept off the engine cores. Here too are the servers' own spec-decode
counters, read from their /metrics, and the engine's root cause when a server fails to start. The paired blocks
that time them are workers/blocks.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from kernel import children, settings
from kernel.errors import InfraError
from workers import audit, engine_latency
from workers.engines.base import Engine, EngineConfig, SpecCounters

SIDES = ("baseline", "speculative")


START_TIMEOUT = 900.0  # seconds for both servers: a cold compile on a loaded machine takes minutes


LOG_TAIL = 2000


@dataclass
class Server:
    """One server process, in its own process group so that stopping it stops its engine too."""

    name: str
    command: list[str]
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    finished_at: float = 0.0  # time.monotonic() at the end of its last block
    start: audit.Start | None = None  # its start in the run's list (audit.counting), answered when /health first says 200

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self) -> str:
        return self.log_text()[-LOG_TAIL:]

    def pause(self) -> None:
        """Stop the server and its engine (SIGSTOP to its group) while the other server is timed: no cycle of theirs
        then falls on the cores the timed one runs on. If the worker dies meanwhile, the kernel's parent-death
        SIGTERM waits on the stopped server until kernel.children.orphans_end kills it at the next start."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, number: signal.Signals) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, number)

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
                os.killpg(self.process.pid, signal.SIGCONT)  # a server stopped while the other was timed acts on it
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        children.forget(self.process.pid)


@dataclass
class Spawned:
    """Servers started and not waited for yet, with the folder their logs live in as long as they do."""

    started: dict[str, Server]
    logs: tempfile.TemporaryDirectory[str]

    def stop(self) -> None:
        for server in self.started.values():
            server.stop()
        self.logs.cleanup()


def spawn(engine: Engine, configs: Mapping[str, EngineConfig]) -> Spawned:
    """Start one server per config, all at once, and return without waiting for any to answer."""
    spawned = Spawned({}, tempfile.TemporaryDirectory(prefix="spechub-servers-"))
    try:
        for name, config in configs.items():
            spawned.started[name] = _start(engine, name, config, Path(spawned.logs.name))
    except BaseException:
        spawned.stop()
        raise
    return spawned


@contextlib.contextmanager
def servers(engine: Engine, configs: Mapping[str, EngineConfig], spawned: Spawned | None = None) -> Iterator[dict[str, Server]]:
    """Start one server per config, all at once (unless `spawned` holds them, started earlier); wait until every one
    answers; stop them all on the way out. An error carries the tail of the log that explains it.
    """
    own_cores = os.sched_getaffinity(0)
    spawned = spawned or spawn(engine, configs)
    try:
        ready(list(spawned.started.values()))
        _frontends_off_the_engine_cores(list(spawned.started.values()))
        _engine_cores_below_the_front_ends(list(spawned.started.values()))
        yield spawned.started
    finally:
        spawned.stop()
        _pin_threads(os.getpid(), own_cores)


def _start(engine: Engine, name: str, config: EngineConfig, log_dir: Path) -> Server:
    port = _free_port()
    command = engine.server_command(config, port)
    log = log_dir / f"{name}.log"
    started = audit.started("server", f"{name} {' '.join(config.server_flags)}".strip())
    with log.open("wb") as out:
        process = children.spawn(command, out, settings.child_environment(engine.server_environment(config)))
    return Server(name=name, command=command, port=port, process=process, log=log, start=started)


class Exited(InfraError):
    """A server exited while it started; `server` names it, and the message leads with the engine's own reason."""

    def __init__(self, server: Server) -> None:
        cause = engine_error(server.log_text())  # often far above the tail, under the wrappers' tracebacks
        super().__init__(
            "serve:start-failed", f"{server.name} exited ({server.process.returncode}): {cause}\n{server.log_tail()}"
        )
        self.server = server.name
        self.returncode = server.process.returncode  # negative: killed by a signal (memory, a stop), not a refusal
        self.cause = cause

    @property
    def refused_config(self) -> bool:
        """Whether vLLM refused the configuration it was given (the offline engine's `engine:refused-pair` case): it
        exited by itself, and the engine's own error is a validation error, not a lost device or memory."""
        return (self.returncode or 0) > 0 and REFUSAL.search(self.cause) is not None


# vLLM's validation of an engine's arguments, as the engine's own error line names it.
REFUSAL = re.compile(r"\b(ValueError|TypeError|ValidationError)\b")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def ready(waiting: list[Server]) -> None:
    """Wait until every server in `waiting` answers /health (emptying the list), each start marked answered."""
    deadline = time.monotonic() + START_TIMEOUT
    with httpx.Client(timeout=2) as client:
        while waiting:
            for server in list(waiting):
                if server.process.poll() is not None:
                    raise Exited(server)
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{server.url}/health").status_code == 200:
                        waiting.remove(server)
                        if server.start is not None:
                            server.start.answered()
            if waiting and time.monotonic() > deadline:
                raise InfraError("serve:start-failed", f"{waiting[0].name} not ready after {START_TIMEOUT:.0f} s")
            time.sleep(0.5)


def model_runner(server: Server) -> str:
    """Which model runner the server's engine chose, as its log says: "V1" where vLLM fell back to it (it warns, naming
    why), else unknown (""); an offline engine reads it from its config (VllmEngine._model_runner)."""
    return "V1" if "using the V1 model runner" in server.log_text() else ""


# An exception line, as Python prints it (after vLLM's "(Process pid=N) ERROR ..." prefix, if any), or argparse's.
ERROR_LINE = re.compile(r"\b[A-Z]\w*(Error|Exception): |^\S+: error: |\berror: ")


# vLLM's wrappers around the real failure: they point back at it and name nothing themselves.
WRAPPER = re.compile(r"See root cause above|Failed core proc")


def engine_error(log: str) -> str:
    """Return the engine's own error line from a server's log: the first one that is not a wrapper pointing at it, or
    else the log's last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if ERROR_LINE.search(line) and not WRAPPER.search(line)]
    return (errors[:1] or lines[-1:] or ["the server exited without a message"])[0][:500]


def _frontends_off_the_engine_cores(servers: list[Server]) -> None:
    """Keep this process (the client) and the servers' front ends on the cores vLLM left to them.

    vLLM's CPU backend binds each engine worker to its cores and reserves the rest for the
    front end, but leaves the front-end processes free to run on the worker's core, where
    they preempt it at random. Measured here with one server, baseline tok/s over 8 blocks:
    c=4 664-1753 free, 1345-1705 kept apart; c=16 997-3667 free, 3382-3972 kept apart.
    Where the workers are not bound (GPU builds), nothing changes.
    """
    import psutil

    with contextlib.suppress(psutil.Error):
        processes = [psutil.Process()]  # this one, the client; other children of ours (a web server) stay put
        for server in servers:
            root = psutil.Process(server.process.pid)
            processes += [root, *root.children(recursive=True)]
        workers = [p for p in processes if p.name().startswith("VLLM::Worker")]
        bound = set().union(*(p.cpu_affinity() for p in workers))
        free = sorted(set(range(psutil.cpu_count() or 1)) - bound)
        if not workers or not free:
            return
        for process in processes:
            if process not in workers:
                _pin_threads(process.pid, free)


# The engine cores' niceness while they are measured: below the front ends and the client, which share their core.
ENGINE_CORE_NICE = 10


def _engine_cores_below_the_front_ends(servers: list[Server]) -> None:
    """Lower the engine cores' scheduling priority below the front ends' and the client's (issue 51).

    On the cores vLLM leaves to the front end, each server's engine core (its scheduler, between the API server
    and the worker) shares the CPU with the API servers and the client. At equal priority a front end with a
    finished token to stream waits its turn behind an engine core, and the client sees the first token late: the
    verifier alone's TTFT p90 read 353 ms where its engine made it at 16 ms. Below them, the front ends send what
    the engine made when it made it. Nothing the servers compute changes, and raising a niceness needs no privilege.
    """
    import psutil

    for server in servers:
        with contextlib.suppress(psutil.Error):
            for process in psutil.Process(server.process.pid).children(recursive=True):
                if "EngineCore" in process.name():
                    _nice_threads(process.pid, ENGINE_CORE_NICE)


def _nice_threads(pid: int, nice: int) -> None:
    """Set the niceness of every thread of `pid`: Linux keeps one per thread, as it does affinity."""
    import psutil

    with contextlib.suppress(psutil.Error):
        for thread in psutil.Process(pid).threads():
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, thread.id, nice)


def _pin_threads(pid: int, cores: Collection[int]) -> None:
    """Set the affinity of every thread of `pid`: Linux keeps one per thread, and a process's is its main thread's."""
    import psutil

    with contextlib.suppress(psutil.Error):
        for thread in psutil.Process(pid).threads():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(thread.id, cores)


COUNTER_FAMILIES = {
    "vllm:spec_decode_num_drafts": "drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted",
}


PER_POSITION_FAMILY = "vllm:spec_decode_num_accepted_tokens_per_pos"


def served_counters(server: Server) -> SpecCounters:
    """Read the server's cumulative spec-decode counters from its Prometheus /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    found: dict[str, int] = {}
    per_position: dict[int, int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            if family.name in COUNTER_FAMILIES:
                key = COUNTER_FAMILIES[family.name]
                found[key] = found.get(key, 0) + int(sample.value)
            elif family.name == PER_POSITION_FAMILY:
                position = int(sample.labels.get("position", 0))
                per_position[position] = per_position.get(position, 0) + int(sample.value)
    positions = tuple(per_position.get(i, 0) for i in range(max(per_position, default=-1) + 1))
    return SpecCounters(per_position=positions, **found)


def served_histograms(server: Server) -> dict[str, engine_latency.Histogram]:
    """Return the engine's cumulative latency histograms from the server's /metrics (engine_latency.FAMILIES)."""
    return engine_latency.parse(httpx.get(f"{server.url}/metrics", timeout=10).text)


def served_total(server: Server, family: str) -> float:
    """Return a counter family's total on the server's /metrics (summed over its labels)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return sum(s.value for f in text_string_to_metric_families(text) if f.name == family for s in f.samples
               if s.name.endswith("_total"))  # fmt: skip


def complete(server: Server, model: str, prompts: list[list[int]], max_tokens: int) -> None:
    """One greedy completions request carrying `prompts` together, as the offline engine takes a batch."""
    body = {"model": model, "prompt": prompts, "max_tokens": max_tokens, "temperature": 0}
    answer = httpx.post(f"{server.url}/v1/completions", json=body, timeout=600)
    if answer.status_code != 200:
        raise InfraError("serve:request-failed", f"{server.name}: HTTP {answer.status_code}: {answer.text[:500]}")
