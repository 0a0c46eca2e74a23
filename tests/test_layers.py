"""The house's layers: registry -> kernel <- workers, no import cycles, and a Django-free core."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import ROOT, process_env

PACKAGES = ("registry", "kernel", "workers", "zoo", "bench", "tests", "spechub")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and "models" not in path.relative_to(ROOT).parts[1:2]
    }


def imported(path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """Yield the project modules `path` imports, at any depth in the file (function-level imports count)."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], *filter(None, [base])])
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        yield from (name for name in names if name in modules)


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: set(imported(path, modules)) - {name} for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            if component:
                found.append(sorted([*component, node]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def arrows(graph: dict[str, set[str]], source: str, target: str) -> list[str]:
    top = lambda name: name.split(".")[0]  # noqa: E731
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets if top(a) == source and top(b) == target)


def test_the_reader_sees_imports_at_every_depth():
    graph = import_graph()
    assert "kernel.result" in graph["kernel.director"]
    assert "registry.dispatch" in graph["registry.runs.services"]
    assert "registry.tasks" in graph["registry.apps"]  # a function-level import


def test_no_module_imports_itself_back_through_others():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_registry_and_workers_never_import_each_other_and_the_kernel_imports_neither():
    graph = import_graph()
    assert arrows(graph, "registry", "workers") == []
    assert arrows(graph, "workers", "registry") == []
    assert arrows(graph, "kernel", "registry") == arrows(graph, "kernel", "workers") == []


def test_the_client_side_imports_only_the_kernel():
    graph = import_graph()
    assert arrows(graph, "spechub", "registry") == arrows(graph, "spechub", "workers") == []
    assert arrows(graph, "registry", "spechub") == arrows(graph, "workers", "spechub") == arrows(graph, "kernel", "spechub") == []


@pytest.mark.process
def test_the_kernel_and_the_workers_core_import_no_django():
    code = (
        "import sys, workers.__main__, workers.certification, workers.stages, workers.engines.vllm, "
        "workers.engines.reference, kernel.formats, kernel.repos, kernel.result, kernel.director, kernel.certificates, "
        "spechub.cli, spechub.client\n"
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


def environment_reads(path: Path) -> list[str]:
    """Where `path` touches the process environment: os.environ, os.getenv or os.putenv, however imported."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = {"environ", "getenv", "putenv", "unsetenv"}
    found = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr in names]
    found += [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == "os"
              and names & {alias.name for alias in node.names}]  # fmt: skip
    return [f"{path.relative_to(ROOT)}:{line}" for line in sorted(found)]


def test_the_kernel_and_the_workers_read_the_environment_only_through_kernel_settings():
    modules = project_modules()
    core = [path for name, path in modules.items() if name.split(".")[0] in ("kernel", "workers") and name != "kernel.settings"]
    assert [read for path in core for read in environment_reads(path)] == []
    assert environment_reads(modules["kernel.settings"])  # the reader sees the one module that does


# The toy zoo is for trying and testing SpecHub. Production code may reach into it only to put it in the demo's
# catalog, to build the qualification controls from its models, and to build the bundled suite from its corpus.
PRODUCTION = ("registry", "kernel", "workers", "spechub")
ZOO_USERS = {"registry.runs.demo", "registry.management.commands.demo", "workers.qualification", "workers.suites.build"}


def reaches_into_the_zoo(path: Path, graph: dict[str, set[str]]) -> bool:
    """Whether a module imports the zoo or names its folder (a path built from the string "zoo")."""
    named = any(isinstance(node, ast.Constant) and node.value == "zoo" for node in ast.walk(ast.parse(path.read_text())))
    return named or any(target.split(".")[0] == "zoo" for target in graph[module_name(path)])


def test_only_the_demo_the_qualification_controls_and_the_suite_builder_reach_into_the_zoo():
    graph, modules = import_graph(), project_modules()
    production = {
        name: path for name, path in modules.items() if name.split(".")[0] in ("registry", "kernel", "workers", "spechub")
    }
    users = {name for name, path in production.items() if reaches_into_the_zoo(path, graph)}
    assert users <= ZOO_USERS, sorted(users - ZOO_USERS)
    assert "registry.runs.demo" in users and "workers.qualification" in users  # the rule sees both kinds of reach


MOST_LINES = 400  # a module past this mixes concerns: split it so each file's name says what is in it


def test_no_module_of_the_kernel_the_workers_or_the_registry_is_over_400_lines():
    modules = project_modules()
    core = ("kernel", "workers", "registry")
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules.items() if name.split(".")[0] in core}
    assert {name: lines for name, lines in sizes.items() if lines > MOST_LINES} == {}
    assert max(sizes.values()) > MOST_LINES // 2  # the reader counts real modules


# The registry by domain (issue 43): each domain's folder holds its writes, its reads and, where it has them, its
# pages and its API. A domain without pages (certificates, notifications: read on the run's and the pair's pages, and
# through the API) or without an API (accounts: Django's own sign-in) has no empty module standing in for them.
DOMAINS = {
    "catalog": {"models", "services", "selectors", "api", "views"},
    "runs": {"models", "services", "selectors", "api", "views"},
    "certificates": {"models", "services", "selectors", "api", "views"},
    "accounts": {"services", "selectors", "views"},
    "notifications": {"models", "services", "selectors", "api"},
    "traffic": {"models", "services", "selectors", "api", "views"},
    "deployments": {"models", "services", "selectors", "api", "views"},
    "fleet": {"models", "services", "selectors", "api", "views"},
    "transparency": {"models", "services", "selectors", "api"},
}
LAYERS = {"models", "services", "selectors", "api", "views"}


def test_each_registry_domain_has_a_folder_of_its_own_and_no_layer_folder_holds_a_domain():
    registry = ROOT / "registry"
    found = {domain: {p.stem for p in (registry / domain).glob("*.py")} & LAYERS for domain in DOMAINS}
    assert found == DOMAINS
    assert not (registry / "services").exists() and not (registry / "selectors").exists()
    assert {p.stem for p in (registry / "api").glob("*.py")} == {"__init__", "errors", "pagination", "parsers", "renderers",
                                                                  "serializers", "shapes", "throttles", "urls"}  # fmt: skip


def domain_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "registry" and len(parts) > 2 and parts[1] in DOMAINS else None


def test_a_domain_reaches_another_only_through_its_models_services_and_selectors_never_its_pages_or_api():
    graph = import_graph()
    crossing = sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if (home := domain_of(source)) and (other := domain_of(target)) and home != other
        and target.split(".")[2] in ("views", "api")
    )  # fmt: skip
    assert crossing == []
    reach = [(s, t) for s, ts in graph.items() for t in ts if domain_of(s) and domain_of(t) and domain_of(s) != domain_of(t)]
    assert reach  # the rule sees domains reaching each other (through services and selectors)
