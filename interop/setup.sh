#!/usr/bin/env bash
# Installs and builds the interop clients; idempotent, and quick when everything is in place.
#
#   bash interop/setup.sh [rhea] [protonc] [pyproton37] [protoncpp] [amqp10] [azure] [erlang]   (no argument: all; "jms" is an alias of rhea)
#
# rhea:    node + npm (apt-get install nodejs npm when missing), then `npm ci` into
#          interop/rhea/node_modules when it is missing or was installed from another package-lock.json.
# protonc: gcc, make and Debian's Proton C dev package (libqpid-proton<N>-dev) via
#          apt-get when missing, then `make -C interop/protonc` (builds into interop/protonc/build).
# pyproton37: Debian's python3-qpid-proton (0.37) for /usr/bin/python3.
# protoncpp: g++ and Debian's libqpid-proton-cpp12-dev, then `make -C interop/protoncpp`.
# amqp10:  node + npm, then `npm ci` into interop/amqp10/node_modules (like rhea).
# azure:   azure-servicebus (for its _pyamqp) via pip install --target interop/azure/build/site.
# erlang:  escript and the amqp10_client plugin of Debian's rabbitmq-server (apt-get install when missing).
#
# For each component one line on stdout:
#   interop-setup: <component> ready
#   interop-setup: <component> unavailable: <why>      (its toolchain cannot be installed here)
# Exit status: 0 when every component is ready or unavailable, 1 when something failed that
# should have worked (a compile error, a broken lockfile, ...).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT

# One setup at a time (make test and a pytest session may both call this).
if command -v flock >/dev/null 2>&1; then
    exec 9<"${BASH_SOURCE[0]}"
    flock 9
fi

if [ "$(id -u)" = 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    SUDO=(none)
fi

APT_UPDATED=0
# apt_install PKG...: install Debian packages; refresh the package lists once if the first try fails.
apt_install() {
    command -v apt-get >/dev/null 2>&1 || { echo "no apt-get on this machine" >"$LOG"; return 1; }
    [ "${SUDO[0]:-}" = none ] && { echo "not root and no password-less sudo" >"$LOG"; return 1; }
    local apt=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -qq -o Dpkg::Use-Pty=0)
    if "${apt[@]}" install --no-install-recommends "$@" >"$LOG" 2>&1; then return 0; fi
    if [ "$APT_UPDATED" = 0 ]; then
        APT_UPDATED=1
        "${SUDO[@]}" apt-get update -qq >"$LOG" 2>&1 || return 1
        "${apt[@]}" install --no-install-recommends "$@" >"$LOG" 2>&1 && return 0
    fi
    return 1
}

last_log_line() { tail -n 3 "$LOG" | tr '\n' ' ' | sed 's/  */ /g'; }

FAILED=0
ready() { echo "interop-setup: $1 ready"; }
unavailable() { echo "interop-setup: $1 unavailable: $2"; }
failed() { echo "interop-setup: $1 failed: $2"; FAILED=1; }

# setup_npm COMPONENT DIR PACKAGE: node + npm, then `npm ci` in DIR unless DIR/node_modules/PACKAGE
# is there from the same package-lock.json.
setup_npm() {
    local component="$1" dir="$HERE/$2" package="$3"
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        if ! apt_install nodejs npm; then
            unavailable "$component" "node/npm missing and apt-get install nodejs npm failed: $(last_log_line)"
            return
        fi
    fi
    # node_modules matches the lockfile when the copy npm ci left there is the same file
    local stamp="$dir/node_modules/.hermod-installed-lock.json"
    if [ -f "$dir/node_modules/$package/package.json" ] && cmp -s "$stamp" "$dir/package-lock.json"; then
        ready "$component"
        return
    fi
    if (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >"$LOG" 2>&1; then
        cp "$dir/package-lock.json" "$stamp"
        ready "$component"
    elif grep -qiE "ENOTFOUND|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|network" "$LOG"; then
        unavailable "$component" "npm ci cannot reach the npm registry: $(last_log_line)"
    else
        failed "$component" "npm ci: $(last_log_line)"
    fi
}

setup_rhea() { setup_npm rhea rhea rhea; }

# the amqp10 npm client (node-amqp10), pinned in interop/amqp10/package-lock.json
setup_amqp10() { setup_npm amqp10 amqp10 amqp10; }

proton_dev_installed() {
    # (Debian's libqpid-proton.pc computes a wrong includedir, so ask the compiler, not pkg-config)
    command -v gcc >/dev/null 2>&1 && echo '#include <proton/proactor.h>' | gcc -E -x c - >/dev/null 2>&1
}

# Sets MISSING to the Debian packages the Proton C build still needs.
protonc_missing() {
    MISSING=()
    command -v gcc >/dev/null 2>&1 || MISSING+=(gcc libc6-dev)
    command -v make >/dev/null 2>&1 || MISSING+=(make)
    if ! proton_dev_installed; then
        # Debian names the package after the library's soname: libqpid-proton11-dev on bookworm.
        local pkg
        pkg="$(apt-cache search --names-only '^libqpid-proton[0-9]*-dev$' 2>/dev/null | awk '{print $1}' | sort -V | tail -n 1)"
        MISSING+=("${pkg:-libqpid-proton11-dev}")
    fi
}

setup_protonc() {
    protonc_missing
    if [ "${#MISSING[@]}" -gt 0 ] && ! apt_install "${MISSING[@]}"; then
        # apt_install refreshed the package lists: the dev package's name may read differently now
        local before="${MISSING[*]}"
        protonc_missing
        if [ "${MISSING[*]}" = "$before" ] || ! apt_install "${MISSING[@]}"; then
            unavailable protonc "apt-get install ${MISSING[*]} failed: $(last_log_line)"
            return
        fi
    fi
    if make -s -C "$HERE/protonc" >"$LOG" 2>&1; then
        ready protonc
    else
        failed protonc "make -C interop/protonc: $(last_log_line)"
    fi
}

# Debian's Python 3 with its own Proton (0.37 on bookworm): run as /usr/bin/python3, outside the venv.
setup_pyproton37() {
    if ! /usr/bin/python3 -c 'import proton' >/dev/null 2>&1 && ! apt_install python3-qpid-proton; then
        unavailable pyproton37 "apt-get install python3-qpid-proton failed: $(last_log_line)"
        return
    fi
    if /usr/bin/python3 -c 'import proton, sys; sys.exit(proton.VERSION[:2] != (0, 37))' >/dev/null 2>&1; then
        ready pyproton37
    else
        failed pyproton37 "/usr/bin/python3's proton is not 0.37: $(/usr/bin/python3 -c 'import proton; print(proton.VERSION)' 2>&1)"
    fi
}

# Proton C++ (Debian's libqpid-proton-cpp12-dev) and g++; the fidelity client is compiled into
# interop/protoncpp/build.
setup_protoncpp() {
    local missing=()
    command -v g++ >/dev/null 2>&1 || missing+=(g++)
    command -v make >/dev/null 2>&1 || missing+=(make)
    echo '#include <proton/container.hpp>' | g++ -E -x c++ - >/dev/null 2>&1 || missing+=(libqpid-proton-cpp12-dev)
    if [ "${#missing[@]}" -gt 0 ] && ! apt_install "${missing[@]}"; then
        unavailable protoncpp "apt-get install ${missing[*]} failed: $(last_log_line)"
        return
    fi
    if make -s -C "$HERE/protoncpp" >"$LOG" 2>&1; then
        ready protoncpp
    else
        failed protoncpp "make -C interop/protoncpp: $(last_log_line)"
    fi
}

# Azure's pure-Python AMQP stack (azure.servicebus._pyamqp): pip install --target
# interop/azure/build/site with $HERMOD_PYTHON (the Python that will run the client; default python3),
# never into a venv. The stamp records the pin and that Python's version (a compiled dependency).
AZURE_PIN="azure-servicebus==7.15.0"
setup_azure() {
    local py="${HERMOD_PYTHON:-python3}" site="$HERE/azure/build/site" want
    want="$AZURE_PIN $("$py" -c 'import sys; print(sys.version_info[:2])' 2>/dev/null)"
    if [ "$(cat "$site/.hermod-installed" 2>/dev/null)" = "$want" ]; then
        ready azure
        return
    fi
    rm -rf "$site"
    if "$py" -m pip install --quiet --disable-pip-version-check --target "$site" "$AZURE_PIN" >"$LOG" 2>&1; then
        echo "$want" >"$site/.hermod-installed"
        ready azure
    elif ! "$py" -m pip --version >/dev/null 2>&1; then
        unavailable azure "$py has no pip"
    elif grep -qiE "No matching distribution|Could not fetch|Failed to establish|Name or service|timed out" "$LOG"; then
        unavailable azure "pip cannot reach the package index: $(last_log_line)"
    else
        failed azure "pip install $AZURE_PIN: $(last_log_line)"
    fi
}

# Erlang's amqp10_client, the AMQP 1.0 client library inside Debian's rabbitmq-server package (its
# plugins directory); driven by interop/erlang/amqp10_roundtrip.escript. No RabbitMQ server is run.
amqp10_client_present() {
    command -v escript >/dev/null 2>&1 &&
        compgen -G "/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/amqp10_client-*/ebin" >/dev/null
}
setup_erlang() {
    if ! amqp10_client_present && ! apt_install rabbitmq-server; then
        unavailable erlang "apt-get install rabbitmq-server failed: $(last_log_line)"
        return
    fi
    if amqp10_client_present; then
        ready erlang
    else
        failed erlang "rabbitmq-server is installed but has no plugins/amqp10_client-*/ebin (or no escript)"
    fi
}

components=("$@")
[ "${#components[@]}" -eq 0 ] && components=(rhea protonc pyproton37 protoncpp amqp10 azure erlang)
done_rhea=0
for c in "${components[@]}"; do
    case "$c" in
        rhea|jms) [ "$done_rhea" = 1 ] || setup_rhea; done_rhea=1 ;;
        protonc) setup_protonc ;;
        pyproton37) setup_pyproton37 ;;
        protoncpp) setup_protoncpp ;;
        amqp10) setup_amqp10 ;;
        azure) setup_azure ;;
        erlang) setup_erlang ;;
        *) echo "usage: $0 [rhea] [protonc] [jms] [pyproton37] [protoncpp] [amqp10] [azure] [erlang]" >&2; exit 64 ;;
    esac
done
exit "$FAILED"
