"""The pages of deployments: yours, with the form to register one, and one deployment's live acceptance.

Another user's deployment is a 404 on every page. The ingest token is shown once, on the page that issued it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from kernel import live
from registry import charts
from registry.deployments import selectors, services
from registry.models import Deployment, Pair, Workload
from registry.states import RunState

DAYS = (1, 7, 30, 365)


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
            )  # fmt: skip
            return _detail(request, deployment, token)
        except ValidationError as refused:
            error = " ".join(refused.messages)
    context = {
        "rows": list(selectors.deployments_of(user=request.user)[:100]),
        "pairs": Pair.objects.filter(runs__state=RunState.FINISHED).select_related("draft", "verifier").distinct()[:200],
        "workloads": Workload.objects.filter(owner_id=request.user.pk, deleted_at__isnull=True)[:100],
        "error": error,
    }
    return render(request, "registry/deployments.html", context)


def _pair(given: str | None) -> Pair:
    found = Pair.objects.select_related("verifier").filter(pk=int(given)).first() if given and given.isdigit() else None
    if found is None:
        raise ValidationError("Choose a certified pair from the list.")
    return found


def _workload(request: HttpRequest, given: str | None) -> Workload | None:
    if not given:
        return None
    found = Workload.objects.filter(pk=int(given), owner_id=request.user.pk).first() if given.isdigit() else None
    if found is None:
        raise ValidationError("Choose one of your workloads, or none.")
    return found


@login_required
@require_GET
def deployment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _detail(request, selectors.deployment_for(user=request.user, pk=pk), None)


def _detail(request: HttpRequest, deployment: Deployment, token: str | None) -> HttpResponse:
    days = int(request.GET.get("days", "7")) if request.GET.get("days", "7").isdigit() else 7
    days = days if days in DAYS else 7
    certified = selectors.certified_for(deployment=deployment)
    points = selectors.timeline(deployment=deployment, certified=certified, since=timezone.now() - timedelta(days=days))
    context: dict[str, Any] = {
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
    }
    return render(request, "registry/deployment.html", context)


@login_required
@require_POST
def deployment_token(request: HttpRequest, pk: int) -> HttpResponse:
    """A new ingest token (the old one stops working), shown once on the page this answers with."""
    deployment = selectors.deployment_for(user=request.user, pk=pk)
    return _detail(request, deployment, services.deployment_token_issue(deployment=deployment))


@login_required
@require_POST
def deployment_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    services.deployment_token_revoke(deployment=selectors.deployment_for(user=request.user, pk=pk))
    return redirect("deployment", pk=pk)


@login_required
@require_POST
def deployment_remove(request: HttpRequest, pk: int) -> HttpResponse:
    services.deployment_delete(deployment=selectors.deployment_for(user=request.user, pk=pk))
    return redirect("deployments")
