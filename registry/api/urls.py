from __future__ import annotations

from django.urls import path

from registry.catalog import api as catalog_api
from registry.certificates import api as certificates_api
from registry.deployments import api as deployments_api
from registry.deployments import judge_api
from registry.fleet import api as fleet_api
from registry.notifications import api as notifications_api
from registry.runs import api as runs_api
from registry.traffic import api as traffic_api
from registry.transparency import api as transparency_api

urlpatterns = [
    path("models/", catalog_api.ModelList.as_view(), name="api-models"),
    path("pairs/", catalog_api.PairList.as_view(), name="api-pairs"),
    path("pairs/<int:pk>/", catalog_api.PairDetail.as_view(), name="api-pair"),
    path("pairs/<int:pk>/recertify/", runs_api.PairRecertify.as_view(), name="api-pair-recertify"),
    path("engines/", runs_api.EngineList.as_view(), name="api-engines"),
    path("engines/<str:digest>/", runs_api.EngineDetail.as_view(), name="api-engine"),
    path("runs/", runs_api.RunList.as_view(), name="api-runs"),
    path("runs/<int:pk>/", runs_api.RunDetail.as_view(), name="api-run"),
    path("runs/<int:pk>/cancel/", runs_api.RunCancel.as_view(), name="api-run-cancel"),
    path("submissions/", runs_api.SubmissionCreate.as_view(), name="api-submissions"),
    path("compatibility/", catalog_api.Compatibility.as_view(), name="api-compatibility"),
    path("formats/", catalog_api.FormatMatrixView.as_view(), name="api-formats"),
    path("recommendations/", catalog_api.Recommendations.as_view(), name="api-recommendations"),
    path("export/", catalog_api.Export.as_view(), name="api-export"),
    path("certificates/public-key/", certificates_api.PublicKey.as_view(), name="api-public-key"),
    path("certificates/<int:pk>/", certificates_api.CertificateDetail.as_view(), name="api-certificate"),
    path("certificates/<int:pk>/download/", certificates_api.CertificateDownload.as_view(), name="api-certificate-download"),
    path(
        "certificates/<int:pk>/levels/<int:concurrency>/vllm-bench-serve.json",
        certificates_api.LevelDownload.as_view(),
        name="api-certificate-level",
    ),
    path("judge/", judge_api.Judge.as_view(), name="api-judge"),
    path("certificates/<int:pk>/revoke/", certificates_api.CertificateRevoke.as_view(), name="api-certificate-revoke"),
    path("log/checkpoint", transparency_api.Checkpoint.as_view(), name="api-log-checkpoint"),
    path("log/proof/inclusion", transparency_api.InclusionProof.as_view(), name="api-log-inclusion"),
    path("log/proof/consistency", transparency_api.ConsistencyProof.as_view(), name="api-log-consistency"),
    path("log/entries", transparency_api.Entries.as_view(), name="api-log-entries"),
    path("workloads/", traffic_api.WorkloadList.as_view(), name="api-workloads"),
    path("workloads/<int:pk>/", traffic_api.WorkloadDetail.as_view(), name="api-workload"),
    path("workloads/<int:pk>/runs/", traffic_api.WorkloadCertify.as_view(), name="api-workload-runs"),
    path("workloads/<int:pk>/report/", traffic_api.WorkloadReport.as_view(), name="api-workload-report"),
    path("workloads/<int:pk>/export/", traffic_api.WorkloadExport.as_view(), name="api-workload-export"),
    path("workers/tokens/", fleet_api.Tokens.as_view(), name="api-worker-tokens"),
    path("workers/register/", fleet_api.Register.as_view(), name="api-worker-register"),
    path("workers/me/", fleet_api.Me.as_view(), name="api-worker-me"),
    path("workers/qualification/", fleet_api.Qualification.as_view(), name="api-worker-qualification"),
    path("workers/claim/", fleet_api.Claim.as_view(), name="api-worker-claim"),
    path("workers/deregister/", fleet_api.Deregister.as_view(), name="api-worker-deregister"),
    path("workers/runs/<int:pk>/heartbeat/", fleet_api.Heartbeat.as_view(), name="api-worker-run-heartbeat"),
    path("workers/runs/<int:pk>/workload/", fleet_api.WorkloadOut.as_view(), name="api-worker-run-workload"),
    path("workers/runs/<int:pk>/progress/", fleet_api.Progress.as_view(), name="api-worker-run-progress"),
    path("workers/runs/<int:pk>/result/", fleet_api.Result.as_view(), name="api-worker-run-result"),
    path("workers/runs/<int:pk>/fail/", fleet_api.Fail.as_view(), name="api-worker-run-fail"),
    path("workers/<int:pk>/revoke/", fleet_api.Revoke.as_view(), name="api-worker-revoke"),
    path("deployments/", deployments_api.DeploymentList.as_view(), name="api-deployments"),
    path("deployments/<int:pk>/", deployments_api.DeploymentDetail.as_view(), name="api-deployment"),
    path("deployments/<int:pk>/token/", deployments_api.DeploymentToken.as_view(), name="api-deployment-token"),
    path("deployments/<int:pk>/ingest/reset/", deployments_api.IngestReset.as_view(), name="api-deployment-ingest-reset"),
    path("deployments/<int:pk>/observations/", deployments_api.Observations.as_view(), name="api-deployment-observations"),
    path("webhooks/", notifications_api.Webhooks.as_view(), name="api-webhooks"),
    path("webhooks/<int:pk>/", notifications_api.WebhookDelete.as_view(), name="api-webhook"),
]
