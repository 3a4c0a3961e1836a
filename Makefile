# The README's commands. `make demo` and `make test` install everything they need first
# (a virtualenv with lakelog and its pinned pyspark/delta-spark, and Delta's JVM jars).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.lakelog-installed
PYTEST_ARGS ?=

.PHONY: install demo test test-fast bench bench-latency pyfiles clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,demo]'
	$(BIN)/lakelog setup
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/lakelog demo

# Everything: unit, gateway, Spark and cluster tests (what CI runs).
test: install
	$(BIN)/pytest $(PYTEST_ARGS)

# Fast tests only: no SparkSession, no broker kills.
test-fast: install
	$(BIN)/pytest -m "not spark and not cluster" $(PYTEST_ARGS)

bench: install
	$(BIN)/python bench/produce_fetch.py

# Latency (ack, produce -> fetched, history, lake freshness, CPU per request); options via LATENCY_ARGS,
# e.g. make bench-latency LATENCY_ARGS="--quick" (--profile needs py-spy: pip install -e '.[bench]').
LATENCY_ARGS ?=
bench-latency: install
	$(BIN)/python bench/latency.py $(LATENCY_ARGS)

# lakelog's own code as one zip for `spark-submit --py-files build/lakelog.zip`, for Spark executors whose
# Python has lakelog's dependencies (pyarrow, deltalake, httpx, ...) but not lakelog (README, "Running on a
# Spark cluster"). `zip -r` writes directory entries, which Python needs to import the namespace package
# `lakelog` from a zip (a wheel has none).
pyfiles:
	rm -rf build/pyfiles build/lakelog.zip
	mkdir -p build/pyfiles
	ln -s ../../platform build/pyfiles/lakelog
	ln -s ../../plugins/pyspark_lakelog build/pyfiles/pyspark_lakelog
	cd build/pyfiles && zip -qr ../lakelog.zip lakelog pyspark_lakelog -x '*__pycache__*'

clean:
	rm -rf data/demo .pytest_cache
