"""Cluster nodes whose listeners require TLS and a SASL login: the node-to-node links log in as
`[ha] cluster_user` (password from `cluster_password_env`) over amqps://, verified against
`[tls] ca`; a node with the wrong password has its forwards refused, and the producer's send
is rejected, never accepted."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from proton import Disposition, Message, SSLDomain
from proton.utils import BlockingConnection, SendException

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


def test_a_forwarded_message_keeps_its_senders_user_id_under_validate_user_id(scale_db, cluster_nodes,
                                                                              monkeypatch, pki):
    """The entry node checked the sender (its `send` right, its user-id); the owner takes the
    forwarded copy from the cluster user without checking the user-id against that login
    (which would refuse every message that names its sender), and a client logged in as
    another user still cannot claim someone else's user-id."""
    cluster, database, url = scale_db
    secured = SECURITY.replace("[security]\n", "[security]\nvalidate_user_id = true\n")

    def node(name):
        monkeypatch.setenv(PASSWORD_ENV, NODE_PW)
        return cluster_nodes(
            name, url, server="tls = true\n",
            ha=f'cluster_user = "cluster"\ncluster_password_env = "{PASSWORD_ENV}"\n',
            extra=(f'[tls]\ncert = "{pki / "server.crt"}"\nkey = "{pki / "server.key"}"\n'
                   f'ca = "{pki / "ca.crt"}"\n' + secured))
    a, b = node("node-a"), node("node-b")
    a_url, b_url = a.wait_ready(), b.wait_ready()
    app = _app(pki)
    assert send(a_url, "qa", ["a1"], **app) == ["a1"]
    wait_for(lambda: redirected(b_url, "qa", **app), 10, message="node-b knows node-a owns qa")
    connection = BlockingConnection(b_url, timeout=30, **app)
    try:
        sender = connection.create_sender("qa")
        assert sender.send(Message(body="mine", durable=True, user_id=b"app")).remote_state == Disposition.ACCEPTED
        with pytest.raises(SendException) as refused:
            sender.send(Message(body="forged", durable=True, user_id=b"cluster"))
        assert refused.value.state == Disposition.REJECTED
    finally:
        connection.close()
    got = receive(a_url, "qa", **app)
    assert got == ["a1", "mine"]


def test_an_anonymous_client_does_not_pass_for_a_cluster_user_named_anonymous(scale_db, cluster_nodes,
                                                                              monkeypatch):
    """Only the cluster login vouches for forwarded user-ids: with `cluster_user = "anonymous"`
    (a configured user of that name) and anonymous logins allowed, an ANONYMOUS client is the
    user `anonymous` too, but it logged in as nobody, so its forged user-id is rejected."""
    cluster, database, url = scale_db
    monkeypatch.setenv(PASSWORD_ENV, NODE_PW)
    node = cluster_nodes(
        "node-a", url, ha=f'cluster_user = "anonymous"\ncluster_password_env = "{PASSWORD_ENV}"\n',
        extra=("[security]\nanonymous = true\nvalidate_user_id = true\n[[security.user]]\nname = \"anonymous\"\n"
               f'password_hash = "{hash_password(NODE_PW, iterations=64)}"\nroles = ["anonymous"]\n'))
    a_url = node.wait_ready()
    connection = BlockingConnection(a_url, timeout=30, allowed_mechs="ANONYMOUS")
    try:
        sender = connection.create_sender("qa")
        assert sender.send(Message(body="own", durable=True, user_id=b"anonymous")).remote_state == \
            Disposition.ACCEPTED
        with pytest.raises(SendException) as refused:
            sender.send(Message(body="forged", durable=True, user_id=b"payroll-admin"))
        assert refused.value.state == Disposition.REJECTED
    finally:
        connection.close()
    assert receive(a_url, "qa", allowed_mechs="ANONYMOUS") == ["own"]
