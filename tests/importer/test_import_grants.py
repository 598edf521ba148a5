"""An import never grants more than the source did (issue 28, findings 8 and 20; contract,
"Deployment"). Each fixture is imported with `hermod import`, the emitted permissions are
asserted, and `hermod run` on the result is tried over AMQP (and HTTP) as the imported users."""
from __future__ import annotations

import base64
import re
import tomllib
import urllib.error
import urllib.request

import pytest
from proton import Message
from proton.reactor import DurableSubscription
from proton.utils import LinkDetached

from hermod.broker.tools.importer.grants import covers, overlap
from hermod_testing import BrokerProcess
from importing import FIXTURES, bodies, connect, hermod_import, imported, send

UNAUTHORIZED = "amqp:unauthorized-access"
HTTP_READY = re.compile(r"hermod http on (https?://\S+)")


@pytest.fixture
def run_imported(tmp_path):
    started = []

    def run(product: str, fixture: str) -> BrokerProcess:
        config = imported(tmp_path, product, fixture)
        b = BrokerProcess(["--port", "0", "--http-port", "0", "--config", str(config)], tmp_path).start()
        started.append(b)
        return b

    yield run
    for b in started:
        b.stop()


def refused(attach) -> str:
    with pytest.raises(LinkDetached) as e:
        attach()
    return e.value.condition


def http_delete(broker: BrokerProcess, path: str, user: str, password: str) -> int:
    base = next(m.group(1) for line in broker.stdout_lines if (m := HTTP_READY.search(line)))
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    req = urllib.request.Request(base + path, method="DELETE", headers={"Authorization": f"Basic {token}",
                                                                         "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


# -- finding 8: Artemis without <security-settings> ------------------------------------------------

def test_artemis_without_security_settings_imports_as_allowing_nothing():
    done = hermod_import("artemis", str(FIXTURES / "artemis-no-security/broker.xml"))
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "security-settings" in line]
    assert len(said) == 1 and "allows nothing" in said[0], done.stderr
    security = tomllib.loads(done.stdout)["security"]
    assert security["permission"] == [{"match": "#"}]  # an entry that grants nobody anything
    assert [u["name"] for u in security["user"]] == ["reader"]


def test_artemis_without_security_settings_the_imported_user_may_do_nothing(run_imported):
    b = run_imported("artemis", "artemis-no-security/broker.xml")
    reader = connect(b.url, user="reader", password="reader-pw")
    try:
        assert refused(lambda: reader.create_sender("queue://orders")) == UNAUTHORIZED  # send
        assert refused(lambda: reader.create_receiver("queue://orders")) == UNAUTHORIZED  # consume
        assert refused(lambda: reader.create_sender("queue://brand.new")) == UNAUTHORIZED  # create
        assert refused(lambda: reader.create_receiver("topic://news", name="sub",
                                                      options=DurableSubscription())) == UNAUTHORIZED
    finally:
        reader.close()
    # Delete: the finding's read-only user deleted a queue through management.
    assert http_delete(b, "/api/queues/orders", "reader", "reader-pw") in (401, 403)
    assert http_delete(b, "/api/addresses/orders", "reader", "reader-pw") in (401, 403)


def test_artemis_empty_security_settings_also_allow_nothing(tmp_path):
    xml = (FIXTURES / "artemis-no-security/broker.xml").read_text().replace(
        "<addresses>", "<security-settings/>\n    <addresses>")
    (tmp_path / "broker.xml").write_text(xml)
    done = hermod_import("artemis", str(tmp_path / "broker.xml"))
    assert done.returncode == 0, done.stderr
    assert tomllib.loads(done.stdout)["security"]["permission"] == [{"match": "#"}]
    assert sum("allows nothing" in line for line in done.stderr.splitlines()) == 1


# -- finding 20: ActiveMQ Classic's union of matching entries ---------------------------------------

def test_wildcard_cover_and_overlap():
    assert covers("#", "ORDERS.IN") and covers("ORDERS.#", "ORDERS.IN") and covers("ORDERS.#", "ORDERS.*")
    assert covers("#", "#") and covers("*.IN", "ORDERS.IN") and covers("#.IN", "a.#.IN")
    assert not covers("ORDERS.*", "ORDERS.#") and not covers("ORDERS.IN", "ORDERS.#")
    assert not covers("a.#", "#") and not covers("*.IN", "ORDERS.#")
    assert overlap("ORDERS.#", "*.IN") and overlap("#", "x") and overlap("a.#", "#.b")
    assert not overlap("ORDERS.#", "PRICES.#") and not overlap("a.*", "a.b.c")


def test_classic_entries_are_merged_as_classic_applies_them():
    done = hermod_import("activemq", str(FIXTURES / "classic-authorization/activemq.xml"))
    assert done.returncode == 0, done.stderr
    perms = {p["match"]: p for p in tomllib.loads(done.stdout)["security"]["permission"]}
    admin_ops = {"create_address": ["admins"], "create_durable_queue": ["admins"], "delete_queue": ["admins"]}
    assert perms["#"] == {"match": "#", "consume": ["admins"], "browse": ["admins"], "send": ["admins"], **admin_ops}
    assert perms["ORDERS.#"] == {"match": "ORDERS.#", "consume": ["admins", "readers"],
                                 "browse": ["admins", "readers"], "send": ["admins", "writers"], **admin_ops}
    # The narrowest entry carries every wider entry's roles: admins (on >) and readers/writers
    # (on ORDERS.>) keep their rights on ORDERS.IN.
    assert perms["ORDERS.IN"] == {"match": "ORDERS.IN", "consume": ["admins", "readers"],
                                  "browse": ["admins", "readers"],
                                  "send": ["admins", "inbound", "writers"], **admin_ops}
    # Queue PRICES lets traders read, topic PRICES watchers and traders: Hermod cannot tell them
    # apart, so only what both grant is kept, and the dropped roles are named.
    assert perms["PRICES"]["consume"] == ["admins", "traders"]
    assert perms["PRICES"]["send"] == ["admins"]
    said = [line for line in done.stderr.splitlines() if "PRICES" in line]
    assert len(said) == 1 and "watchers" in said[0] and "topic" in said[0], done.stderr
    # Classic grants its advisory topics in a secured configuration: kept.
    assert perms["ActiveMQ.Advisory.#"]["consume"] == ["admins", "readers", "writers"]
    assert not any("manage" in p for p in perms.values())  # Classic's admin is not management


def test_classic_import_admins_granted_on_the_root_may_use_a_narrower_entry(run_imported):
    b = run_imported("activemq", "classic-authorization/activemq.xml")
    root = connect(b.url, user="root", password="root-pw")
    reader = connect(b.url, user="reader", password="reader-pw")
    feeder = connect(b.url, user="feeder", password="feeder-pw")
    watcher = connect(b.url, user="watcher", password="watcher-pw")
    try:
        send(root, "ORDERS.IN", Message(body="from admins"))  # refused before: ORDERS.IN decided alone
        send(feeder, "ORDERS.IN", Message(body="from inbound"))
        receiver = reader.create_receiver("ORDERS.IN")
        assert bodies(receiver, 2) == ["from admins", "from inbound"]
        assert refused(lambda: reader.create_sender("ORDERS.IN")) == UNAUTHORIZED  # readers: no write
        assert refused(lambda: feeder.create_receiver("ORDERS.IN")) == UNAUTHORIZED  # inbound: no read
        assert refused(lambda: watcher.create_receiver("topic://PRICES")) == UNAUTHORIZED  # narrowed
    finally:
        for c in (root, reader, feeder, watcher):
            c.close()


def test_classic_authorization_plugin_without_entries_allows_nothing(tmp_path):
    xml = (FIXTURES / "classic-authorization/activemq.xml").read_text()
    xml = re.sub(r"<authorizationEntries>.*</authorizationEntries>", "<authorizationEntries/>", xml, flags=re.S)
    (tmp_path / "activemq.xml").write_text(xml)
    done = hermod_import("activemq", str(tmp_path / "activemq.xml"))
    assert done.returncode == 0, done.stderr
    assert tomllib.loads(done.stdout)["security"]["permission"] == [{"match": "#"}]
    assert sum("allows nothing" in line for line in done.stderr.splitlines()) == 1
