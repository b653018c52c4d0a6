# Two entry points for people, one for CI:
#   make demo   set up .venv and run the main job on the bundled data
#   make test   set up .venv and run lint, type checks and the whole test suite (.ci/run runs this)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: setup system-packages demo test lint typecheck pytest bench clean browser browser-test portal-screenshots

setup: $(STAMP)

# The venv's pip is upgraded first: the upgrade and a new pip's install took less time
# than the install with Python 3.11's bundled pip (docs/benchmarks.md, "Test suite time").
# Bytecode is compiled once, on every core, after the install (pip compiles on one core;
# left to the suite, its four workers compiled the same modules at once: 14 s more).
$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit("geminibot needs Python 3.11 or newer, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[test,dev]'
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib geminibot capsule_server tests >/dev/null
	$(MAKE) --no-print-directory system-packages
	touch $(STAMP)

# Servers the tests start for real: PostgreSQL (Debian's package; tests run initdb themselves).
system-packages:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  echo "installing PostgreSQL (Debian package postgresql) for the store tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }

demo: $(STAMP)
	$(BIN)/python -m capsule_server.demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Two workers per core: much of the suite waits (servers, subprocesses, a mock clock's
# idle threshold) rather than computes; worksteal evens out the few long tests, which
# start first, one at the head of each worker's share (tests/suite_order.py). Bytecode
# is written even where the environment says not to (PYTHONDONTWRITEBYTECODE), so that
# the workers and the commands the tests start compile each module once, not each time.
# What the suite costs: docs/benchmarks.md, "Test suite time": 180-225 s of CPU for a
# fresh clone's whole make test (venv, install, lint, types and suite), so on 2 cores a
# quiet machine took 119-146 s in all (six runs), pytest 102-124 s of it.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
pytest: $(STAMP) browser
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal

# The lint and the type check run beside the suite (a few seconds of one core, while
# the suite's workers wait on the servers and processes they start).
test: $(STAMP) browser
	@$(MAKE) --no-print-directory -j3 lint typecheck pytest

bench: $(STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info

# Headless Chromium (Debian's chromium) for the portal's browser test: installed when missing.
CHROMIUM ?= chromium
browser:
	@command -v $(CHROMIUM) >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	{ [ "$$(id -u)" = 0 ] || { echo "make browser: chromium is missing; install the Debian package chromium as root" >&2; exit 1; }; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }

browser-test: $(STAMP) browser
	$(BIN)/python -m pytest tests/portal/test_portal_browser.py

portal-screenshots: $(STAMP) browser
	GEMINIBOT_SCREENSHOTS=docs $(BIN)/python -m pytest tests/portal/test_portal_browser.py

# make fuzz: every fuzz target under atheris (libFuzzer) for FUZZ_SECONDS each, FUZZ_JOBS
# at once, at the lowest CPU priority; executions per target are printed at the end.
FUZZ_SECONDS ?= 60
FUZZ_JOBS    ?= 2
FUZZ_STAMP    = $(VENV)/.installed-fuzz

.PHONY: fuzz

$(FUZZ_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[fuzz]'
	touch $(FUZZ_STAMP)

fuzz: $(FUZZ_STAMP)
	nice -n 19 $(BIN)/python -m fuzz --seconds $(FUZZ_SECONDS) --jobs $(FUZZ_JOBS)
