# The README's commands. `make demo` and `make test` install everything they need first
# (a virtualenv with lakelog and its pinned pyspark/delta-spark, and Delta's JVM jars).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.lakelog-installed
PYTEST_ARGS ?=
LOCK := requirements.lock
LOCK_EXTRAS := --extra test --extra demo --extra docs

# Spark finds format("lakelog") by listing the top-level modules on the Python path (pkgutil.iter_modules)
# for one named pyspark_*; an editable install maps lakelog and pyspark_lakelog through an import hook
# that listing does not see. A .pth line puts plugins/ on the path, so a plain spark-submit job run with
# this venv's Python finds the source as it does in a wheel install.
define SPARK_PLUGIN_PTH
import pathlib, sysconfig
pth = pathlib.Path(sysconfig.get_path("purelib"), "lakelog-spark-plugin.pth")
pth.write_text(str(pathlib.Path("plugins").resolve()) + "\n")
endef
export SPARK_PLUGIN_PTH

.PHONY: install lock demo test test-fast docs bench bench-latency pyfiles clean

# Installs pin every package to requirements.lock (hash-checked), so a fresh machine gets the versions CI
# last ran with; pyproject.toml keeps ranges for users who install the wheel. `make lock` renews the lock.
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/pip install --quiet --no-deps -e .
	$(BIN)/pip check
	$(BIN)/python -c "$$SPARK_PLUGIN_PTH"
	$(BIN)/lakelog setup
	touch $(STAMP)

install: $(STAMP)

# Renew requirements.lock from pyproject.toml's ranges (newest versions that fit, for Python 3.11+, with
# hashes); tests/test_lock.py checks that the lock still satisfies pyproject.toml.
lock:
	test -x $(BIN)/pip || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet 'uv>=0.9'
	$(BIN)/uv pip compile pyproject.toml $(LOCK_EXTRAS) --universal --python-version 3.11 --generate-hashes \
		--custom-compile-command 'make lock' --quiet -o $(LOCK)

demo: install
	$(BIN)/lakelog demo

# Everything: unit, gateway, Spark and cluster tests (what CI runs).
# Two steps: every test but the spark-marked ones on two workers (pytest-xdist; each takes whole test files,
# --dist loadfile, so a module-scoped cluster serves its module on one worker), then the spark-marked tests
# in one process, in file order, sharing one SparkSession as they always did. Exit code 5 (no test
# selected, e.g. PYTEST_ARGS naming a file without Spark tests) counts as success. TEST_WORKERS=0 runs
# everything in one process.
TEST_WORKERS ?= 2
test: install
ifeq ($(TEST_WORKERS),0)
	$(BIN)/pytest $(PYTEST_ARGS)
else
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile -m "not spark" $(PYTEST_ARGS); parallel=$$?; \
	$(BIN)/pytest -m spark $(PYTEST_ARGS); spark=$$?; \
	echo "make test: parallel step exit $$parallel, spark step exit $$spark"; \
	[ $$parallel -eq 0 -o $$parallel -eq 5 ] && [ $$spark -eq 0 -o $$spark -eq 5 ]
endif

# Fast tests only: no SparkSession, no broker kills, no wheel install.
test-fast: install
	$(BIN)/pytest -m "not spark and not cluster and not install" $(PYTEST_ARGS)

# The documentation site (mkdocs.yml) into site/. The docs extra (mkdocs, mkdocs-material) is in
# LOCK_EXTRAS, so `make install` puts it into the venv at the locked versions. --strict: any warning (a
# broken link or anchor, a setting without a description) fails. Not --quiet: MkDocs counts only the
# warnings it logs, so --strict --quiet passes a broken link. NO_MKDOCS_2_WARNING silences
# mkdocs-material's banner about its successor.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: install
	$(BIN)/python bench/produce_fetch.py

# Latency (ack, produce -> fetched, history, lake freshness, CPU per request); options via LATENCY_ARGS,
# e.g. make bench-latency LATENCY_ARGS="--quick" (--profile needs py-spy: pip install -e '.[bench]').
LATENCY_ARGS ?=
bench-latency: install
	$(BIN)/python bench/latency.py $(LATENCY_ARGS)

# lakelog's own code as one zip for `spark-submit --py-files build/lakelog.zip`, for Spark executors whose
# Python has lakelog's dependencies (pyarrow, deltalake, httpx, ...) but not lakelog (docs/spark.md, "Running
# on a Spark cluster"). `zip -r` writes directory entries, which Python needs to import the namespace package
# `lakelog` from a zip (a wheel has none).
pyfiles:
	rm -rf build/pyfiles build/lakelog.zip
	mkdir -p build/pyfiles
	ln -s ../../platform build/pyfiles/lakelog
	ln -s ../../plugins/pyspark_lakelog build/pyfiles/pyspark_lakelog
	cd build/pyfiles && zip -qr ../lakelog.zip lakelog pyspark_lakelog -x '*__pycache__*'

clean:
	rm -rf data/demo .pytest_cache site
