"""Cluster nodes whose listeners require TLS and a SASL login: the node-to-node links log in as
`[ha] cluster_user` (password from `cluster_password_env`) over amqps://, verified against
`[tls] ca`; a node with the wrong password has its forwards refused, and the producer's send
is rejected, never accepted."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from proton import Disposition, SSLDomain

from cluster_testing import followed, receive, redirected, refusal_of_send, send
from hermod.broker.security.passwords import hash_password
from hermod_testing import wait_for

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "security"))
from certs import make_all  # noqa: E402

APP_PW, NODE_PW = "app-pw-1", "node-pw-2"
PASSWORD_ENV = "HERMOD_TEST_CLUSTER_PASSWORD"

SECURITY = f"""[security]
anonymous = false
[[security.user]]
name = "app"
password_hash = "{hash_password(APP_PW, iterations=64)}"
roles = ["app"]
[[security.user]]
name = "cluster"
password_hash = "{hash_password(NODE_PW, iterations=64)}"
roles = ["node"]
[[security.permission]]
match = "#"
send = ["app", "node"]
consume = ["app"]
browse = ["app"]
create_address = ["app"]
create_durable_queue = ["app"]
"""


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")
    return make_all(tmp_path_factory.mktemp("pki"))


def _secure_node(cluster_nodes, monkeypatch, pki, name: str, url: str, password: str):
    monkeypatch.setenv(PASSWORD_ENV, password)  # read by the node at start
    return cluster_nodes(
        name, url, server="tls = true\n",
        ha=f'cluster_user = "cluster"\ncluster_password_env = "{PASSWORD_ENV}"\n',
        extra=(f'[tls]\ncert = "{pki / "server.crt"}"\nkey = "{pki / "server.key"}"\n'
               f'ca = "{pki / "ca.crt"}"\n' + SECURITY))


def _app(pki) -> dict:
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(pki / "ca.crt"))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER)
    return {"ssl_domain": domain, "user": "app", "password": APP_PW, "allowed_mechs": "PLAIN"}


def test_tls_and_sasl_nodes_forward_sends_and_redirect_consumers(scale_db, cluster_nodes,
                                                                 monkeypatch, pki):
    cluster, database, url = scale_db
    a = _secure_node(cluster_nodes, monkeypatch, pki, "node-a", url, NODE_PW)
    b = _secure_node(cluster_nodes, monkeypatch, pki, "node-b", url, NODE_PW)
    a_url, b_url = a.wait_ready(), b.wait_ready()
    assert a_url.startswith("amqps://") and b_url.startswith("amqps://")
    app = _app(pki)
    assert send(a_url, "qa", ["a1"], **app) == ["a1"]
    name, info = wait_for(lambda: redirected(b_url, "qa", **app), 10,
                          message="node-b redirects consumers of qa")
    assert info["scheme"] == "amqps"
    assert followed(b_url, "qa", **app) == a_url
    # forwarded by node-b to node-a, logged in as the cluster user over TLS
    assert send(b_url, "qa", ["via-b-1", "via-b-2"], **app) == ["via-b-1", "via-b-2"]
    assert receive(a_url, "qa", **app) == ["a1", "via-b-1", "via-b-2"]


def test_a_node_with_the_wrong_cluster_password_cannot_forward(scale_db, cluster_nodes,
                                                               monkeypatch, pki):
    cluster, database, url = scale_db
    a = _secure_node(cluster_nodes, monkeypatch, pki, "node-a", url, NODE_PW)
    b = _secure_node(cluster_nodes, monkeypatch, pki, "node-b", url, "not-the-password")
    a_url, b_url = a.wait_ready(), b.wait_ready()
    app = _app(pki)
    assert send(a_url, "qa", ["a1"], **app) == ["a1"]
    wait_for(lambda: redirected(b_url, "qa", **app), 10, message="node-b knows node-a owns qa")
    assert refusal_of_send(b_url, "qa", "stranger", **app) == Disposition.REJECTED
    assert receive(a_url, "qa", **app) == ["a1"]
    assert "amqp:unauthorized-access" in "".join(b.stderr), b.stderr[-5:]
