"""Staff-only admin. Runs are read-only here: their state changes through services."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from registry.certificates.revocation import AlreadyRevoked, RevocationNotQueued, certificate_revoke_request
from registry.fleet.services import worker_public_approve
from registry.models import (
    Certificate,
    CertificationRun,
    EngineBuild,
    HubModel,
    LogEntry,
    Pair,
    Regression,
    Submission,
    WebhookDelivery,
    WebhookEndpoint,
    Worker,
    WorkloadResult,
)


@admin.register(HubModel)
class HubModelAdmin(admin.ModelAdmin[HubModel]):
    list_display = ["repo_id", "sha", "role", "architecture", "family"]
    list_filter = ["role", "family"]
    search_fields = ["repo_id", "sha"]


@admin.register(Pair)
class PairAdmin(admin.ModelAdmin[Pair]):
    list_display = ["id", "draft", "verifier", "method", "num_speculative_tokens", "created_at"]
    list_filter = ["method"]
    search_fields = ["draft__repo_id", "verifier__repo_id"]
    # What the gate judged and what the latest certification measured are written by services only.
    readonly_fields = [
        "identity", "compatibility", "format_metadata", "latest_run", "verdict", "speedup", "mean_acceptance_length",
        "hardware", "engine_version", "regressed",
    ]  # fmt: skip


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin[Submission]):
    list_display = ["repo_id", "revision", "status", "submitted_by", "created_at"]
    list_filter = ["status"]
    search_fields = ["repo_id"]


class WorkloadResultInline(admin.TabularInline[WorkloadResult, CertificationRun]):
    model = WorkloadResult
    extra = 0
    can_delete = False


@admin.register(CertificationRun)
class CertificationRunAdmin(admin.ModelAdmin[CertificationRun]):
    list_display = ["id", "pair", "state", "stage", "progress", "attempts", "hardware", "heartbeat_at"]
    list_filter = ["state", "hardware", "engine"]
    inlines = [WorkloadResultInline]

    def get_readonly_fields(self, request: object, obj: CertificationRun | None = None) -> list[str]:
        return [field.name for field in CertificationRun._meta.fields]


@admin.register(Certificate)
class CertificateAdmin(admin.ModelAdmin[Certificate]):
    list_display = ["pair", "verdict", "issued_at", "expires_at", "revoked_at"]
    list_filter = ["verdict"]
    actions = ["revoke"]

    def has_delete_permission(self, request: HttpRequest, obj: Certificate | None = None) -> bool:
        return False  # a logged certificate is revoked, never deleted

    @admin.action(description="Revoke the selected certificates, with a reason")
    def revoke(self, request: HttpRequest, queryset: QuerySet[Certificate]) -> HttpResponse | None:
        reason = str(request.POST.get("reason", "")).strip()
        if not reason:  # first ask for the reason, on a page of its own
            context = {**self.admin_site.each_context(request), "certificates": queryset, "opts": self.model._meta}
            return TemplateResponse(request, "admin/registry/certificate/revoke.html", context)
        for certificate in queryset:
            try:
                revoked = certificate_revoke_request(certificate_id=certificate.pk, user=request.user, reason=reason)
            except (ValidationError, AlreadyRevoked, RevocationNotQueued) as refused:
                self.message_user(request, f"{certificate}: {refused}", messages.WARNING)
                continue
            if revoked is None:  # this process holds no signing key: a worker that does logs it
                self.message_user(request, f"{certificate}: revocation queued; a signing worker logs it shortly.")
        return None

    def get_readonly_fields(self, request: object, obj: Certificate | None = None) -> list[str]:
        # Signed content: an edit here would make the stored columns disagree with the signed file.
        return [field.name for field in Certificate._meta.fields]


@admin.register(LogEntry)
class LogEntryAdmin(admin.ModelAdmin[LogEntry]):
    """The transparency log, to read: entries are appended by services and never changed or deleted."""

    list_display = ["index", "kind", "certificate", "entry_sha256", "logged_at"]
    list_filter = ["kind"]
    search_fields = ["entry_sha256"]
    readonly_fields = ["index", "kind", "certificate", "entry_sha256", "leaf", "root", "logged_at", "logged"]
    fields = tuple(readonly_fields)

    @admin.display(description="leaf hash")
    def leaf(self, entry: LogEntry) -> str:
        return bytes(entry.leaf_hash).hex()

    @admin.display(description="root after this entry")
    def root(self, entry: LogEntry) -> str:
        return bytes(entry.root_hash).hex()

    @admin.display(description="entry as logged")
    def logged(self, entry: LogEntry) -> str:
        return bytes(entry.entry).decode("utf-8", errors="replace")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: LogEntry | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: LogEntry | None = None) -> bool:
        return False


@admin.register(Regression)
class RegressionAdmin(admin.ModelAdmin[Regression]):
    list_display = ["pair", "run", "metric", "previous", "current", "relative_change", "detected_at"]
    list_filter = ["metric"]

    def get_readonly_fields(self, request: object, obj: Regression | None = None) -> list[str]:
        return [field.name for field in Regression._meta.fields]


@admin.register(EngineBuild)
class EngineBuildAdmin(admin.ModelAdmin[EngineBuild]):
    list_display = ["hardware", "engine", "version", "first_seen_at", "last_seen_at", "reported_by"]
    list_filter = ["hardware", "engine"]


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin[WebhookEndpoint]):
    list_display = ["id", "owner", "url", "events", "active", "created_at"]
    list_filter = ["active"]
    exclude = ["secret"]  # shown to its owner once, when created


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin[WebhookDelivery]):
    list_display = ["id", "endpoint", "event", "state", "attempts", "last_status", "next_attempt_at", "delivered_at"]
    list_filter = ["state", "event"]

    def get_readonly_fields(self, request: object, obj: WebhookDelivery | None = None) -> list[str]:
        return [field.name for field in WebhookDelivery._meta.fields]


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin[Worker]):
    """Staff approve a self-hosted worker for the public listing here (public_approved); the rest is the worker's."""

    list_display = ["id", "name", "owner", "labels", "engine_build", "public_approved", "last_seen_at", "revoked_at"]
    list_filter = ["public_approved"]
    search_fields = ["name", "owner__username"]
    fields = ["public_approved"]  # a credential, its labels and its build change only through registry/fleet/services.py

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a worker registers with a token (registry/fleet)

    def has_delete_permission(self, request: HttpRequest, obj: Worker | None = None) -> bool:
        return False  # revoked, never deleted: its runs name it as where they were measured

    def save_model(self, request: HttpRequest, obj: Worker, form: Any, change: bool) -> None:
        worker_public_approve(worker=Worker.objects.get(pk=obj.pk), approved=obj.public_approved, by=request.user)
