"""The images docker-compose.yml builds: every package the code imports is in them, nothing editable, health checked.

No Docker engine runs here, so the Dockerfile is read, not built.
"""

from __future__ import annotations

import re
import tomllib

from tests.support.processes import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()
STAGES = dict(re.findall(r"^FROM \S+ AS (\S+)\n(.*?)(?=^FROM |\Z)", DOCKERFILE, flags=re.M | re.S))


def test_the_image_copies_every_package_the_project_installs():
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in found}
    copied = set(re.findall(r"^COPY (\w+) \1$", DOCKERFILE, flags=re.M))
    assert packages <= copied, packages - copied
    assert {"templates", "zoo"} <= copied  # pages, and the toy zoo the demo registers


def test_nothing_is_installed_editable_and_every_image_has_a_health_check():
    assert "pip install" in DOCKERFILE and not re.search(r"pip install[^\n]*\s-e\s", DOCKERFILE)
    assert set(STAGES) == {"web", "worker-cpu", "worker-gpu"}
    assert all("HEALTHCHECK" in body for body in STAGES.values())
    assert "/healthz" in STAGES["web"]


def test_the_build_context_leaves_out_virtual_environments_and_local_state():
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", ".venv-hub", "var"} <= ignored


def test_every_image_runs_as_an_unprivileged_user():
    for name, body in STAGES.items():
        users = re.findall(r"^USER (\S+)$", body, flags=re.M)
        assert users and users[-1] == "spechub", (name, users)
