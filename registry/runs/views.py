"""The runs' pages: the queue, a run, submitting a draft, and the engine builds' qualifications."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_http_methods

from kernel.errors import ERRORS, RunError
from registry.accounts.selectors import submission_quota
from registry.models import CertificationRun
from registry.runs.engines import engines_page
from registry.runs.forms import SubmissionForm
from registry.runs.selectors import own_machines_wait, run_figures, runs_queue
from registry.runs.submissions import SubmissionQuotaExceeded, submission_create
from registry.views import PAGE_SIZE, page_number


@require_GET
def engines(request: HttpRequest) -> HttpResponse:
    return render(request, "registry/engines.html", {"builds": engines_page()})


@require_GET
def queue(request: HttpRequest) -> HttpResponse:
    """Runs still going first, then the most recent ones, with state, stage and progress."""
    page = Paginator(runs_queue(user=request.user), PAGE_SIZE).get_page(page_number(request))
    going = any(not run.is_final for run in page.object_list)
    return render(request, "registry/queue.html", {"page": page, "going": going})


@require_GET
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    runs = CertificationRun.objects.visible_to(request.user)  # another user's private run is a 404, not a 403
    run = get_object_or_404(runs.select_related("pair__verifier", "pair__draft", "worker__owner", "workload__owner"), pk=pk)
    error = ERRORS.get(run.error_code)
    context = {"run": run, "hint": error.hint if error else "", "own_wait": own_machines_wait(run=run), **run_figures(run)}
    return render(request, "registry/run.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def submit(request: HttpRequest) -> HttpResponse:
    """Submit a draft: the gate's verdict shows at once, then the pair is queued (or found)."""
    form = SubmissionForm(request.POST or None)
    quota = submission_quota(user=request.user)
    context: dict[str, object] = {"form": form, "quota": quota}
    if request.method == "POST" and form.is_valid():
        try:
            if int(quota["used"]) >= int(quota["limit"]):  # the fast path; the service checks again as it stores
                raise SubmissionQuotaExceeded(int(quota["used"]), int(quota["limit"]), str(quota["period"]))
            context["submission"] = submission_create(user=request.user, **form.cleaned_data)
        except (RunError, SubmissionQuotaExceeded) as exc:
            context["error"] = exc.message
        except ValidationError as exc:  # a rule of the catalog's (method, draft, hardware): the user's to fix
            context["error"] = " ".join(exc.messages)
        context["quota"] = submission_quota(user=request.user)
    return render(request, "registry/submit.html", context)
