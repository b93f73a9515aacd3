# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LOCK   := requirements.lock
LATEST := .venv-latest

.PHONY: demo demo-seconds demo-saturation test test-latest lint lock env docs check-java check-python clean

check-python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "streamscale needs Python >= 3.11 (found %s)" % sys.version.split()[0])'

# Reproducible: every install takes the exact versions of the lock file.
$(STAMP): pyproject.toml $(LOCK) | check-python
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c $(LOCK) pip
	$(PY) -m pip install --quiet -c $(LOCK) -e '.[dev,papers]'
	touch $(STAMP)

env: $(STAMP)

check-java:
	@command -v java >/dev/null 2>&1 || { echo "streamscale: Java 17+ is required by Spark and was not found; install it (e.g. 'apt-get install openjdk-17-jre-headless') or set JAVA_HOME" >&2; exit 1; }

# The bundled trace at the 'minutes' deployment (c = 60: trigger 2 min, target 10 min, a
# 60 s start-up emulated at 1 s): the 90 minutes around its 8th day's steepest rise, elastic and
# static-peak, with the oracle. 'make demo-seconds': the 'seconds' deployment, real start-up.
demo: env check-java
	$(VENV)/bin/streamscale traffic --deployment minutes --hours 1.5 --warmup 15 --out report

demo-seconds: env check-java
	$(VENV)/bin/streamscale traffic --deployment seconds --hours 1 --out report-seconds

demo-saturation: env check-java
	$(VENV)/bin/streamscale demo

# Two test processes: most Spark tests wait on JVMs, triggers and clusters more than
# they compute, so two overlap well on two cores (tests/conftest.py).
test: env check-java
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=30

# Drift, on purpose: the newest versions pyproject.toml allows, in a separate environment,
# against the fast tests. A failure here is a dependency to bound or a fix to make.
test-latest: check-python
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --upgrade pip
	$(LATEST)/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[dev,papers]'
	$(LATEST)/bin/python -m pip list --format=freeze > $(LATEST)/versions.txt
	$(LATEST)/bin/python -m pytest -q -p no:cacheprovider -m "not spark and not slow"

# Rewrite the lock from the current environment after a deliberate upgrade.
lock: env
	{ sed -n '1,3p' $(LOCK); echo "pip==$$($(PY) -m pip --version | cut -d' ' -f2)"; \
	  $(PY) -m pip freeze --exclude-editable | grep -v '^-e'; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)

# The documentation site (mkdocs.yml) into site/: warnings are errors; the reference
# pages are generated from the code at build time (docs/hooks.py).
docs: env
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint: env
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

clean:
	rm -rf $(VENV) $(LATEST) report build site *.egg-info
