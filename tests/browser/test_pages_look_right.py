"""The pages as a person sees them: screenshots at desktop and phone widths, axe-core, layout and copy buttons.

The screenshots are kept in var/screenshots/ (git-ignored) for a person to look at; the path is printed.
axe-core comes from npm, pinned, installed by scripts/bootstrap_browser.sh.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from registry.fleet.services import registration_token_create, worker_register
from registry.models import CertificationRun, Deployment, Pair, Submission, SubmissionSource, SubmissionStatus
from registry.runs.demo import demo_catalog_load
from registry.runs.qualifications import qualification_record
from registry.runs.services import run_claim, run_create, run_finish
from registry.states import RunState
from tests.browser.conftest import watch_csp
from tests.registry.test_catalog_filters import finish
from tests.registry.test_pair_and_run_pages import CPU_ENVIRONMENT, STARTS, choice_of_k, schedule_of
from tests.registry.test_pair_and_run_pages import serving_document as pair_page_document
from tests.support.factories import RunFactory
from tests.support.processes import ROOT
from tests.support.qualification import record
from tests.support.runs import result_document as minimal_document
from workers import metrics, modes
from workers.engines.base import SpecCounters

pytestmark = pytest.mark.django_db(transaction=True)

SCREENSHOTS = ROOT / "var" / "screenshots"
AXE = ROOT / "var" / "browser" / "node_modules" / "axe-core" / "axe.min.js"
WIDTHS = {"desktop": 1400, "phone": 390}
BLOCKING_IMPACTS = {"serious", "critical"}
PASSWORD = "correct horse battery"

# Per-workload figures for the certified pair: (mean acceptance length, acceptance rate, greedy exact match, speedup at c=1).
WORKLOADS: dict[str, tuple[float, float, float, float | None]] = {
    "chat": (3.4, 0.6, 1.0, 1.45),
    "code": (4.1, 0.7, 1.0, 1.62),
    "math": (3.1, 0.5, 0.75, 1.2),
    "summarization": (2.2, 0.35, 1.0, 0.95),
    "translation": (2.6, 0.42, 1.0, None),
}

AXE_RUN = """async () => {
  const report = await axe.run(document, {resultTypes: ["violations"]});
  return report.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 4).map((n) => n.target.join(" ")),
  }));
}"""

OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const wide = [...document.querySelectorAll("body *")]
    .filter((node) => node.closest(".table-scroll, pre.manifest") === null)
    .filter((node) => node.getBoundingClientRect().right > width + 1)
    .map((node) => node.tagName.toLowerCase() + (node.id ? "#" + node.id : "") + (node.className ? "." + node.className : ""));
  return {scrollWidth: document.documentElement.scrollWidth, width, wide: wide.slice(0, 6)};
}"""

# What the page's copy event carried: the selection, or the selected part of a focused textarea.
COPY_LISTENER = """() => {
  window.copied = [];
  document.addEventListener("copy", () => {
    const field = document.activeElement;
    const inField = field && field.tagName === "TEXTAREA";
    window.copied.push(inField ? field.value.slice(field.selectionStart, field.selectionEnd) : String(getSelection()));
  });
}"""

COMMANDS_FIT = """() => [...document.querySelectorAll(".command pre")].map((pre) => ({
  id: pre.id || pre.querySelector("code").id,
  right: pre.getBoundingClientRect().right,
  overflows: pre.scrollWidth > pre.clientWidth + 1,
}))"""


@pytest.fixture
def site(live_server: Any, settings: Any, tmp_path: Path) -> dict[str, str]:
    """Return the pages to look at, by name, over a catalog with certified, failed and running pairs."""
    settings.CELERY_TASK_ALWAYS_EAGER = False  # no worker: runs are driven by hand
    settings.SPECHUB_SIGNING_KEY_FILE = tmp_path / "signing-key"
    settings.SPECHUB_LIVE_SNAPSHOTS_PER_MINUTE = 1000  # a day of the deployment's snapshots arrives within one minute here
    pairs = {
        p.draft.repo_id.split("/")[1] if p.draft else p.method: p for p in demo_catalog_load(zoo_dir=ROOT / "zoo" / "models")
    }
    measured = pairs.pop("eagle3-head")
    qualification_record(document=record(draft_model="fail", eagle3="fail", **{"self-draft": "fail"}))
    finish(pairs["llama-draft-1l"], "certified", 1.31, 4.6)
    finish(pairs["ngram"], "failed", 0.9, 1.8)
    finished = run_finish_measured(measured)
    failed = RunFactory.create(
        pair=pairs["llama-draft-1l"],
        state=RunState.FAILED_USER,
        error_code="gate:incompatible",
        error_message="gate:mapping-t2d: the draft's vocabulary mapping does not fit the verifier's tokenizer",
    )
    RunFactory.create(pair=measured, state=RunState.MEASURING, stage="speculative", progress=57, attempts=1)
    alice = User.objects.create_user("alice", password=PASSWORD)
    imported_refusal()
    deployment = watched_deployment(alice, pairs["llama-draft-1l"])
    _, token = registration_token_create(owner=alice, labels=["gpu.h100"])
    worker_register(secret=token, name="team-h100-1", engine_build="0.32.0", evidence={"devices": [{"name": "NVIDIA H100"}]})
    return {
        "catalog": "/",
        "pair": f"/pairs/{measured.pk}/",
        "run": f"/runs/{failed.pk}/",
        "finished-run": f"/runs/{finished.pk}/",
        "runs": "/runs/",
        "matrix": "/matrix/",
        "engines": "/engines/",
        "formats": "/formats/",
        "judge": "/judge/",
        "imports": "/imports/",
        "submit": "/submit/",  # signs alice in: the pages below are hers
        "deployments": "/deployments/",
        "deployment": f"/deployments/{deployment.pk}/",
        "workers": "/workers/",
    }


def watched_deployment(owner: User, pair: Pair) -> Deployment:
    """Alice's deployment of the certified pair, watched for a day: within its band, then below it for the last hours."""
    from kernel import live
    from registry.deployments.services import deployment_create, observations_ingest

    deployment, _ = deployment_create(owner=owner, name="prod-eu-1", pair=pair)
    start, steps, requests, positions = timezone.now().timestamp() - 86400, 0, 0, [0, 0, 0, 0]
    snapshots = []
    for index in range(1, 145):  # every 10 minutes, 400 drafting steps over 16 requests each
        rates = (0.98, 0.92, 0.88, 0.82) if index < 110 else (0.8, 0.5, 0.35, 0.25)  # AL 4.6, then 2.9
        steps, requests = steps + 400, requests + 16
        positions = [n + round(400 * rate) for n, rate in zip(positions, rates, strict=True)]
        snapshots.append(live.Snapshot(start + 600 * index, steps, 4 * steps, sum(positions), tuple(positions), requests,
                                       1000.0, None, 4))  # fmt: skip
    for first in range(0, len(snapshots), 48):
        observations_ingest(deployment=deployment, snapshots=snapshots[first : first + 48])
    return deployment


def imported_refusal() -> Submission:
    """A draft the Hub import found and the gate refused, with its findings."""
    findings = [{"code": "gate:safety-no-safetensors", "severity": "error",
                 "message": "The draft repo has no safetensors weights (only ['pytorch_model.bin'])."}]  # fmt: skip
    return Submission.objects.create(
        source=SubmissionSource.HUB_IMPORT, repo_id="spechub-toy/broken-pickle-only", revision="d" * 40,
        status=SubmissionStatus.REFUSED, refusal_code="gate:safety-no-safetensors",
        refusal_message=findings[0]["message"], validation_report={"findings": findings},
    )  # fmt: skip


def run_finish_measured(pair: Pair) -> CertificationRun:
    """Finish a run of `pair` through the services with a full result document: levels, intervals and workloads."""
    run = run_create(pair=pair, hardware="cpu")
    spec = run_claim(run_id=run.pk, worker="test")
    assert spec is not None
    document = minimal_document(spec, verdict="certified", speedup=1.4, al=3.2, version="0.32.0")
    document["stages"].update(measured_stages())
    document["schema_version"] = 3  # the stages are a serving-mode (version 3) run's
    document["stages"]["verdict"].update(verdict="certified", reasons=[])
    document["environment"].update(dtype="float32", threads=8, engine_build="0.32.0")  # judged with its qualification
    document["stages"]["smoke"] = {"seconds": 41.4, "features": [
        {"feature": "prefix caching on", "outcome": "equal", "detail": "4 requests, greedy output equal"},
        {"feature": "n = 4 samples in one request", "outcome": "runs", "detail": "sampled, so not compared token by token"},
        {"feature": "fp8 KV cache", "outcome": "not-supported", "detail": "not supported on this build: the verifier alone "
         "will not start with it either", "error": "ValueError: fp8 KV cache is not supported on this platform"},
    ]}  # fmt: skip
    document["workloads"] = {category: workload(*figures) for category, figures in WORKLOADS.items()}
    finished = run_finish(run_id=run.pk, attempt=spec.attempt, document=document)
    CertificationRun.objects.filter(pk=finished.pk).update(finished_at=timezone.now())
    return finished


def measured_stages() -> dict[str, Any]:
    """Return the stages of the pair page's test document: acceptance per position, five levels with intervals."""
    document = pair_page_document()
    document["stages"]["throughput"]["choice_of_k"] = choice_of_k(document)  # best k = 2 at c = 1, measured
    stages: dict[str, Any] = document["stages"]
    # Acceptance by prompt length as the toy suite spreads it: falling as the context grows, one bucket too short
    # for an interval.
    prompts = [SpecCounters(10, 40, 24, (8, 7, 5, 4))] * 28 + [SpecCounters(10, 40, 9, (5, 2, 1, 1))] * 3
    acceptance = stages["speculative"]["acceptance"]
    acceptance["by_length"] = metrics.by_length([20] * 28 + [99, 197, 421], prompts, metrics.length_buckets(512, 32))
    sampled = [SpecCounters(12, 48, 14, (8, 4, 2, 0))] * 31  # acceptance by temperature: lower when sampled
    acceptance["by_temperature"] = metrics.by_temperature({0.0: (sum(prompts, SpecCounters()), prompts),
                                                           0.7: (sum(sampled, SpecCounters()), sampled)})  # fmt: skip
    off = [SpecCounters(9, 36, 26, (8, 8, 6, 4))] * 31  # the thinking switch off, the same prompts (issue 53)
    acceptance["mode"] = {"rendered": "as written", "chat_template_kwargs": {}}
    acceptance["by_mode"] = modes.by_mode("enable_thinking", "each prompt as the user's one message",
                                          {"thinking on": (sum(prompts, SpecCounters()), prompts),
                                           "thinking off": (sum(off, SpecCounters()), off)})  # fmt: skip
    stages["throughput"]["choice_of_k"]["schedule"] = schedule_of(True)  # the batch-size schedule, served
    stages["throughput"]["servers"]["environment"] = dict(CPU_ENVIRONMENT)  # a CPU run's servers (issue 62)
    stages["throughput"]["counters"]["against"] = "requests"  # the servers gave the figures (issue 62 §1)
    stages["verdict"]["starts"] = [dict(start) for start in STARTS]
    return stages


def workload(al: float, rate: float, exact: float, speedup: float | None) -> dict[str, Any]:
    return {
        "acceptance": {"mean_acceptance_length": al, "acceptance_rate": rate},
        "equivalence": {"greedy_exact_match": exact},
        "throughput": {"speedup": speedup},
    }


@pytest.fixture(scope="module")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {SCREENSHOTS}")
    return SCREENSHOTS


@pytest.fixture
def sized(browser: Any, request: pytest.FixtureRequest, csp_errors: list[str]) -> Iterator[Any]:
    """Return a page at the width named by the test's parameter."""
    context = browser.new_context(viewport={"width": WIDTHS[request.param], "height": 900}, device_scale_factor=1)
    watch_csp(context, csp_errors)
    yield context.new_page()
    context.close()
    assert not csp_errors, csp_errors  # as tests/browser/conftest.py's `page`


def sign_in(page: Any, base: str) -> None:
    page.goto(f"{base}/accounts/login/?next=/submit/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{base}/submit/")


def look_at(page: Any, name: str, width: str, screenshots: Path) -> list[str]:
    """Screenshot the open page; return what a person would object to on it."""
    page.screenshot(path=str(screenshots / f"{width}-{name}.png"), full_page=True)
    problems = [f"{name}: axe {v['impact']} {v['id']} ({v['help']}) at {v['nodes']}" for v in axe_violations(page)]
    layout = page.evaluate(OVERFLOW)
    if layout["scrollWidth"] > layout["width"] or layout["wide"]:
        problems.append(f"{name}: the page scrolls sideways ({layout['scrollWidth']} > {layout['width']} px): {layout['wide']}")
    for command in page.evaluate(COMMANDS_FIT):
        if command["overflows"] or command["right"] > layout["width"]:
            problems.append(f"{name}: the command box {command['id']} runs off the page")
    return problems


def axe_violations(page: Any) -> list[dict[str, Any]]:
    if not AXE.exists():
        pytest.fail(f"axe-core is not installed at {AXE}: run scripts/bootstrap_browser.sh")
    # Evaluated, not added as a <script> tag: the Content-Security-Policy would block that inline script.
    page.evaluate(AXE.read_text())
    violations: list[dict[str, Any]] = page.evaluate(AXE_RUN)
    return [v for v in violations if v["impact"] in BLOCKING_IMPACTS]


@pytest.mark.parametrize("sized", list(WIDTHS), indirect=True)
def test_every_page_reads_well_and_passes_axe_at_desktop_and_phone_width(
    sized: Any, site: dict[str, str], live_server: Any, screenshots: Path, request: pytest.FixtureRequest, csp_errors: list[str]
) -> None:
    width = request.node.callspec.params["sized"]
    problems: list[str] = []
    for name, path in site.items():
        if name == "submit":
            sign_in(sized, live_server.url)
        sized.goto(f"{live_server.url}{path}")
        problems += look_at(sized, name, width, screenshots)
    problems += csp_errors
    assert not problems, json.dumps(problems, indent=2)


@pytest.mark.parametrize("sized", ["phone"], indirect=True)
def test_the_pair_page_draws_every_chart_with_its_axes(
    sized: Any, site: dict[str, str], live_server: Any, csp_errors: list[str]
) -> None:
    sized.goto(f"{live_server.url}{site['pair']}")
    assert not csp_errors, csp_errors  # the charts are drawn under the Content-Security-Policy
    for chart in ("acceptance", "speedup", "speedup-by-k", "workload-acceptance", "workload-speedup"):
        box = sized.locator(f"svg.chart[data-chart={chart}]").first.bounding_box()
        assert box and box["width"] > 300 and box["height"] > 100, chart
    assert sized.locator("svg[data-chart=acceptance] .y-tick").all_text_contents() == ["0", "0.25", "0.5", "0.75", "1"]
    assert sized.locator("svg[data-chart=speedup] .tick-label").all_text_contents() == ["1", "2", "4", "8", "16"]
    assert sized.locator("svg[data-chart=speedup] polygon.band").count() == 1
    assert sized.locator("svg[data-chart=speedup-by-k] rect.hbar").count() == 4  # k = 1 to 4, predicted
    assert sized.locator("svg[data-chart=workload-acceptance] rect.hbar").count() == len(WORKLOADS)
    assert sized.locator("svg[data-chart=workload-speedup] rect.hbar").count() == len(WORKLOADS) - 1  # one not measured


@pytest.mark.parametrize("sized", ["desktop"], indirect=True)
def test_copy_puts_the_whole_serve_command_on_the_clipboard(sized: Any, site: dict[str, str], live_server: Any) -> None:
    sized.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    sized.goto(f"{live_server.url}{site['pair']}")
    from playwright.sync_api import expect

    button = sized.locator("button.copy[data-target=recipe]")
    button.click()
    expect(button).to_have_text("Copied")
    command = sized.locator("#recipe").inner_text().strip()
    assert "vllm serve" in command and sized.evaluate("navigator.clipboard.readText()") == command


@pytest.mark.parametrize("sized", ["phone"], indirect=True)
def test_copy_still_works_where_the_clipboard_api_is_missing(sized: Any, site: dict[str, str], live_server: Any) -> None:
    # Plain http on a LAN is not a secure context, so navigator.clipboard is absent there.
    sized.add_init_script("Object.defineProperty(Navigator.prototype, 'clipboard', {get: () => undefined})")
    sized.goto(f"{live_server.url}{site['pair']}")
    sized.evaluate(COPY_LISTENER)
    from playwright.sync_api import expect

    button = sized.locator("button.copy[data-target=recipe]")
    button.click()
    expect(button).to_have_text("Copied")
    assert sized.evaluate("window.copied") == [sized.locator("#recipe").inner_text().strip()]


def test_the_api_docs_and_the_admin_work_under_the_content_security_policy(
    page: Any, live_server: Any, csp_errors: list[str]
) -> None:
    from django_celery_beat.models import CrontabSchedule
    from playwright.sync_api import expect

    page.goto(f"{live_server.url}/api/docs/")  # the init script comes from /api/docs/?script=, not inline
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
    assert page.locator(".swagger-ui .opblock").count() > 10
    User.objects.create_user("root", password=PASSWORD, is_staff=True, is_superuser=True)
    nightly = CrontabSchedule.objects.create(minute="0", hour="3")
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("input[name=username]", "root")
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    # django-celery-beat's form, whose inline script templates/admin/djcelery/ moves to a static file.
    page.goto(f"{live_server.url}/admin/django_celery_beat/periodictask/add/")
    expect(page.locator(".field-crontab_translation")).to_be_hidden()
    page.select_option("#id_crontab", value=str(nightly.pk))
    expect(page.locator(".field-crontab .help")).to_contain_text(f"Translation: {nightly.human_readable}")
    assert not csp_errors, csp_errors
