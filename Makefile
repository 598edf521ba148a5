# Hermod: `make run` runs the broker on the embedded default, `make test` installs everything the
# tests need (Python packages, and system packages where missing) and runs the whole suite.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: check run test test-fast install system-deps java openwire-java interop-deps rabbitmq-deps bench crash-storm floods ha-bench dist dist-check clean console-deps console-screenshot permission-matrix mqtt-deps activemq-deps bench-openwire bench-stomp stomp-deps

# The broker alone for `make run`; the test and Spark extras (pyspark is large) for `make test`.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[test,spark]'
	touch $(TEST_STAMP)

DIST_STAMP := $(VENV)/.installed-dist
$(DIST_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[dist,postgresql]'
	touch $(DIST_STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/hermod run

# PostgreSQL server binaries for the store tests (the fixture starts a private cluster).
system-deps:
	@if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "installing PostgreSQL server binaries"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	fi
	@if ! command -v groff >/dev/null 2>&1; then \
		echo "installing groff (the man page test renders hermod.1)"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq groff-base >/dev/null; \
	fi

# A Java runtime for Spark (the data pipeline tests): 17 or 21, installed only where missing.
java:
	@if ! java -version 2>&1 | grep -Eq 'version "(17|21)[."]'; then \
		echo "installing a Java 17 runtime for Spark"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	fi

# The ActiveMQ Classic client library and a JDK for the OpenWire golden-vector tests
# (tests/openwire compile a small Java program with plain javac against Debian's jars).
openwire-java:
	@if ! [ -f /usr/share/java/activemq-client.jar ] || ! [ -f /usr/share/java/geronimo-jms_1.1_spec.jar ] || ! [ -f /usr/share/java/geronimo-j2ee-management-1.1-spec.jar ] || ! command -v javac >/dev/null 2>&1; then \
		echo "installing libactivemq-java and openjdk-17-jdk-headless for the OpenWire tests"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libactivemq-java libgeronimo-jms-1.1-spec-java libgeronimo-j2ee-management-1.1-spec-java openjdk-17-jdk-headless >/dev/null; \
	fi

# Mosquitto 2.0 for the MQTT golden packets (tests/mqtt: paho-mqtt talks to it through a
# recording proxy) and its command-line clients (mosquitto_pub / mosquitto_sub), where missing;
# mqtt.js into interop/mqttjs/node_modules (npm ci, when missing). The package's own service is
# not used.
mqtt-deps:
	@if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ] || ! command -v mosquitto_pub >/dev/null 2>&1; then \
		echo "installing mosquitto and mosquitto-clients for the MQTT tests"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 \
			apt-get install -y -qq --no-install-recommends mosquitto mosquitto-clients >/dev/null; \
	fi
	@if [ ! -d interop/mqttjs/node_modules/mqtt ]; then \
		echo "installing mqtt.js for the MQTT tests"; \
		cd interop/mqttjs && npm ci --silent --no-audit --no-fund; \
	fi

# STOMP clients of other languages (tests/stomp/test_stomp_other_clients.py), where missing:
# Debian's ruby-stomp, and @stomp/stompjs with Node's ws in interop/stompjs/node_modules; and
# Debian's ActiveMQ 5.17.2 for tests/stomp/test_stomp_vs_classic.py (its own service is not used).
stomp-deps: activemq-deps
	@if ! [ -f /usr/lib/ruby/vendor_ruby/stomp.rb ]; then \
		echo "installing ruby-stomp for the STOMP tests"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends ruby-stomp >/dev/null; \
	fi
	@if ! command -v npm >/dev/null 2>&1; then \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
	fi
	@if ! [ -d interop/stompjs/node_modules/@stomp/stompjs ] || ! [ -d interop/stompjs/node_modules/ws ]; then \
		echo "installing @stomp/stompjs and ws into interop/stompjs"; \
		cd interop/stompjs && npm ci --no-audit --no-fund --silent; \
	fi

# Headless Chromium and its WebDriver for the console tests (tests/console), where missing.
console-deps:
	@if ! command -v chromedriver >/dev/null 2>&1 || ! [ -x /usr/bin/chromium ]; then \
		echo "installing chromium and chromium-driver for the console tests"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

# docs/console.png: the console with real data, taken by the console tests' browser.
console-screenshot: $(TEST_STAMP) console-deps
	HERMOD_CONSOLE_SCREENSHOT=docs/console.png $(VENV)/bin/pytest -q tests/console -k screenshot

# RabbitMQ 3.10 from Debian for the bridge tests (tests/bridge/ start a private node with the
# AMQP 1.0 plugin); installed only where missing. The package's own service is not used.
rabbitmq-deps:
	@if ! command -v rabbitmq-server >/dev/null 2>&1 && [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then \
		echo "installing rabbitmq-server"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 \
			apt-get install -y -qq --no-install-recommends rabbitmq-server >/dev/null; \
	fi

# ActiveMQ Classic 5.17.2 from Debian as a peer for the OpenWire and STOMP comparisons
# (tests/peers/classic.py starts private instances; benchmarks/openwire_stomp_bench.py), where
# missing. Its own service must not start: a policy-rc.d refusing every start while apt runs.
activemq-deps:
	@if ! [ -f /usr/share/activemq/bin/activemq.jar ]; then \
		echo "installing activemq (ActiveMQ Classic) without starting its service"; \
		had_policy=0; [ -e /usr/sbin/policy-rc.d ] && had_policy=1; \
		if [ $$had_policy = 0 ]; then printf '#!/bin/sh\nexit 101\n' | $(SUDO) tee /usr/sbin/policy-rc.d >/dev/null; $(SUDO) chmod 755 /usr/sbin/policy-rc.d; fi; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 \
			apt-get install -y -qq --no-install-recommends activemq >/dev/null; rc=$$?; \
		if [ $$had_policy = 0 ]; then $(SUDO) rm -f /usr/sbin/policy-rc.d; fi; \
		exit $$rc; \
	fi

# Clients in other languages for the interop tests (npm packages, Proton C); fast when present.
interop-deps:
	HERMOD_PYTHON=$(VENV)/bin/python bash interop/setup.sh

# Static checks: lint, the layering rules of style.md as import-linter contracts, and mypy on the
# core and the store (both configured in pyproject.toml).
check: $(TEST_STAMP)
	$(VENV)/bin/ruff check broker store migrations tests benchmarks pipeline hermod packaging
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

test: $(TEST_STAMP) check system-deps java openwire-java interop-deps console-deps rabbitmq-deps mqtt-deps activemq-deps stomp-deps
	$(VENV)/bin/pytest -q --durations=25

# The inner loop (a few minutes): static checks, the core, selectors, protocol detection, the
# codecs and message mappings (not the adapters' live tests), permissions; no PostgreSQL, browser, Java or npm needed.
FAST_TESTS := tests/core tests/selector tests/frontdoor tests/mapping tests/openwire/test_negotiation.py tests/openwire/test_openwire_roundtrip.py tests/openwire/test_openwire_hostile.py tests/stomp/test_stomp_codec.py tests/stomp/test_stomp_parser.py tests/stomp/test_stomp_hostile.py tests/mqtt/test_topics.py tests/mqtt/test_mqtt_roundtrip.py tests/mqtt/test_properties_roundtrip.py tests/mqtt/test_mqtt_hostile.py tests/security/test_permissions.py
test-fast: $(TEST_STAMP) check
	$(VENV)/bin/pytest -q -x $(FAST_TESTS)

# Issue 28: the permission matrix alone (it is in `make test` too): every operation x entry path,
# a user that may and one that may not (tests/security/permission_matrix.py).
permission-matrix: $(TEST_STAMP)
	$(VENV)/bin/pytest -q tests/security/test_permission_matrix.py

bench: $(TEST_STAMP) system-deps
	$(PY) benchmarks/bench.py --setup $(BENCH_ARGS)

# Issues 30 and 31: the same load generators (the stock ActiveMQ JMS client, Classic's own
# StompConnection) against ActiveMQ Classic 5.17.2 and Hermod in one run, interleaved, medians of
# 3, broker CPU and RSS (benchmarks/openwire_stomp_bench.py; OWBENCH_ARGS adds options, e.g.
# "--count 20000 --reps 1"). Not in `make test`.
bench-openwire: $(TEST_STAMP) openwire-java activemq-deps
	$(PY) benchmarks/openwire_stomp_bench.py --protocols openwire,amqp $(OWBENCH_ARGS)

bench-stomp: $(TEST_STAMP) openwire-java activemq-deps rabbitmq-deps
	$(PY) benchmarks/openwire_stomp_bench.py --protocols stomp $(OWBENCH_ARGS)

# Issue 12's long checks (minutes each; not in `make test`): >= 50 SIGKILLs per back-end during
# mixed durable traffic, and the bystander's round trip and the broker's RSS under each flood.
# Issue 28 adds two modes: two cluster nodes (PostgreSQL) and a bridged pair of brokers.
CRASH_STORM_KILLS ?= 50
CRASH_STORM_MODES ?= single cluster bridge
crash-storm: $(TEST_STAMP) system-deps
	$(PY) benchmarks/crash_storm.py --kills $(CRASH_STORM_KILLS) --mode $(CRASH_STORM_MODES)

floods: $(TEST_STAMP)
	$(PY) benchmarks/floods.py

# Issue 19: takeover times of shared-store HA (median and worst of 20 SIGKILLs of the live
# broker), and with 1M messages in the store. Minutes; not in `make test`.
ha-bench: $(TEST_STAMP) system-deps
	$(PY) benchmarks/ha_takeover.py

# dist/hermod: one executable file (PyInstaller one-file; see packaging/hermod.spec and README).
dist: $(DIST_STAMP)
	cd packaging && ../$(VENV)/bin/pyinstaller --noconfirm --clean --log-level WARN \
		--distpath ../dist --workpath ../build/pyinstaller hermod.spec
	@ls -l dist/hermod

# Runs the wheel (clean venv) and dist/hermod (env -i, no Python on PATH) as a user would, and
# prints their footprint side by side (dist/footprint.json). `.ci/run` calls it after `make test`.
dist-check: dist
	$(PY) packaging/dist_check.py

clean:
	rm -rf $(VENV) build dist *.egg-info
