"""Prometheus metrics at /metrics: the web tier's requests, and the certification pipeline read at scrape time.

- `spechub_http_request_seconds{method, route, status}`: a histogram of every request, by URL name.
- `spechub_runs{state}`: runs by state.
- `spechub_queue_depth{queue}`: messages waiting on each queue, as the broker counts them.
- `spechub_stage_seconds{stage}`: a summary of how long each director stage took, over the runs
  finished in the last SPECHUB_METRICS_WINDOW_HOURS.
- `spechub_webhook_deliveries{state}`: webhook deliveries by outcome.
- `spechub_engine_build_info{hardware, engine, version, worker}`: the engine build each worker reported.
- `spechub_deployment_acceptance_length{deployment}`, `spechub_deployment_state{deployment, state}`: each
  deployment's live AL and verdict against its certificate (registry/deployments/).

The pipeline's figures come from the database and the broker when Prometheus scrapes, so every
web process gives the same answer. Request histograms live in each process; with several gunicorn
workers, set PROMETHEUS_MULTIPROC_DIR to an empty directory and they are summed across them.
With SPECHUB_METRICS_TOKEN set, the scraper must send it; without, only loopback and private peers may
scrape, and nobody may behind a proxy (where every peer is the proxy).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.utils import timezone
from kombu.exceptions import ChannelError
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from registry.celery import app, queue_names
from registry.clients import behind_proxy
from registry.models import CertificationRun, Deployment, EngineBuild, WebhookDelivery
from registry.states import RunState

logger = logging.getLogger(__name__)
MULTIPROCESS = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
if MULTIPROCESS:
    os.makedirs(MULTIPROCESS, exist_ok=True)

# A label takes a value from a known set: a client choosing its own method would otherwise add series without end.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
REQUESTS = Histogram("spechub_http_request_seconds", "Web requests by method, route and status.", ["method", "route", "status"])


class RequestMetrics:
    """Middleware: time every request and label it by its route's name (never its raw path, which is unbounded)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = request.resolver_match
        route = (match.url_name or match.route) if match else "unmatched"
        method = request.method if request.method in METHODS else "other"
        REQUESTS.labels(method, route, str(response.status_code)).observe(time.perf_counter() - started)
        return response


class Pipeline(Collector):
    """The certification pipeline's state, read from the database and the broker at each scrape."""

    def collect(self) -> Iterator[Metric]:
        yield _counted(
            "spechub_runs", "Certification runs by state.", "state", CertificationRun.objects, "state", RunState.values
        )
        yield _counted("spechub_webhook_deliveries", "Webhook deliveries by outcome.", "state", WebhookDelivery.objects, "state")
        yield _queue_depths()
        yield _stage_seconds()
        yield _engine_builds()
        yield from _deployments()


def _counted(name: str, about: str, label: str, rows: object, field: str, every: list[str] | None = None) -> Metric:
    found = {row[field]: row["n"] for row in rows.values(field).annotate(n=Count("id"))}  # type: ignore[attr-defined]
    family = GaugeMetricFamily(name, about, labels=[label])
    for value in every or sorted(found):
        family.add_metric([value], found.get(value, 0))
    return family


def _queue_depths() -> Metric:
    family = GaugeMetricFamily("spechub_queue_depth", "Messages waiting on each queue.", labels=["queue"])
    try:
        with app.connection_for_read() as connection:
            channel: Any = connection.default_channel  # kombu's stub leaves queue_declare off its channel type
            for queue in queue_names():
                family.add_metric([queue], _depth(channel, queue))
    except Exception:  # the broker down must not fail the scrape: the queues are then left out
        logger.warning("queue depth unavailable: the broker did not answer", exc_info=True)
    return family


def _depth(channel: Any, queue: str) -> int:
    # kombu's Redis channel counts a queue's messages over its priority lists with _size; its passive
    # declare answers NOT_FOUND for a queue a producer filled but no worker has bound yet.
    if callable(size := getattr(channel, "_size", None)):
        return int(size(queue))
    try:
        return int(channel.queue_declare(queue=queue, passive=True).message_count)
    except ChannelError:  # no producer or worker has declared it yet: nothing waits there
        return 0


def _stage_seconds() -> Metric:
    since = timezone.now() - timedelta(hours=settings.SPECHUB_METRICS_WINDOW_HOURS)
    totals: dict[str, tuple[int, float]] = {}
    for seconds in CertificationRun.objects.filter(finished_at__gte=since).values_list("stage_seconds", flat=True):
        for stage, spent in (seconds or {}).items():
            count, total = totals.get(stage, (0, 0.0))
            totals[stage] = (count + 1, total + float(spent))
    family = SummaryMetricFamily("spechub_stage_seconds", "Seconds each director stage took, runs finished lately.",
                                 labels=["stage"])  # fmt: skip
    for stage, (count, total) in sorted(totals.items()):
        family.add_metric([stage], count_value=count, sum_value=total)
    return family


def _deployments() -> Iterator[Metric]:
    """Each deployment's live AL and verdict, so its owner's Prometheus can alert; labelled by id only, never by
    the owner's names."""
    al = GaugeMetricFamily("spechub_deployment_acceptance_length", "Live AL over the newest judgeable windows.",
                           labels=["deployment"])  # fmt: skip
    state = GaugeMetricFamily("spechub_deployment_state", "1 for the deployment's verdict against its certificate.",
                              labels=["deployment", "state"])  # fmt: skip
    for pk, verdict, live_al in Deployment.objects.exclude(state="").values_list("pk", "state", "live_al"):
        if live_al is not None:
            al.add_metric([str(pk)], live_al)
        state.add_metric([str(pk), verdict], 1)
    yield al
    yield state


def _engine_builds() -> Metric:
    family = GaugeMetricFamily("spechub_engine_build_info", "The engine build each worker reported, per hardware queue.",
                               labels=["hardware", "engine", "version", "worker"])  # fmt: skip
    for build in EngineBuild.objects.all():
        family.add_metric([build.hardware, build.engine, build.version, build.reported_by], 1)
    return family


def _allowed(request: HttpRequest) -> bool:
    token = settings.SPECHUB_METRICS_TOKEN
    if token:  # compared as bytes: a non-ASCII header must read as wrong, not fail the comparison
        sent = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
        return hmac.compare_digest(sent, f"Bearer {token}".encode())
    if behind_proxy():
        return False  # every peer is the proxy, a private address: only the token tells the operator apart
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return address.is_loopback or address.is_private


def metrics(request: HttpRequest) -> HttpResponse:
    """The scrape endpoint."""
    if not _allowed(request):
        return HttpResponseForbidden("Metrics are for the operator's Prometheus: send `Authorization: Bearer "
                                     "<SPECHUB_METRICS_TOKEN>`, or, with no proxy in front and no token set, scrape "
                                     "from a private address.")  # fmt: skip
    registry = CollectorRegistry()
    if MULTIPROCESS:
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # prometheus_client leaves it untyped
    else:
        registry.register(_Requests())
    registry.register(Pipeline())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


class _Requests(Collector):
    """This process's request histogram, from the default registry it lives in."""

    def collect(self) -> Iterator[Metric]:
        yield from (family for family in REGISTRY.collect() if family.name == "spechub_http_request_seconds")
