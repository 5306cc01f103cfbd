# The two commands of the README: `make run` (main job) and `make test` (test suite).
# Both create/refresh the environment first (scripts/setup.sh is idempotent).
SHELL := /bin/bash
VENV := .venv
REALSPEECH ?= $(or $(WHISPERLINE_REALSPEECH),../shared/data/realspeech)
REALTRAIN ?= $(or $(WHISPERLINE_REALTRAIN),../shared/data/realspeech-train/speechocean762)
export PREFECT_HOME ?= $(CURDIR)/.prefect
# A fresh machine runs the Prefect database migrations on first start (can take > 60 s).
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 300
export PREFECT_SERVER_EPHEMERAL_ENABLED ?= true
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export DO_NOT_TRACK ?= 1

.PHONY: setup run run-real test bench serve serve-model clean

setup:
	@bash scripts/setup.sh

run: setup
	$(VENV)/bin/whisperline run $(if $(REAL),--realspeech $(REALSPEECH) --real-train $(REALTRAIN)) $(if $(SUMMARY),--summary-json $(SUMMARY))

test: setup
	WHISPERLINE_REALSPEECH=$(REALSPEECH) $(VENV)/bin/pytest -q

bench: setup
	WHISPERLINE_REALSPEECH=$(REALSPEECH) $(VENV)/bin/python -m benchmarks.dataset_build

# A real Prefect server + process worker on 127.0.0.1:$(PORT) running infra/prefect.yaml's deployments on schedule.
PORT ?= 4200
serve: setup
	$(VENV)/bin/whisperline serve --port $(PORT)

# The registry version behind $(ALIAS) live on 127.0.0.1:$(SERVE_PORT) (Ray Serve); by default the recognizer the
# pipeline promoted (whatever its kind: two-pass, causal, EMMA):
# browser page at /, WebSocket streams at /ws.
ALIAS ?= champion
SERVE_MODEL ?= whisperline-recognizer-tiny.en
SERVE_PORT ?= 8000
serve-model: setup
	$(VENV)/bin/whisperline serve-model --alias $(ALIAS) --model $(SERVE_MODEL) --port $(SERVE_PORT)

clean:
	rm -rf outputs .prefect
