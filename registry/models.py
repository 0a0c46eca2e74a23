"""Every domain's rows, in one Django app (`registry`). Each domain keeps its models in its own folder
(registry/<domain>/models.py); this module names them all, so that Django loads them and `registry.models.X` reads
them from one place. Business rules live in services; models only hold data."""

from __future__ import annotations

from registry.catalog.models import HubModel as HubModel
from registry.catalog.models import Method as Method
from registry.catalog.models import Pair as Pair
from registry.catalog.models import Role as Role
from registry.catalog.models import search_text as search_text
from registry.certificates.models import Certificate as Certificate
from registry.certificates.models import Verdict as Verdict
from registry.deployments.models import Deployment as Deployment
from registry.deployments.models import LiveSnapshot as LiveSnapshot
from registry.fleet.models import RegistrationToken as RegistrationToken
from registry.fleet.models import Worker as Worker
from registry.fleet.models import WorkerAction as WorkerAction
from registry.fleet.models import WorkerEvent as WorkerEvent
from registry.notifications.models import DeliveryState as DeliveryState
from registry.notifications.models import EmailNotice as EmailNotice
from registry.notifications.models import Outbound as Outbound
from registry.notifications.models import WebhookDelivery as WebhookDelivery
from registry.notifications.models import WebhookEndpoint as WebhookEndpoint
from registry.notifications.models import WebhookEvent as WebhookEvent
from registry.runs.models import CertificationRun as CertificationRun
from registry.runs.models import EngineBuild as EngineBuild
from registry.runs.models import EngineQualification as EngineQualification
from registry.runs.models import Priority as Priority
from registry.runs.models import Regression as Regression
from registry.runs.models import RunQuerySet as RunQuerySet
from registry.runs.models import RunTrigger as RunTrigger
from registry.runs.models import Submission as Submission
from registry.runs.models import SubmissionSource as SubmissionSource
from registry.runs.models import SubmissionStatus as SubmissionStatus
from registry.runs.models import WorkloadCategory as WorkloadCategory
from registry.runs.models import WorkloadResult as WorkloadResult
from registry.traffic.models import Workload as Workload
from registry.transparency.models import EntryKind as EntryKind
from registry.transparency.models import LogEntry as LogEntry
from registry.transparency.models import LogHead as LogHead
