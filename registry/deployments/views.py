"""The pages of deployments: yours, with the form to register one, and one deployment's live acceptance.

Another user's deployment is a 404 on every page. The ingest token is shown once, on the page that issued it.
"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import TypedDict

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from rest_framework.throttling import ScopedRateThrottle

from kernel import live
from kernel.spec import Plan
from registry import charts
from registry.accounts.selectors import submission_quota
from registry.deployments import judging, selectors, services
from registry.models import CertificationRun, Deployment, Pair, Workload
from registry.params import whole_number, whole_number_or_none
from registry.states import RunState

DAYS = (1, 7, 30, 365)
TEMPERATURES = ("0", *(f"{t:g}" for t in Plan().acceptance_temperatures))  # the form's choices: what a run measures


@login_required
@require_http_methods(["GET", "POST"])
def deployments(request: HttpRequest) -> HttpResponse:
    """Your deployments, and the form to register one; registering shows the new ingest token once."""
    error = ""
    if request.method == "POST":
        try:
            deployment, token = services.deployment_create(
                owner=request.user, name=request.POST.get("name", ""), pair=_pair(request.POST.get("pair")),
                workload=_workload(request, request.POST.get("workload")),
                temperature=_temperature(request.POST.get("temperature")),
            )  # fmt: skip
            return _detail(request, deployment, token)
        except ValidationError as refused:
            error = " ".join(refused.messages)
    context = {
        "rows": list(selectors.deployments_of(user=request.user)[:100]),
        "pairs": _certified_pairs()[:200],
        "workloads": Workload.objects.filter(owner_id=request.user.pk, deleted_at__isnull=True)[:100],
        "temperatures": TEMPERATURES,
        "error": error,
    }
    return render(request, "registry/deployments.html", context, status=422 if error else 200)


def _temperature(given: str | None) -> float:
    if given is None or given == "":
        return 0.0
    if given not in TEMPERATURES:
        raise ValidationError(f"Choose a temperature from the list ({', '.join(TEMPERATURES)}).")
    return float(given)


def _pair(given: str | None) -> Pair:
    pk = whole_number_or_none(given, low=1)
    found = _certified_pairs().filter(pk=pk).first() if pk is not None else None
    if found is None:
        raise ValidationError("Choose a certified pair from the list.")
    return found


def _certified_pairs() -> QuerySet[Pair]:
    """Pairs with a finished run on the public suite: a private workload's run alone holds no deployment."""
    finished = Pair.objects.filter(runs__state=RunState.FINISHED, runs__workload__isnull=True)
    return finished.select_related("draft", "verifier").distinct()


def _workload(request: HttpRequest, given: str | None) -> Workload | None:
    if not given:
        return None
    pk = whole_number_or_none(given, low=1)
    found = Workload.objects.filter(pk=pk, owner_id=request.user.pk, deleted_at__isnull=True).first() if pk else None
    if found is None:
        raise ValidationError("Choose one of your workloads, or none.")
    return found


@login_required
@require_GET
def deployment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _detail(request, selectors.deployment_for(user=request.user, pk=pk), None)


def _detail(request: HttpRequest, deployment: Deployment, token: str | None, refused: str = "") -> HttpResponse:
    days = whole_number(request.GET.get("days"), name="days", high=366, default=7)
    certified = selectors.certified_for(deployment=deployment)
    no_band = certified is not None and certified.band is None
    points = selectors.timeline(deployment=deployment, certified=certified, since=timezone.now() - timedelta(days=days))
    context = {
        "deployment": deployment,
        "certified": certified,
        "points": points,
        "recent": list(reversed(points[-20:])),
        "positions": selectors.positions_now(deployment=deployment, certified=certified),
        "chart": charts.live_acceptance(points, certified.band if certified else None),
        "days": days,
        "day_choices": DAYS,
        "new_token": token,
        "endpoint": request.build_absolute_uri("/").rstrip("/"),
        "min_drafts": live.MIN_DRAFTS,
        "min_requests": live.MIN_REQUESTS,
        "family_windows": live.FAMILY_WINDOWS,
        "recertify": _recertify_context(request, deployment) if no_band else None,
        "recertify_refused": refused,
    }
    response = render(request, "registry/deployment.html", context, status=422 if refused else 200)
    if token:  # the page shows the ingest token: no cache may keep it
        add_never_cache_headers(response)
    return response


class _Recertify(TypedDict):
    pending: CertificationRun | None
    hardware: str
    owner: bool
    quota: dict[str, int | str]


def _recertify_context(request: HttpRequest, deployment: Deployment) -> _Recertify:
    """What the no-band notice shows: the run already on its way, else the button and the quota it counts against."""
    held = selectors.certified_run(deployment=deployment)
    return {
        "pending": selectors.recertification_pending(deployment=deployment),
        "hardware": held.hardware if held else "",
        "owner": request.user.pk == deployment.owner_id,
        "quota": submission_quota(user=request.user),
    }


@login_required
@require_POST
def deployment_token(request: HttpRequest, pk: int) -> HttpResponse:
    """A new ingest token (the old one stops working), shown once on the page this answers with."""
    deployment = selectors.deployment_for(user=request.user, pk=pk)
    return _detail(request, deployment, services.deployment_token_issue(deployment=deployment))


@login_required
@require_POST
def deployment_recertify(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue a re-certification of the deployment's pair, its owner's only, so that it gets a band to be held to."""
    deployment = selectors.deployment_owned(user=request.user, pk=pk)
    try:
        services.deployment_recertify(deployment=deployment, user=request.user)
    except ValidationError as refused:
        return _detail(request, deployment, None, " ".join(refused.messages))
    return redirect("deployment", pk=pk)


@login_required
@require_POST
def deployment_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    services.deployment_token_revoke(deployment=selectors.deployment_for(user=request.user, pk=pk))
    return redirect("deployment", pk=pk)


@login_required
@require_POST
def deployment_ingest_reset(request: HttpRequest, pk: int) -> HttpResponse:
    """Drop the snapshots a watcher's clock put in the future, so that correct pushes are taken again."""
    services.deployment_ingest_reset(deployment=selectors.deployment_for(user=request.user, pk=pk))
    return redirect("deployment", pk=pk)


@login_required
@require_POST
def deployment_remove(request: HttpRequest, pk: int) -> HttpResponse:
    services.deployment_delete(deployment=selectors.deployment_for(user=request.user, pk=pk))
    return redirect("deployments")


class JudgeForm(forms.Form):
    file = forms.FileField(help_text="The JSON vllm bench serve --save-result wrote, or a saved /metrics.")
    draft = forms.CharField(max_length=200, required=False, help_text="The draft's Hub repo id (blank for ngram or suffix).")
    verifier = forms.CharField(max_length=200)
    k = forms.IntegerField(min_value=1, max_value=64, required=False, help_text="By default the positions the file counts.")
    temperature = forms.FloatField(min_value=0.0, max_value=2.0, required=False,
                                   help_text="Your run's: vllm bench serve without --temperature samples at the server's "
                                   "default (often 1). Blank: the file's, else 0, assumed and said.")  # fmt: skip
    hardware = forms.CharField(max_length=32, initial="cpu")


class _JudgeThrottle(ScopedRateThrottle):
    """The page's uploads share the API endpoint's rate (the `compatibility` scope): each parses up to 16 MiB."""


_JUDGE_SCOPE = SimpleNamespace(throttle_scope="compatibility")


@require_http_methods(["GET", "POST"])
def judge(request: HttpRequest) -> HttpResponse:
    """Your own `vllm bench serve` run, held to the certified band of its pair; the file is not kept."""
    form = JudgeForm(request.POST, request.FILES) if request.method == "POST" else JudgeForm(initial={"hardware": "cpu"})
    answer: judging.Answer | judging.Refusal | None = None
    if request.method == "POST" and not _JudgeThrottle().allow_request(request, _JUDGE_SCOPE):  # type: ignore[arg-type]
        answer = judging.Refusal(status=429, code="judge:throttled", message="Too many files judged from here in a "
                                 "minute (each may be 16 MiB): wait a minute, or use the API with a token.")  # fmt: skip
    elif request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        question = judging.Question(draft=data["draft"].strip(), verifier=data["verifier"].strip(), k=data["k"],
                                    temperature=data["temperature"], hardware=data["hardware"].strip())  # fmt: skip
        answer = judging.judge_upload(upload=data["file"], question=question)
    status = answer.status if isinstance(answer, judging.Refusal) else (400 if form.errors else 200)
    return render(request, "registry/judge.html", {"form": form, "answer": answer}, status=status)
