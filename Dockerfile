# Images for docker-compose.yml: the web tier has no torch; workers add an engine.
FROM python:3.11-slim AS web
WORKDIR /app
ENV PYTHONUNBUFFERED=1
COPY pyproject.toml manage.py ./
COPY registry registry
COPY workers workers
COPY templates templates
RUN pip install --no-cache-dir -e . && python manage.py collectstatic --noinput

FROM web AS worker-cpu
RUN pip install --no-cache-dir -e ".[cpu]" --extra-index-url https://download.pytorch.org/whl/cpu \
 && pip uninstall -y torchvision torchaudio torchcodec

FROM web AS worker-gpu
RUN pip install --no-cache-dir -e ".[gpu]"
