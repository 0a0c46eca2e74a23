"""Your workers page: registration tokens (shown once), your self-hosted workers, revoking one, and their audit log.

Another user's worker is a 404. Staff approve a worker for the public listing in the admin.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods, require_POST

from registry.celery import hardware_queues
from registry.fleet import selectors, services


@login_required
@require_http_methods(["GET", "POST"])
def workers(request: HttpRequest) -> HttpResponse:
    """Your workers and their log; POST makes a registration token and shows it, with the command, this once."""
    error, issued = "", None
    if request.method == "POST":
        try:
            token, secret = services.registration_token_create(owner=request.user, labels=request.POST.getlist("labels"),
                                                               ephemeral=request.POST.get("ephemeral") == "on")  # fmt: skip
            issued = {"secret": secret, "labels": token.labels, "ephemeral": token.ephemeral, "expires_at": token.expires_at}
        except services.FleetRefused as refused:
            error = str(refused)
    context = {
        "rows": list(selectors.workers_of(user=request.user)[:100]),
        "events": list(selectors.audit_of(user=request.user)[:50]),
        "labels": hardware_queues(),
        "issued": issued,
        "registry": request.build_absolute_uri("/").rstrip("/"),
        "error": error,
    }
    response = render(request, "registry/workers.html", context, status=422 if error else 200)
    if issued:  # the page shows a secret: no cache may keep it
        add_never_cache_headers(response)
    return response


@login_required
@require_POST
def worker_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    worker = selectors.worker_of(user=request.user, pk=pk)
    if worker is None:
        raise Http404("No such worker of yours.")
    services.worker_revoke(worker=worker, why=f"revoked by {request.user} on the workers page")
    return redirect("workers")
