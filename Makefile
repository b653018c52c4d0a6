# Two entry points for people, one for CI:
#   make demo   set up .venv and run the main job on the bundled data
#   make test   set up .venv and run lint, type checks and the whole test suite (.ci/run runs this)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: setup system-packages demo test lint typecheck pytest bench clean browser browser-test portal-screenshots census-screenshot

setup: $(STAMP)

# The venv is made without pip. uv (Astral's installer, from PyPI) installs the project,
# its extras and a current pip into it: put into the venv by the interpreter's own pip
# (2 s), it resolves, downloads and unpacks in parallel and installs in 3 s what pip
# installed in 13 s (docs/benchmarks.md, "Test suite time"). Where uv cannot be had or
# cannot reach PyPI, pip installs everything as before: a current pip first (1.4 s; the
# interpreter's own, else ensurepip's), then the project. Bytecode is compiled once, on
# every core, after the install (left to the suite, its four workers compiled the same
# modules at once: 14 s more), but not for what the suite never imports (pip, uv,
# setuptools, the type checker, test folders of the packages).
NOT_IMPORTED = '/site-packages/(pip|uv|setuptools|pkg_resources|_distutils_hack|mypy|mypyc|pygments)/|/site-packages/.*/tests?/'
$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit("geminibot needs Python 3.11 or newer, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	{ $(PYTHON) -m pip --python $(BIN)/python install --quiet --no-compile uv 2>/dev/null && \
	  $(BIN)/uv pip install --quiet --python $(BIN)/python pip -e '.[test,dev]'; } || \
	{ echo "uv did not install the project: pip installs it"; \
	  $(PYTHON) -m pip --python $(BIN)/python install --quiet --no-compile --upgrade pip 2>/dev/null || \
	  { $(BIN)/python -m ensurepip --default-pip && $(BIN)/python -m pip install --quiet --no-compile --upgrade pip; }; \
	  $(BIN)/python -m pip install --quiet --no-compile -e '.[test,dev]'; }
	$(BIN)/python -m compileall -q -j 0 -x $(NOT_IMPORTED) $(VENV)/lib >/dev/null
	$(BIN)/python -m compileall -q -j 0 geminibot capsule_server tests >/dev/null
	touch $(STAMP)

# Servers and programs the tests start for real, from Debian's packages, in one apt-get
# when any is missing: PostgreSQL (the tests run initdb themselves) and headless
# Chromium (the portal's browser test).
CHROMIUM ?= chromium
system-packages:
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="postgresql"; \
	command -v $(CHROMIUM) >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  missing="$$missing chromium"; \
	[ -z "$$missing" ] || { \
	  [ "$$(id -u)" = 0 ] || { echo "make: missing Debian packages:$$missing (install them as root)" >&2; exit 1; }; \
	  echo "installing Debian packages for the tests:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; }

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
# The test modules are collected once before the workers start: that writes pytest's
# assertion-rewritten bytecode, which each of the four workers otherwise made again at
# once (3.6 s of CPU each on a fresh clone).
# A fresh clone's whole make test took 104-111 s on a quiet 2-core Intel machine, 157-169 s
# of CPU; 131-141 s later the same day, when the same machine ran the same tree 29% slower;
# 178-192 s on a quiet 2-core AMD EPYC machine, 319-342 s of CPU: the suite is CPU-bound
# (docs/benchmarks.md, "Test suite time").
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
pytest: $(STAMP) system-packages
	@out=$$(PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest --collect-only -q -p no:xdist 2>&1) || \
	  { echo "$$out"; exit 1; }
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal

# The Debian packages (when missing) are installed beside the Python ones; the lint and
# the type check run beside the suite (a few seconds of one core, while the suite's
# workers wait on the servers and processes they start).
test:
	@$(MAKE) --no-print-directory -j2 setup system-packages
	@$(MAKE) --no-print-directory -j3 lint typecheck pytest

bench: $(STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info

browser: system-packages

browser-test: $(STAMP) system-packages
	$(BIN)/python -m pytest tests/portal/test_portal_browser.py

portal-screenshots: $(STAMP) system-packages
	GEMINIBOT_SCREENSHOTS=docs $(BIN)/python -m pytest tests/portal/test_portal_browser.py

census-screenshot: $(STAMP) system-packages
	GEMINIBOT_SCREENSHOTS=docs $(BIN)/python -m pytest -p no:xdist tests/census/test_census_browser.py

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
