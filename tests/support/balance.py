"""Pytest plugin: the parallel tier balanced by each module's measured time, not by its count of tests.

`make pytest` runs the process, engine and browser tests on two workers with `--dist loadscope` (a module's tests
share its engine or server, so a module stays on one worker). xdist hands the modules out in the order it is given,
and by default reorders them by their count of tests: a one-test module that certifies for five minutes went last,
and one worker finished minutes after the other. Here the modules run longest first (the longest-processing-time
rule), from tests/durations.json; `make pytest` passes `--no-loadscope-reorder` so that xdist keeps this order.

`--record-durations FILE` writes each module's seconds (setup, call and teardown of its tests) from a run into FILE,
beside what FILE already holds: `--record-durations tests/durations.json` on each tier refreshes the record.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent.parent / "durations.json"
UNKNOWN_SECONDS = 30.0  # a module the record does not name yet: a real test's order of magnitude, so it runs early


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--record-durations", metavar="FILE", help="write each module's measured seconds to FILE (JSON)")


def recorded(path: Path = DURATIONS) -> dict[str, float]:
    seconds: dict[str, float] = json.loads(path.read_text()) if path.is_file() else {}
    return seconds


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


@pytest.hookimpl(trylast=True)  # after the tiers are marked (tests/conftest.py)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest module first; a module's tests stay together and in their own order."""
    seconds = recorded()
    first_seen = {module: i for i, module in reversed(list(enumerate(module_of(item.nodeid) for item in items)))}
    items.sort(key=lambda item: (-seconds.get(module_of(item.nodeid), UNKNOWN_SECONDS), first_seen[module_of(item.nodeid)]))


class Recorder:
    def __init__(self, path: Path) -> None:
        self.path, self.seconds = path, defaultdict[str, float](float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[module_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self) -> None:  # merged into what the file holds: each tier records its own modules
        merged = {**recorded(self.path), **{module: round(seconds, 1) for module, seconds in self.seconds.items()}}
        self.path.write_text(json.dumps(dict(sorted(merged.items())), indent=1) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--record-durations")
    if path and not hasattr(config, "workerinput"):  # the controller sees every worker's reports
        config.pluginmanager.register(Recorder(Path(path)), "spechub-durations")
