"""[[bridge]] over TLS (amqps://, verified against [tls] ca, or the system's CAs without it),
and each bridge's state, forwarded count and backlog in /metrics."""
from __future__ import annotations

import re
import shutil
import sys
import urllib.request
from pathlib import Path

import pytest
from proton import SSLDomain

from bridge_testing import REMOTE_CONFIG, bridge_row, bridged_queue_config, numbered, read_all, send_all
from hermod_testing import wait_for

sys.path.insert(0, str(Path(__file__).parent.parent / "security"))
from certs import make_all  # noqa: E402


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")
    return make_all(tmp_path_factory.mktemp("pki"))


def _tls(pki) -> str:
    return f'[tls]\ncert = "{pki / "server.crt"}"\nkey = "{pki / "server.key"}"\nca = "{pki / "ca.crt"}"\n'


def _tls_remote(run_broker, pki):
    return run_broker("remote", "[server]\ntls = true\n" + _tls(pki) + REMOTE_CONFIG)


def test_forwards_over_tls_verified_against_the_configured_ca(run_broker, pki):
    remote = _tls_remote(run_broker, pki)
    port = remote.url.rsplit(":", 1)[1]
    local = run_broker("local", bridged_queue_config(f"amqps://localhost:{port}", extra=_tls(pki)))
    assert send_all(local.url, "outbound", numbered(20)) == 20
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(pki / "ca.crt"))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER)
    got = read_all(f"amqps://localhost:{port}", "inbound", 20, ssl_domain=domain)
    assert [m.properties["n"] for m in got] == list(range(20))


def test_a_remote_certificate_nobody_vouches_for_is_refused(run_broker, pki):
    remote = _tls_remote(run_broker, pki)
    port = remote.url.rsplit(":", 1)[1]
    local = run_broker("local", bridged_queue_config(f"amqps://localhost:{port}"))  # system CAs only
    wait_for(lambda: bridge_row(local.url)["state"] == "backoff", message="bridge refusing the remote")
    row = bridge_row(local.url)
    assert "certificate" in row["last_error"].lower(), row
    assert row["forwarded"] == 0


def _http_url(broker) -> str:
    for line in broker.stdout_lines:
        m = re.search(r"hermod http on (https?://\S+)", line)
        if m:
            return m.group(1)
    raise AssertionError("no 'hermod http on' line")


def _metric(text: str, name: str) -> str:
    m = re.search(rf'^{re.escape(name)} (\S+)$', text, re.M)
    assert m, f"{name} not in /metrics"
    return m.group(1)


def test_metrics_show_state_forwarded_and_backlog(run_broker, tmp_path):
    remote = run_broker("remote", REMOTE_CONFIG)
    local = run_broker("local", bridged_queue_config(remote.url), http=True)
    assert send_all(local.url, "outbound", numbered(7)) == 7
    read_all(remote.url, "inbound", 7)
    wait_for(lambda: bridge_row(local.url)["forwarded"] == 7, message="all forwarded")

    def metrics() -> str:
        return urllib.request.urlopen(_http_url(local) + "/metrics", timeout=10).read().decode()
    text = metrics()
    label = '{bridge="to-remote"}'
    assert _metric(text, f"hermod_bridge_up{label}") == "1"
    assert _metric(text, f"hermod_bridge_forwarded_total{label}") == "7"
    assert _metric(text, f"hermod_bridge_backlog{label}") == "0"
    assert _metric(text, 'hermod_bridge_state{bridge="to-remote",state="up"}') == "1"
    remote.kill()
    wait_for(lambda: _metric(metrics(), f"hermod_bridge_up{label}") == "0", message="up goes to 0")
    assert send_all(local.url, "outbound", numbered(3)) == 3
    assert _metric(metrics(), f"hermod_bridge_backlog{label}") == "3"
