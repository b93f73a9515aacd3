# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint env check-java clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "streamscale needs Python >= 3.11 (found %s)" % sys.version.split()[0])'
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

env: $(STAMP)

check-java:
	@command -v java >/dev/null 2>&1 || { echo "streamscale: Java 17+ is required by Spark and was not found; install it (e.g. 'apt-get install openjdk-17-jre-headless') or set JAVA_HOME" >&2; exit 1; }

demo: env check-java
	$(VENV)/bin/streamscale demo

test: env check-java
	$(PY) -m pytest -q -p no:cacheprovider

lint: env
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

clean:
	rm -rf $(VENV) report build *.egg-info
