"""SpecHub settings: one module, read from the environment, with working local defaults.

Unset, everything runs locally: SQLite under var/, Celery tasks in-process.
Production switches behaviour on with variables (DEBUG=0, SECRET_KEY,
DATABASE_URL, CELERY_BROKER_URL), never with a second settings module.
"""

from __future__ import annotations

from pathlib import Path

import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from kernel import settings as kernel_settings
from registry.envconf import (
    env_bool,
    env_broker,
    env_database,
    env_float,
    env_int,
    env_int_list,
    env_list,
    env_str,
    env_str_list,
    env_url,
)

# Lets admin and other generic classes be subscripted at run time, as mypy sees them.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
# The local state folder and the Hub cache come from the kernel's settings, so the registry and the workers agree.
VAR_DIR = kernel_settings.current().var_dir

DEBUG = env_bool("DEBUG", True)
SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        hint = "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        raise ImproperlyConfigured(f"SECRET_KEY must be set when DEBUG is off; generate one with `{hint}`.")
    SECRET_KEY = "insecure-local-development-key-never-use-in-production"  # noqa: S105 - DEBUG only

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"] if DEBUG else [])

# With DEBUG off SpecHub is served over HTTPS: secure cookies, HSTS, and plain HTTP redirected,
# except the health probes, which containers and load balancers make over plain HTTP.
# SECURE_PROXY_SSL_HEADER: set SPECHUB_TLS_PROXY=1 only behind a proxy that terminates TLS and
# overwrites X-Forwarded-Proto (trusting it otherwise would let clients claim HTTPS).
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]  # probes and scrapers speak plain HTTP inside
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = not DEBUG
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 365 * 24 * 3600, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("SPECHUB_TLS_PROXY", False) else None
# How many proxies we run in front, each appending to X-Forwarded-For (registry/clients.py); 0: the peer is the client.
SPECHUB_TRUSTED_PROXIES = env_int("SPECHUB_TRUSTED_PROXIES", 0, minimum=0)
# The Content-Security-Policy of every response (registry/csp.py), DEBUG on or off: scripts, styles and images
# from this server only, no inline script, style or handler (the templates keep none), no plugins, never framed.
SPECHUB_CONTENT_SECURITY_POLICY = env_str(
    "SPECHUB_CONTENT_SECURITY_POLICY",
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "registry",
]

MIDDLEWARE = [
    # First, so it times everything after it (registry/prometheus.py).
    "registry.prometheus.RequestMetrics",
    # Before anything that can answer early (BodyLimit's 413, WhiteNoise's files), so every response has it.
    "registry.csp.ContentSecurityPolicy",
    "registry.uploads.BodyLimit",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "registry.accounts.logins.KnownDevice",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "registry.middleware.BadParameterPage",
    # Last, so it sees a view's database errors first (and DRF views', which re-raise them).
    "registry.middleware.DatabaseOutage",
]

FILE_UPLOAD_HANDLERS = [
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "registry.uploads.BoundedTemporaryFileUploadHandler",
]

ROOT_URLCONF = "registry.urls"
WSGI_APPLICATION = "registry.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env_database("DATABASE_URL", default_sqlite_path=str(VAR_DIR / "spechub.sqlite3"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "submit"
LOGOUT_REDIRECT_URL = "catalog"

# Submissions per user and period (DRF's rate syntax); the API answers 429 beyond it, the form says so.
SPECHUB_SUBMISSION_RATE = env_str("SPECHUB_SUBMISSION_RATE", "20/hour")
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "registry.api.pagination.PageNumbers",
    "PAGE_SIZE": 25,
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.ScopedRateThrottle"],
    "DEFAULT_PARSER_CLASSES": [
        "registry.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # Unset, DRF would identify an anonymous caller by the whole X-Forwarded-For it wrote itself.
    "NUM_PROXIES": SPECHUB_TRUSTED_PROXIES,
    # Anonymous callers by address, signed-in ones by account; counted in the shared cache.
    "DEFAULT_THROTTLE_RATES": {"compatibility": env_str("SPECHUB_COMPATIBILITY_RATE", "60/minute")},
    "EXCEPTION_HANDLER": "registry.api.errors.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "SpecHub API",
    "VERSION": "1",
    # The docs page's assets are served from this server, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The events deliveries carry, described as OpenAPI 3.1 webhooks (registry/notifications/payloads.py).
    "OAS_VERSION": "3.1.0",
    # The default hook, then 3.1's nulls where a type hint or DRF's pagination wrote 3.0's (registry/api/shapes.py).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "registry.api.shapes.nulls_as_3_1"],
    "WEBHOOKS": [
        "registry.notifications.payloads.CERTIFIED",
        "registry.notifications.payloads.REGRESSED",
        "registry.notifications.payloads.EXPIRED",
        "registry.notifications.payloads.REVOKED",
        "registry.notifications.payloads.DRIFT",
    ],
    "ENUM_NAME_OVERRIDES": {
        "PairMethodEnum": "registry.models.Method",
        "VllmMethodEnum": "kernel.formats.vllm_support.METHOD_CHOICES",
    },
}

# --- Celery -----------------------------------------------------------------
# With a broker, tasks go through Redis to real workers. Without one (the embedded default) they queue
# as files under var/queue/ for the worker `manage.py demo` starts beside the web server: kombu's
# filesystem transport (registry/celery.py says why). SPECHUB_TASKS_IN_PROCESS=1 runs each task
# inside the process that queued it instead, for the tests that drive a run step by step.
CELERY_BROKER_URL = env_broker("CELERY_BROKER_URL")
CELERY_TASK_ALWAYS_EAGER = env_bool("SPECHUB_TASKS_IN_PROCESS", False)
SPECHUB_QUEUE_DIR = VAR_DIR / "queue"
CELERY_BROKER_KEY_PREFIX = env_str("CELERY_BROKER_KEY_PREFIX", "")
# Unacked messages from a lost worker are redelivered after this many seconds;
# it must exceed the longest time a healthy worker holds one message.
CELERY_VISIBILITY_TIMEOUT = env_int("CELERY_VISIBILITY_TIMEOUT", 4 * 3600, minimum=1)
CELERY_UNACKED_RESTORE_SECONDS = env_int("CELERY_UNACKED_RESTORE_SECONDS", 60, minimum=1)
SPECHUB_GPU_CLASSES = env_list("SPECHUB_GPU_CLASSES", ["h100", "h200", "a100", "mi300x"])

# --- Cache --------------------------------------------------------------------
# Rate limits and gate reports are shared by every web process through Redis (SPECHUB_CACHE_URL,
# by default the broker's Redis); the embedded default keeps them in process memory.
SPECHUB_CACHE_URL = env_url("SPECHUB_CACHE_URL", schemes={"redis", "rediss"}) or (
    CELERY_BROKER_URL if CELERY_BROKER_URL and CELERY_BROKER_URL.startswith("redis") else None
)
CACHES = {
    "default": {
        "BACKEND": "registry.cache.FailOpenRedisCache",
        "LOCATION": SPECHUB_CACHE_URL,
        "KEY_PREFIX": f"spechub:{CELERY_BROKER_KEY_PREFIX}",
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }
    if SPECHUB_CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# --- Certification runs -----------------------------------------------------
SPECHUB_RUN_SOFT_TIME_LIMIT = env_int("SPECHUB_RUN_SOFT_TIME_LIMIT", 3 * 3600, minimum=1)
SPECHUB_RUN_HARD_TIME_LIMIT = env_int("SPECHUB_RUN_HARD_TIME_LIMIT", SPECHUB_RUN_SOFT_TIME_LIMIT + 300, minimum=1)
if SPECHUB_RUN_HARD_TIME_LIMIT <= SPECHUB_RUN_SOFT_TIME_LIMIT:
    raise ImproperlyConfigured(
        "SPECHUB_RUN_HARD_TIME_LIMIT must exceed SPECHUB_RUN_SOFT_TIME_LIMIT so the soft limit can clean up."
    )
SPECHUB_RUN_MAX_ATTEMPTS = env_int("SPECHUB_RUN_MAX_ATTEMPTS", 3, minimum=1)
SPECHUB_HEARTBEAT_SECONDS = env_int("SPECHUB_HEARTBEAT_SECONDS", 30, minimum=1)
SPECHUB_STALE_AFTER_SECONDS = env_int("SPECHUB_STALE_AFTER_SECONDS", 300, minimum=1)
SPECHUB_RETRY_BACKOFF_SECONDS = env_int("SPECHUB_RETRY_BACKOFF_SECONDS", 60, minimum=0)
# Dotted path to a callable returning the director's stages (see kernel/director.py).
SPECHUB_DIRECTOR_STAGES = env_str("SPECHUB_DIRECTOR_STAGES", "workers.stages.default_stages")
SPECHUB_DEFAULT_ENGINE = env_str("SPECHUB_DEFAULT_ENGINE", "vllm")
# How a run measures. GPU workers differ from CPU ones by configuration only (dtype here).
SPECHUB_WORKLOADS = env_str("SPECHUB_WORKLOADS", "toy-v2")
# Unset: what each hardware class can measure (kernel/spec.py levels_for: 1, 2, 4 on CPU; up to 64 on GPUs).
SPECHUB_CONCURRENCY_LEVELS = env_int_list("SPECHUB_CONCURRENCY_LEVELS", [])
# Paired baseline/speculative blocks per level: the first stage, whose spread sets how many more (Stein's rule),
# up to the most; the 95 % interval's relative half-width wanted at the lowest level and at the others.
SPECHUB_REPEATS = env_int("SPECHUB_REPEATS", 4, minimum=3)
# Unset (0): the hardware class's (kernel/spec.py most_pairs_for: 6 on CPU, 12 on GPUs).
SPECHUB_MOST_PAIRS = env_int("SPECHUB_MOST_PAIRS", 0, minimum=0)
SPECHUB_HALF_WIDTH = env_float("SPECHUB_HALF_WIDTH", 0.05)
SPECHUB_HALF_WIDTH_LOADED = env_float("SPECHUB_HALF_WIDTH_LOADED", 0.10)
# Tokens each timed request asks for: long enough that per-token figures are not start-up noise.
SPECHUB_OUTPUT_TOKENS = env_int("SPECHUB_OUTPUT_TOKENS", 128, minimum=16)
# The smoke tier's engine features to serve, e.g. "prefix caching off,chunked prefill"; unset: all of them.
SPECHUB_SMOKE_ENGINE_FEATURES = env_str_list("SPECHUB_SMOKE_ENGINE_FEATURES")
SPECHUB_ENGINE_DTYPE = env_str("SPECHUB_ENGINE_DTYPE", "float32")
# The verdict's thresholds, shown on every certificate.
SPECHUB_THRESHOLD_EXACT_MATCH = env_float("SPECHUB_THRESHOLD_EXACT_MATCH", 1.0)
SPECHUB_THRESHOLD_SAMPLING_ALPHA = env_float("SPECHUB_THRESHOLD_SAMPLING_ALPHA", 0.001)
# The total variation (over the binned outcomes) a pair's sampling test must detect with power 0.99; the
# sample count follows from it (about 1,500 per prefix at 0.1). A test short of it reads "inconclusive".
SPECHUB_THRESHOLD_SAMPLING_TV = env_float("SPECHUB_THRESHOLD_SAMPLING_TV", 0.1)
# The practical margin a certified gain must clear: the whole interval at c=1 above it (1.0 would certify 1.01x).
SPECHUB_THRESHOLD_MIN_SPEEDUP = env_float("SPECHUB_THRESHOLD_MIN_SPEEDUP", 1.03)
# The catalog that fills itself (registry/catalog/imports.py): repos and a Hub collection to follow, the
# verifier for drafts whose config names none, whether gate-passing pairs are certified, and how often.
SPECHUB_IMPORT_REPOS = env_list("SPECHUB_IMPORT_REPOS", [])
SPECHUB_IMPORT_COLLECTION = env_str("SPECHUB_IMPORT_COLLECTION", "")
SPECHUB_IMPORT_VERIFIER = env_str("SPECHUB_IMPORT_VERIFIER", "")
SPECHUB_IMPORT_CERTIFY = env_bool("SPECHUB_IMPORT_CERTIFY", False)
SPECHUB_IMPORT_SECONDS = env_int("SPECHUB_IMPORT_SECONDS", 6 * 3600, minimum=60)
# Users' own traffic (kernel/traffic/): what an upload may hold, the seeded sample a run measures, quotas
# per user (live workloads; runs on them per day). SPECHUB_WORKLOAD_DIR (kernel.traffic.workload_dir) is where
# a worker finds a workload while it measures it.
SPECHUB_WORKLOAD_MAX_BYTES = env_int("SPECHUB_WORKLOAD_MAX_BYTES", 20 * 1024 * 1024, minimum=1024)
SPECHUB_WORKLOAD_MAX_REQUESTS = env_int("SPECHUB_WORKLOAD_MAX_REQUESTS", 100_000, minimum=1)
SPECHUB_WORKLOAD_SAMPLE = env_int("SPECHUB_WORKLOAD_SAMPLE", 200, minimum=1)
SPECHUB_WORKLOAD_SEED = env_int("SPECHUB_WORKLOAD_SEED", 0, minimum=0)
SPECHUB_WORKLOAD_MAX_TOKENS = env_int("SPECHUB_WORKLOAD_MAX_TOKENS", 32, minimum=1)
SPECHUB_WORKLOAD_QUOTA = env_int("SPECHUB_WORKLOAD_QUOTA", 10, minimum=1)
SPECHUB_WORKLOAD_RUN_QUOTA = env_int("SPECHUB_WORKLOAD_RUN_QUOTA", 20, minimum=1)
# /metrics (registry/prometheus.py): a bearer token for scrapers from public addresses; the stage-time window.
SPECHUB_METRICS_TOKEN = env_str("SPECHUB_METRICS_TOKEN", "")
SPECHUB_METRICS_WINDOW_HOURS = env_int("SPECHUB_METRICS_WINDOW_HOURS", 24, minimum=1)
# Engine qualification (workers/qualification.py): run when a worker reports a build that has none.
SPECHUB_QUALIFIER = env_str("SPECHUB_QUALIFIER", "workers.qualification.qualify_build")
SPECHUB_QUALIFY_NEW_BUILDS = env_bool("SPECHUB_QUALIFY_NEW_BUILDS", True)
# The total variation each sampling control detects with power 0.99; the sample counts follow from it.
SPECHUB_QUALIFY_TV = env_float("SPECHUB_QUALIFY_TV", 0.1)
SPECHUB_QUALIFY_CONTROLS = env_list(
    "SPECHUB_QUALIFY_CONTROLS",
    ["verifier-alone", "self-draft", "draft_model", "eagle3", "eagle3-reduced", "ngram", "synthetic-rejection"],
)
# Self-hosted workers (registry/fleet/): the open (unused, unexpired) registration tokens and the workers (not revoked)
# one user may hold, and how long a run for their own machines only waits with none of their workers seen on its
# hardware class before it fails (own-machines:no-worker) and stops counting against their daily runs.
SPECHUB_REGISTRATION_TOKENS_PER_USER = env_int("SPECHUB_REGISTRATION_TOKENS_PER_USER", 10, minimum=1)
SPECHUB_WORKERS_PER_USER = env_int("SPECHUB_WORKERS_PER_USER", 20, minimum=1)
SPECHUB_OWN_MACHINES_WAIT_SECONDS = env_int("SPECHUB_OWN_MACHINES_WAIT_SECONDS", 24 * 3600, minimum=60)

# --- The Hub -----------------------------------------------------------------
# HF_ENDPOINT is huggingface_hub's own variable; `make hub` serves the toy zoo there.
SPECHUB_HUB_ENDPOINT = env_url("HF_ENDPOINT", schemes={"http", "https"}) or "https://huggingface.co"
SPECHUB_HUB_TIMEOUT = env_int("SPECHUB_HUB_TIMEOUT", 30, minimum=1)
# How long the compatibility endpoint keeps a gate report for the same repos at the same commits.
SPECHUB_GATE_CACHE_SECONDS = env_int("SPECHUB_GATE_CACHE_SECONDS", 24 * 3600, minimum=0)
SPECHUB_HUB_CACHE = kernel_settings.current().hub_cache

# --- Certificates, schedules, alerts -----------------------------------------
# The Ed25519 signing key as a base64 32-byte seed (`python -c "from kernel.certificates import
# new_seed; print(new_seed())"`). Unset, a key is made once in SPECHUB_SIGNING_KEY_FILE (local use).
# Only workers sign (they finish runs): the web tier and beat need the public key alone,
# SPECHUB_SIGNING_PUBLIC_KEY, the key's 32 raw bytes in base64
# (`python -c "from kernel.certificates import *; print(public_key_text(private_key_from_seed('<seed>').public_key()))"`).
SPECHUB_SIGNING_KEY = env_str("SPECHUB_SIGNING_KEY", "")
SPECHUB_SIGNING_PUBLIC_KEY = env_str("SPECHUB_SIGNING_PUBLIC_KEY", "")
if not (SPECHUB_SIGNING_KEY or SPECHUB_SIGNING_PUBLIC_KEY) and not DEBUG:
    # A key file per container would give web and workers different keys: certificates signed by
    # a worker would not verify against the key the web serves.
    hint = 'python -c "from kernel.certificates import new_seed; print(new_seed())"'
    raise ImproperlyConfigured(
        "SPECHUB_SIGNING_KEY must be set when DEBUG is off (on workers; the web tier may have "
        f"SPECHUB_SIGNING_PUBLIC_KEY instead); generate one with `{hint}`."
    )
if SPECHUB_SIGNING_KEY or SPECHUB_SIGNING_PUBLIC_KEY:
    from kernel.certificates import key_id, private_key_from_seed, public_key_from_text

    try:
        _private = private_key_from_seed(SPECHUB_SIGNING_KEY) if SPECHUB_SIGNING_KEY else None
    except ValueError as exc:
        raise ImproperlyConfigured(f"SPECHUB_SIGNING_KEY {exc}; it must be a base64 Ed25519 seed of 32 bytes.") from None
    try:
        _public = public_key_from_text(SPECHUB_SIGNING_PUBLIC_KEY) if SPECHUB_SIGNING_PUBLIC_KEY else None
    except ValueError as exc:
        raise ImproperlyConfigured(f"SPECHUB_SIGNING_PUBLIC_KEY {exc}; it must be a base64 Ed25519 public key.") from None
    if _private and _public and key_id(_private.public_key()) != key_id(_public):
        raise ImproperlyConfigured("SPECHUB_SIGNING_PUBLIC_KEY is not the public half of SPECHUB_SIGNING_KEY.")
SPECHUB_SIGNING_KEY_FILE = Path(env_str("SPECHUB_SIGNING_KEY_FILE", str(VAR_DIR / "signing-key")))
SPECHUB_CERTIFICATE_DAYS = env_int("SPECHUB_CERTIFICATE_DAYS", 90, minimum=1)
# The nightly sweep re-certifies pairs whose certificate expires within this many days.
SPECHUB_CERTIFICATE_RENEW_DAYS = env_int("SPECHUB_CERTIFICATE_RENEW_DAYS", 14, minimum=0)
SPECHUB_EXPIRY_SWEEP_HOUR = env_int("SPECHUB_EXPIRY_SWEEP_HOUR", 3, minimum=0)
# A drop in AL or speedup beyond this relative tolerance flags a regression (vLLM's CI uses 5 %).
SPECHUB_REGRESSION_RTOL = env_float("SPECHUB_REGRESSION_RTOL", 0.05)
# How often beat sweeps for stale runs, lost dispatches and due webhook retries, and checks engines.
SPECHUB_SWEEP_SECONDS = env_int("SPECHUB_SWEEP_SECONDS", 60, minimum=1)
SPECHUB_ENGINE_CHECK_SECONDS = env_int("SPECHUB_ENGINE_CHECK_SECONDS", 300, minimum=1)
# A queued run whose dispatch never reached the broker is sent again after this long.
SPECHUB_DISPATCH_GRACE_SECONDS = env_int("SPECHUB_DISPATCH_GRACE_SECONDS", 60, minimum=0)
SPECHUB_WEBHOOK_MAX_ATTEMPTS = env_int("SPECHUB_WEBHOOK_MAX_ATTEMPTS", 6, minimum=1)
SPECHUB_WEBHOOK_BACKOFF_SECONDS = env_int("SPECHUB_WEBHOOK_BACKOFF_SECONDS", 30, minimum=0)
# The whole exchange with a receiver, connect to last byte read; the answer is read to 64 KiB at most.
SPECHUB_WEBHOOK_TIMEOUT = env_int("SPECHUB_WEBHOOK_TIMEOUT", 10, minimum=1)
SPECHUB_WEBHOOKS_PER_USER = env_int("SPECHUB_WEBHOOKS_PER_USER", 10, minimum=1)
# Sign-in: this many wrong passwords for one account from one address (or from all) lock it for a while.
SPECHUB_LOGIN_FAILURES_PER_ADDRESS = env_int("SPECHUB_LOGIN_FAILURES_PER_ADDRESS", 5, minimum=1)
SPECHUB_LOGIN_FAILURES_PER_ACCOUNT = env_int("SPECHUB_LOGIN_FAILURES_PER_ACCOUNT", 20, minimum=1)
SPECHUB_LOGIN_LOCK_SECONDS = env_int("SPECHUB_LOGIN_LOCK_SECONDS", 15 * 60, minimum=1)
# Password reset emails an hour, per address and per email; past it the page answers the same and sends nothing.
SPECHUB_PASSWORD_RESETS = env_int("SPECHUB_PASSWORD_RESETS", 3, minimum=1)
# Deliveries go to this queue; compose gives them their own worker, so a slow receiver never
# holds up certifications or beat's sweeps. The embedded default and the tests use `default`.
SPECHUB_NOTIFICATIONS_QUEUE = env_str("SPECHUB_NOTIFICATIONS_QUEUE", "default")
# Webhooks reach public addresses only; these host names (or literal addresses) are let through
# even when they are internal, for an operator's own receivers. Lower case, comma-separated.
SPECHUB_WEBHOOK_ALLOWED_HOSTS = frozenset(host.lower() for host in env_list("SPECHUB_WEBHOOK_ALLOWED_HOSTS", []))
# Off by default: open a PR with the certificate on the draft's Hub repo (needs a write token).
SPECHUB_HUB_PUBLISH = env_bool("SPECHUB_HUB_PUBLISH", False)
# A certificate's PR dispatch is retried by the sweep once this long has passed without a PR.
SPECHUB_HUB_PR_LEASE_SECONDS = env_int("SPECHUB_HUB_PR_LEASE_SECONDS", 3600, minimum=1)
SPECHUB_HUB_TOKEN = env_str("SPECHUB_HUB_TOKEN", "")
# A read token for gated and private repos (SPECHUB_HUB_READ_TOKEN, else HF_TOKEN), used by the gate, the catalog
# and the workers, all read by kernel.settings; never logged or shown.
SPECHUB_HUB_READ_TOKEN = str(kernel_settings.current().hub_token or "")
if SPECHUB_HUB_PUBLISH and not SPECHUB_HUB_TOKEN:
    raise ImproperlyConfigured("SPECHUB_HUB_PUBLISH is on but SPECHUB_HUB_TOKEN is unset; give a Hub token with write access.")
SPECHUB_PUBLIC_URL = env_url("SPECHUB_PUBLIC_URL", schemes={"http", "https"}) or "http://127.0.0.1:8000"
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "SpecHub <certification@spechub.invalid>")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
# Live acceptance (registry/deployments/, kernel/live.py): how many snapshots one push and one deployment's minute
# may hold, and how long snapshots keep full resolution before they are thinned to one an hour.
SPECHUB_LIVE_SNAPSHOTS_PER_PUSH = env_int("SPECHUB_LIVE_SNAPSHOTS_PER_PUSH", 100, minimum=1)
SPECHUB_LIVE_SNAPSHOTS_PER_MINUTE = env_int("SPECHUB_LIVE_SNAPSHOTS_PER_MINUTE", 120, minimum=1)
SPECHUB_LIVE_KEEP_DAYS = env_int("SPECHUB_LIVE_KEEP_DAYS", 7, minimum=1)
