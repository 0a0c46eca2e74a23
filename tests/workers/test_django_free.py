"""The workers' core runs alone on a GPU box: importing it must not import Django."""

from __future__ import annotations

import subprocess
import sys

from tests.support.processes import ROOT, process_env


def test_the_director_its_stages_engines_and_the_cli_import_no_django():
    code = (
        "import sys, workers.__main__, workers.certification, workers.stages, workers.engines.vllm, "
        "workers.engines.reference, registry.formats, registry.repos\n"
        "loaded = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
        "assert not loaded, loaded[:5]"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=process_env(drop=("DJANGO_SETTINGS_MODULE",)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
