#!/usr/bin/env bash
# What the Q1 benchmark compares Hermod with, installed from Debian and built locally:
#   - RabbitMQ 3.10 (`rabbitmq-server`, its AMQP 1.0 plugin is enabled per run by benchmarks/q1.py)
#   - the Proton C example broker, compiled from the sources in `libqpid-proton11-dev-examples`
#     against Debian's libqpid-proton into benchmarks/build/ (gitignored)
# and py-spy into the venv for profiling. Idempotent: does nothing that is already done.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="$here/build"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

need=()
command -v gcc >/dev/null 2>&1 || need+=(gcc)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || need+=(rabbitmq-server)
pkg-config --exists libqpid-proton 2>/dev/null || need+=(libqpid-proton11-dev)
[ -f /usr/share/proton/examples/c/broker.c ] || need+=(libqpid-proton11-dev-examples)
if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing ${need[*]}"
    $SUDO apt-get update -qq
    # policy-rc.d in containers keeps the packaged rabbitmq service from starting; q1.py runs
    # its own private node either way.
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

mkdir -p "$build"
src=/usr/share/proton/examples/c/broker.c
bin="$build/proton-c-broker"
if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ]; then
    echo "setup: building $bin"
    # broker.c includes "thread.h" from its own directory.
    gcc -O2 -o "$bin" "$src" $(pkg-config --cflags --libs libqpid-proton) -lpthread
fi

py="$root/.venv/bin/python"
if [ -x "$py" ] && ! [ -x "$root/.venv/bin/py-spy" ]; then
    "$py" -m pip install -q py-spy || echo "setup: py-spy not installed (only needed for profiling)"
fi
echo "setup: ok"
