# binlake — two commands set up a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JARS   := $(VENV)/delta-jars

.PHONY: setup demo test test-jvm test-big test-pairs test-soak mariadb chromium minio minio-background sample bench clean

setup: $(STAMP) $(JARS)/.fetched

$(STAMP): setup.cfg pyproject.toml
	@echo "setup: creating $(VENV) with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV)
	@echo "setup: upgrading pip"
	@$(PY) -m pip install --quiet --upgrade pip
	@echo "setup: installing binlake and its packages (pyspark, delta-spark, pysail, great-expectations …; ~2 min)"
	@$(PY) -m pip install --quiet -e '.[local,test,assist]'
	touch $(STAMP)

# The Delta jars matching the installed delta-spark, fetched with Maven once (docs/engines.md):
# `--engine spark` and the JVM Spark Connect server use them (engine.delta_jars overrides).
$(JARS)/.fetched: $(STAMP)
	@command -v mvn >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven openjdk-17-jre-headless; }
	@echo "setup: fetching the Delta jars for JVM Spark with Maven into $(JARS)"
	@$(PY) scripts/fetch_delta_jars.py $(JARS)
	touch $@

# A MariaDB server from Debian packages, for the end-to-end tests (installed when missing).
mariadb:
	@command -v mariadbd >/dev/null 2>&1 || command -v /usr/sbin/mariadbd >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server mariadb-client; }

# Headless Chromium renders the quality report in its tests (installed when missing).
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# MinIO (S3 API) for the object-store lease tests: the version pinned in devtools/minio.py,
# built once with Go into a cache outside the clone (~3.5 min on 2 cores; needs Go >= 1.24).
MINIO_VERSION := $(shell sed -n 's/^MINIO_VERSION = "\(.*\)"/\1/p' devtools/minio.py)
MINIO_DIR ?= $(HOME)/.cache/binlake/minio-$(MINIO_VERSION)
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
minio: $(MINIO_DIR)/minio

$(MINIO_DIR)/minio:
	@test -x "$(GO)" || { echo "make minio: Go not found (GO=$(GO)); install Go >= 1.24 from https://go.dev/dl" >&2; exit 1; }
	@echo "minio: building MinIO $(MINIO_VERSION) with Go into $(MINIO_DIR) for the object-store tests (once; ~4-9 min on 2 cores, no output meanwhile)"
	GOBIN=$(MINIO_DIR) $(GO) install github.com/minio/minio@$(MINIO_VERSION)
	@echo "minio: built $(MINIO_DIR)/minio"

# `make test` does not wait for that build: when the binary is missing it starts the build in
# the background (devtools/minio.py: the object-store tests run last and wait for it).
minio-background:
	@if [ ! -x "$(MINIO_DIR)/minio" ] && ! { [ -f "$(MINIO_DIR)/build.pid" ] && \
	    [ ! -f "$(MINIO_DIR)/build.rc" ] && kill -0 $$(cat "$(MINIO_DIR)/build.pid") 2>/dev/null; }; then \
	  test -x "$(GO)" || { echo "make test: Go not found (GO=$(GO)) to build MinIO; install Go >= 1.24 from https://go.dev/dl" >&2; exit 1; }; \
	  mkdir -p "$(MINIO_DIR)"; rm -f "$(MINIO_DIR)/build.rc"; \
	  echo "minio: building MinIO $(MINIO_VERSION) with Go in the background (once; ~4-9 min on 2 cores; log $(MINIO_DIR)/build.log): the object-store tests run last and wait for it"; \
	  ( GOBIN="$(MINIO_DIR)" "$(GO)" install github.com/minio/minio@$(MINIO_VERSION) > "$(MINIO_DIR)/build.log" 2>&1; \
	    echo $$? > "$(MINIO_DIR)/build.rc" ) > /dev/null 2>&1 & echo $$! > "$(MINIO_DIR)/build.pid"; \
	fi

demo: setup
	$(PY) -m pipelines.cli.demo

# Everything but the tests that start a JVM Spark (marked `jvm` by tests/conftest.py), on
# TEST_WORKERS pytest-xdist workers (each starts its own engine, MariaDB and MinIO): the tests
# wait on servers and subprocesses about half the time, so two workers on 2 cores take 14 min
# where one took 25. MinIO's build (a fresh machine's: ~7 min beside the tests) starts first,
# beside the set-up's downloads.
TEST_WORKERS ?= 2
test: minio-background setup mariadb chromium
	BINLAKE_MINIO_BIN=$(MINIO_DIR)/minio $(PY) -m pytest -q -n $(TEST_WORKERS) -m 'not soak and not jvm and not big'

# Runs of 150 MB or more (issue 40: the compiled paths past their thresholds against the
# reference, ~4 min). CI (.ci/run) runs it after make test.
test-big: setup mariadb
	$(PY) -m pytest -q -m 'big and not soak'

# The JVM engines (issue 9): the engine matrix's local-Spark and Spark Connect legs, interop,
# catalog tables, spark-submit, classic conformance. CI (.ci/run) runs it after `make test`.
test-jvm: setup mariadb minio-background
	$(PY) -m pytest -q -m 'jvm and not soak and not big'

# The other Spark + Delta pairs binlake supports (docs/engines.md), each in an environment of
# its own (scripts/engine_pair.py: .venv-pairs/, made once, ~4 min each): the engine matrix's
# JVM legs (local JVM Spark and the Spark Connect server) and the plain-string check (a 4.2
# Connect server collates strings). `make setup` keeps the 4.1.0 pair.
PAIRS ?= 4.0.1:4.0.1 4.2.0:4.4.0
test-pairs: setup mariadb
	@for pair in $(PAIRS); do \
	  py=$$($(PY) scripts/engine_pair.py $$pair) || exit 1; \
	  echo "== pyspark and delta-spark $$pair ($$py)"; \
	  $$py -m pytest -q -m 'jvm and not soak and not big' tests/acceptance/test_engine_matrix.py \
	    tests/lake/test_plain_strings.py || exit 1; \
	done

# The long JVM Spark re-runs (concurrent JVM writers, history on JVM catalog tables).
test-soak: setup mariadb
	$(PY) -m pytest -q -m soak

# Regenerate the shipped sample binlogs with a real MariaDB server (committed under samples/).
sample: setup mariadb
	$(PY) scripts/make_sample_binlog.py samples/binlogs

bench: setup mariadb
	$(PY) bench/bronze_vs_mysql_replication.py
	$(PY) bench/pipeline.py
	$(PY) bench/pipeline.py --workload narrow --mb 147 --stages \
	  mariadb-binlog,silver,silver-no-derive,quality,index,stage-commands,index-command,index-gold
	$(PY) bench/bronze_vs_mysql_replication.py --workload wide --mb 147
	$(PY) bench/pipeline.py --workload wide --mb 147 --stages \
	  mariadb-binlog,bronze-loop-off,silver,index,index-command
	$(PY) bench/engines.py

clean:
	rm -rf $(VENV) lake build *.egg-info
