# Two commands on a fresh machine: `make demo` and `make test`.
# uv is bootstrapped with pip when it is not on PATH.
UV := $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
RUN := $(UV) run --frozen

.PHONY: bootstrap sync demo test lint typecheck pytest clean stack stack-down

bootstrap:
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv

sync: bootstrap
	$(UV) sync --frozen

# The demo starts from an empty embedded store: it deletes only a ledger a previous demo
# made (`db drop-demo`), never another; `db upgrade` is the one command that creates or
# migrates a schema; every other command refuses an unmigrated ledger.
demo: sync
	$(RUN) reflexmem db drop-demo
	$(RUN) reflexmem db upgrade
	$(RUN) reflexmem demo

# The production topology on this machine (docs/operations.md): Prefect server, MLflow
# server on PostgreSQL, a process work pool with one worker; the ledger is migrated by
# `db upgrade` (the one command that migrates), then every flow is deployed to the pool.
stack: sync
	$(RUN) reflexmem stack up --no-deploy
	eval "$$($(RUN) reflexmem stack env)" && $(RUN) reflexmem db upgrade && $(RUN) reflexmem stack deploy

stack-down: sync
	$(RUN) reflexmem stack down

lint: sync
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) lint-imports

typecheck: sync
	$(RUN) mypy

# Two workers (one per core; a file's tests stay on one worker, so module fixtures are
# built once), then the tests marked `serial` alone: they start many processes or hold a
# time bound that a loaded machine would break.
pytest: sync
	$(RUN) pytest -q -n 2 --dist loadfile -m "not serial"
	$(RUN) pytest -q -m serial

test: lint typecheck pytest

clean:
	rm -rf .reflex mlruns mlartifacts .pytest_cache .mypy_cache .ruff_cache
