# Backchannel: `make demo` is a tutorial on the offline echo engine (every command shown); `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

HERMES_VENV := .venv-hermes
HERMES_STAMP := $(HERMES_VENV)/.installed

.PHONY: demo test faults interop bench bench-hermes lint install clean browser

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

# Debian's chromium for the web view's browser tests (Playwright drives it; it never downloads a browser).
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

test: $(STAMP) browser
	$(BIN)/python -m pytest -m "not interop and not faults"

# Crash loops with SIGKILL, the API fuzzed from its OpenAPI document, a locked store.
faults: $(STAMP)
	$(BIN)/python -m pytest -m faults

# A real Hermes Agent 0.19.0 gateway, in its own venv, against the tests' scripted model.
$(HERMES_STAMP):
	$(PYTHON) -m venv --clear $(HERMES_VENV)
	$(HERMES_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(HERMES_VENV)/bin/python -m pip install --quiet 'hermes-agent==0.19.0' aiohttp
	touch $(HERMES_STAMP)

interop: $(STAMP) $(HERMES_STAMP)
	BACKCHANNEL_REQUIRE_HERMES=1 $(BIN)/python -m pytest -m interop tests/interop

bench: $(STAMP)
	$(BIN)/python bench/run.py

bench-hermes: $(STAMP) $(HERMES_STAMP)
	$(BIN)/python bench/hermes.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) $(HERMES_VENV) build *.egg-info src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
