"""The certificates' pages: revoking one from its pair's page (staff) or the owner's private result."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from registry.certificates.revocation import AlreadyRevoked, RevocationNotQueued, certificate_revoke_request
from registry.certificates.selectors import visible_certificates
from registry.params import BadParameter


@login_required
@require_POST
def certificate_revoke_page(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke with the reason the form gives, then show the pair's page, which now says so."""
    certificate = visible_certificates(request.user).filter(pk=pk).first()
    if certificate is None:
        raise Http404("No such certificate.")
    reason = str(request.POST.get("reason", ""))[:5000]
    try:
        revoked = certificate_revoke_request(certificate_id=pk, user=request.user, reason=reason)
    except ValidationError as refused:  # the 400 page shows a parameter's reason, as the API's error names the field
        raise BadParameter("reason", " ".join(refused.messages)) from None
    except AlreadyRevoked as refused:
        raise BadRequest(str(refused)) from None
    except RevocationNotQueued as down:
        return HttpResponse(str(down), status=503, content_type="text/plain; charset=utf-8")
    if revoked is None:  # a signing worker logs it: the pair's page says it is queued until then
        return redirect(f"{reverse('pair', args=[certificate.pair_id])}?revocation=queued")
    return redirect("pair", pk=certificate.pair_id)
