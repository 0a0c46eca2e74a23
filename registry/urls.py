from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from registry import views
from registry.accounts import views as accounts_views
from registry.accounts.logins import AdminSignInForm
from registry.catalog import views as catalog_views
from registry.certificates import views as certificate_views
from registry.deployments import views as deployment_views
from registry.fleet import views as fleet_views
from registry.prometheus import metrics
from registry.runs import views as runs_views
from registry.traffic import views as traffic_views

admin.site.login_form = AdminSignInForm
handler400 = "registry.views.bad_request"

urlpatterns = [
    path("", catalog_views.catalog, name="catalog"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", metrics, name="metrics"),
    path("pairs/<int:pk>/", catalog_views.pair_detail, name="pair"),
    path("certificates/<int:pk>/revoke/", certificate_views.certificate_revoke_page, name="certificate-revoke"),
    path("runs/", runs_views.queue, name="queue"),
    path("runs/<int:pk>/", runs_views.run_detail, name="run"),
    path("submit/", runs_views.submit, name="submit"),
    path("matrix/", catalog_views.matrix, name="matrix"),
    path("formats/", catalog_views.formats, name="formats"),
    path("judge/", deployment_views.judge, name="judge"),
    path("engines/", runs_views.engines, name="engines"),
    path("imports/", catalog_views.imports, name="imports"),
    path("workloads/", traffic_views.workloads, name="workloads"),
    path("workloads/<int:pk>/", traffic_views.workload_detail, name="workload"),
    path("workloads/<int:pk>/delete/", traffic_views.workload_remove, name="workload-delete"),
    path("workloads/<int:pk>/export.jsonl", traffic_views.workload_export, name="workload-export"),
    path("workers/", fleet_views.workers, name="workers"),
    path("workers/<int:pk>/revoke/", fleet_views.worker_revoke, name="worker-revoke"),
    path("deployments/", deployment_views.deployments, name="deployments"),
    path("deployments/<int:pk>/", deployment_views.deployment_detail, name="deployment"),
    path("deployments/<int:pk>/token/", deployment_views.deployment_token, name="deployment-token"),
    path("deployments/<int:pk>/revoke/", deployment_views.deployment_revoke, name="deployment-revoke"),
    path("deployments/<int:pk>/reset/", deployment_views.deployment_ingest_reset, name="deployment-ingest-reset"),
    path("deployments/<int:pk>/recertify/", deployment_views.deployment_recertify, name="deployment-recertify"),
    path("deployments/<int:pk>/delete/", deployment_views.deployment_remove, name="deployment-delete"),
    path("accounts/login/", accounts_views.sign_in, name="login"),
    path("accounts/password_reset/", accounts_views.password_reset, name="password_reset"),
    path("accounts/password_change/", accounts_views.password_change, name="password_change"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", include("registry.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its init script from this URL (?script) rather than inline, for the CSP (registry/csp.py).
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="registry/api_docs.html"),
        name="api-docs",
    ),
]
