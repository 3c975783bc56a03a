# kraft-jbod: the two commands of the README, plus the pieces they are made of.
# Both main targets install what they need into .venv on a fresh machine.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test check lint typecheck importlint unit system-deps kafka-oracle kafka-broker clean

# setup.py builds the optional compiled codec (kraft_jbod/_accel); a change to it reinstalls.
$(STAMP): pyproject.toml setup.py kraft_jbod/_accel/_ccodec.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[all,test]'
	touch $(STAMP)

# The main job on embedded defaults.
run: $(STAMP)
	$(VENV)/bin/kraft-jbod demo

# Everything CI runs.
test: $(STAMP) system-deps kafka-oracle kafka-broker lint typecheck importlint unit

# tshark is the reference dissector some capture tests compare against.
system-deps:
	@command -v tshark >/dev/null 2>&1 || { \
		echo "installing tshark (Debian package)"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq tshark >/dev/null; }

# Apache Kafka 4.4 compiled from ../shared/kafka/ into .cache/kafka-4.4 for the interop tests
# (tests/interop/, docs/interop.md). Rebuilt only when missing or older than the tarball
# (about 0.3 s otherwise). Without that package it says how to get it and the interop tests
# skip; under CI=true that is an error.
kafka-oracle: $(STAMP)
	$(PY) -m tools.kafka_oracle build -p $(VENV)

# Apache Kafka 4.4's whole broker (and Kafka's own KRaft controller) compiled from
# ../shared/kafka/ for the real-broker tests (tests/realbrokers/, docs/real-brokers.md). Cached
# under ~/.cache/kraft-jbod/ by a hash of the source package, so fresh clones on the same
# machine reuse it (1.5-4 minutes on 2 cores when it is built). Without that package it says
# how to get it and the real-broker tests skip; under CI=true that is an error.
kafka-broker: $(STAMP)
	$(PY) -m tools.kafka_broker build -p $(VENV)

lint: $(STAMP)
	$(VENV)/bin/ruff check kraft_jbod tools tests
	$(VENV)/bin/ruff format --check kraft_jbod tools tests

typecheck: $(STAMP)
	$(VENV)/bin/mypy kraft_jbod tools

importlint: $(STAMP)
	$(VENV)/bin/lint-imports

# The whole suite runs on the default codec (the compiled one when it built); the codec
# suite and the Java differential tests run again on the pure-Python reference codec; the
# compiled codec's tests and the snapshot restore tests run once more on a build under
# AddressSanitizer and UndefinedBehaviorSanitizer (tools/accel_sanitize.py, 3-4 minutes).
unit: $(STAMP)
	$(PY) -m pytest -q
	KRAFT_JBOD_CODEC=python $(PY) -m pytest -q tests/codec
	$(PY) -m tools.accel_sanitize

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache .hypothesis
