# nsstuck: `make run` installs and runs the main job, `make test` installs and runs every check.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONSTRAINTS := requirements/constraints.txt
# the config file: yours if present, else the commented example
NSSTUCK_CONFIG ?= $(if $(wildcard config/nsstuck.yaml),config/nsstuck.yaml,config/nsstuck.example.yaml)
export NSSTUCK_CONFIG

.PHONY: install run test test-fast lint chart pytest lock clean bench demo

$(BIN)/.installed: pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --quiet --disable-pip-version-check -c $(CONSTRAINTS) -e '.[test]'
	touch $@

install: $(BIN)/.installed

## the main job: migrate the database, check the configuration, serve the Slack bot
run: install
	$(BIN)/nsstuck db upgrade
	$(BIN)/nsstuck config check
	$(BIN)/nsstuck serve

## every quality gate and the whole test suite, on SQLite and PostgreSQL
test: install
	bash scripts/check

## while you work: the lint gates and the tests that need no PostgreSQL, kubectl, helm or real-time waits
test-fast: install
	bash scripts/check --fast

lint: install
	bash scripts/check --lint-only

## the Dockerfile and the Helm chart: hadolint, helm lint, every rendered manifest against the Kubernetes schemas
chart: install
	bash scripts/check-chart

## the tests only (PostgreSQL tests are skipped without a server): make pytest ARGS="-k config"
pytest: install
	$(BIN)/pytest $(ARGS)

## re-pin every dependency to what is installed now
lock: install
	(echo "# Pinned versions for reproducible installs: pip install -c $(CONSTRAINTS) -e '.[test]'"; \
	 echo "# Regenerate with: make lock"; \
	 $(BIN)/pip freeze --exclude-editable | grep -v '^-e' | sort -f) > $(CONSTRAINTS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .coverage-data *.egg-info

## benchmarks with their baselines measured in the same run (see bench/)
bench: install
	PYTHONPATH=. $(BIN)/python -m bench.diagnose --json bench/out/diagnose.json
	PYTHONPATH=. $(BIN)/python -m bench.slack --json bench/out/slack.json
	PYTHONPATH=. $(BIN)/python -m bench.history --json bench/out/history.json
	PYTHONPATH=. $(BIN)/python -m bench.digest --json bench/out/digest.json
	PYTHONPATH=. $(BIN)/python -m bench.socket --json bench/out/socket.json
	PYTHONPATH=. $(BIN)/python -m bench.load --json bench/out/load.json
	PYTHONPATH=. $(BIN)/python -m bench.admission --json bench/out/admission.json

## the real bot against the Slack and Kubernetes emulators, printed as a user reads it
demo: install
	PYTHONPATH=. $(BIN)/python scripts/demo.py
