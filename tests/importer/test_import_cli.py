"""`hermod import artemis|activemq` on the shipped configurations of the real products and on
hostile files: exit status, the one stderr line per element it cannot map, and TOML that
Hermod's own config reader accepts."""
from __future__ import annotations

import re
import tomllib

import pytest

from hermod.broker.config import parse
from importing import FIXTURES, hermod_import

NOTE = re.compile(r"^(\S+):(\d+): ")

SHIPPED = [
    ("activemq", "debian-main-activemq.xml"),
    ("activemq", "debian-example-activemq.xml"),
    ("activemq", "debian-security/activemq.xml"),
    ("activemq", "seed-classic/activemq.xml"),
    ("artemis", "artemis-divert/broker.xml"),
    ("artemis", "artemis-dead-letter/broker.xml"),
    ("artemis", "artemis-last-value-queue/broker.xml"),
    ("artemis", "artemis-security/broker.xml"),
    ("artemis", "artemis-full-config.xml"),
    ("artemis", "artemis-cli-template-broker.xml"),
    ("artemis", "seed-artemis/broker.xml"),
]


@pytest.mark.parametrize("product,fixture", SHIPPED)
def test_shipped_configurations_convert_to_a_config_hermod_accepts(product, fixture):
    done = hermod_import(product, str(FIXTURES / fixture))
    assert done.returncode == 0, done.stderr
    parse(tomllib.loads(done.stdout))
    for line in done.stderr.splitlines():  # every note names the file (and a line, for XML)
        assert line.startswith(str(FIXTURES)), line
        assert "Traceback" not in line


def test_each_unmapped_element_is_exactly_one_line():
    done = hermod_import("artemis", str(FIXTURES / "artemis-full-config.xml"))
    places = [NOTE.match(line).groups() for line in done.stderr.splitlines() if NOTE.match(line)]
    labels = [line.split(": ")[0] + line.split(": ")[1] for line in done.stderr.splitlines()]
    assert len(places) > 50
    assert len(labels) == len(set(labels)), "an element was named twice"


def test_debian_main_instance_names_its_openwire_connector_and_keeps_hermod_defaults():
    done = hermod_import("activemq", str(FIXTURES / "debian-main-activemq.xml"))
    assert done.returncode == 0
    lines = done.stderr.splitlines()
    assert not any(':50: <transportConnector name="openwire">' in l for l in lines)  # imported whole
    assert any(":39: <persistenceAdapter>: not imported" in l for l in lines)
    assert any("${activemq.base}" in l for l in lines)  # dataDirectory's placeholder: one line
    cfg = tomllib.loads(done.stdout)
    assert "server" not in cfg and "store" not in cfg  # Hermod's defaults, as the note says
    assert cfg["listener"] == [{"name": "openwire", "host": "127.0.0.1", "port": 61616, "protocols": ["openwire"]}]
    assert cfg["address_settings"] == [{"match": "#", "dead_letter_address": "ActiveMQ.DLQ",
                                        "expiry_address": "ActiveMQ.DLQ"}]


def test_classic_security_example_users_groups_and_authorization_entries():
    done = hermod_import("activemq", str(FIXTURES / "debian-security/activemq.xml"))
    cfg = tomllib.loads(done.stdout)
    users = {u["name"]: u["roles"] for u in cfg["security"]["user"]}
    assert users == {"system": ["admins", "users"], "user": ["users"], "guest": ["guests"]}
    assert "manager" not in done.stdout  # passwords from credentials.properties, stored hashed only
    perms = {p["match"]: p for p in cfg["security"]["permission"]}
    # Classic takes the union of every matching entry: admins (on >) keep their rights below.
    assert perms["GUEST.#"]["send"] == ["admins", "guests", "users"]
    assert perms["GUEST.#"]["consume"] == ["admins", "guests"]
    assert perms["TEST.Q"] == {"match": "TEST.Q", "consume": ["admins", "guests"], "browse": ["admins", "guests"],
                               "send": ["admins", "guests"], "create_address": ["admins"],
                               "create_durable_queue": ["admins"], "delete_queue": ["admins"]}
    assert perms["ActiveMQ.Advisory.#"]["send"] == ["admins", "guests", "users"]  # kept, as Classic grants it
    assert cfg["security"]["anonymous"] is False
    assert cfg["store"] == {"url": "memory"}  # persistent="false"


def test_artemis_hashed_passwords_are_one_line_per_user_and_never_copied():
    done = hermod_import("artemis", str(FIXTURES / "artemis-security/broker.xml"))
    assert done.returncode == 0
    enc = [l for l in done.stderr.splitlines() if "ENC(...)" in l]
    assert sorted(re.search(r"user '(\w+)'", l).group(1) for l in enc) == ["andrew", "bill", "frank", "sam"]
    cfg = tomllib.loads(done.stdout)
    assert {u["name"]: u["roles"] for u in cfg["security"]["user"]}["andrew"] == ["europe-user", "user"]
    assert "ENC(" not in done.stdout


def test_output_file(tmp_path):
    out = tmp_path / "hermod.toml"
    done = hermod_import("artemis", str(FIXTURES / "artemis-divert/broker.xml"), "-o", str(out))
    assert done.returncode == 0 and done.stdout == ""
    divert = {d["name"]: d for d in tomllib.loads(out.read_text())["divert"]}
    assert divert["prices-divert"] == {"name": "prices-divert", "address": "priceUpdates",
                                       "forwarding_address": "priceForwarding",
                                       "filter": "office='New York'", "exclusive": True}
    assert "AddForwardingTimeTransformer" in done.stderr


# -- files that are not a configuration at all: one line, exit 2 ----------------------------------

def _one_line_exit_2(done, *words):
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""
    for w in words:
        assert w in done.stderr


def test_missing_file():
    _one_line_exit_2(hermod_import("artemis", "/nonexistent/broker.xml"), "/nonexistent/broker.xml", "cannot read")


def test_billion_laughs_is_refused_before_any_expansion(tmp_path):
    lol = tmp_path / "lol.xml"
    lol.write_text('<?xml version="1.0"?>\n<!DOCTYPE lolz [\n<!ENTITY lol "lol">\n' + "".join(
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">\n' for i in range(1, 10))
        + ']>\n<configuration><core><name>&lol9;</name></core></configuration>\n')
    _one_line_exit_2(hermod_import("artemis", str(lol), timeout=20), "DTD")


def test_external_entity_is_refused(tmp_path):
    xxe = tmp_path / "xxe.xml"
    xxe.write_text('<!DOCTYPE b [<!ENTITY x SYSTEM "file:///etc/passwd">]><beans><broker>&x;</broker></beans>')
    _one_line_exit_2(hermod_import("activemq", str(xxe)), "DTD")


def test_fifty_megabytes_is_refused_without_reading_it(tmp_path):
    big = tmp_path / "big.xml"
    with big.open("w") as f:
        f.write("<configuration><core><addresses>")
        row = '<address name="a"><anycast/></address>' * 1000
        while f.tell() < 50 * 1024 * 1024:
            f.write(row)
        f.write("</addresses></core></configuration>")
    _one_line_exit_2(hermod_import("artemis", str(big), timeout=20), "MiB")


@pytest.mark.parametrize("content,words", [
    ("this is not xml", ["not well-formed XML", "line 1"]),
    ("<configuration><core>", ["not well-formed XML"]),
    ("", ["not well-formed XML"]),
])
def test_not_xml(tmp_path, content, words):
    f = tmp_path / "broken.xml"
    f.write_text(content)
    _one_line_exit_2(hermod_import("artemis", str(f)), *words)


def test_wrong_root_names_the_other_command():
    _one_line_exit_2(hermod_import("artemis", str(FIXTURES / "debian-main-activemq.xml")),
                     "<beans>", "hermod import activemq")
    _one_line_exit_2(hermod_import("activemq", str(FIXTURES / "seed-artemis/broker.xml")),
                     "<configuration>", "hermod import artemis")


def test_progress_counts_the_steps_only_when_asked(tmp_path):
    source = str(FIXTURES / "debian-main-activemq.xml")
    out = tmp_path / "hermod.toml"
    done = hermod_import("activemq", source, "-o", str(out), "--progress")
    assert done.returncode == 0, done.stderr
    steps = [l for l in done.stderr.splitlines() if l.startswith(f"import activemq {source}: ")]
    # Off a terminal a line is written at most once a second, so the steps between the first
    # and the last may be folded away; the first and the final one are always there.
    counts = [int(l.split(": ", 1)[1].split(" ")[0]) for l in steps]
    assert steps[0].endswith(": 0 of 4 steps (0%)") and steps[-1].endswith(": 4 of 4 steps (100%)")
    assert counts == sorted(set(counts))
    assert parse(tomllib.loads(out.read_text()))
    quiet = hermod_import("activemq", source, "-o", str(tmp_path / "again.toml"))
    assert quiet.returncode == 0 and "steps" not in quiet.stderr


CLASSIC_CONNECTORS = """<beans xmlns="http://www.springframework.org/schema/beans">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="localhost">
    <transportConnectors>
      <transportConnector name="openwire" uri="tcp://0.0.0.0:61616?maximumConnections=1000&amp;wireFormat.maxFrameSize=1048576"/>
      <transportConnector name="amqp" uri="amqp://0.0.0.0:5672?maximumConnections=1000&amp;wireFormat.maxFrameSize=1048576"/>
      <transportConnector name="stomp" uri="stomp+ssl://0.0.0.0:61612"/>
      <transportConnector name="mqtt" uri="mqtt+nio://0.0.0.0"/>
      <transportConnector name="ws" uri="ws://0.0.0.0:61614"/>
      <transportConnector name="auto" uri="auto+nio://0.0.0.0:61617"/>
      <transportConnector name="vm" uri="vm://localhost"/>
    </transportConnectors>
  </broker>
</beans>
"""


def test_classic_transport_connectors_become_listeners_with_their_protocols(tmp_path):
    source = tmp_path / "activemq.xml"
    source.write_text(CLASSIC_CONNECTORS)
    done = hermod_import("activemq", str(source))
    assert done.returncode == 0, done.stderr
    cfg = tomllib.loads(done.stdout)
    parse(cfg)
    server = {k: v for k, v in cfg["server"].items() if k != "#"}
    assert server == {"host": "0.0.0.0", "port": 5672, "protocols": ["amqp"], "max_connections": 1000,
                      "max_message_size": 1048576}
    listeners = {l["name"]: {k: v for k, v in l.items() if k != "name"} for l in cfg["listener"]}
    assert listeners == {
        "openwire": {"host": "0.0.0.0", "port": 61616, "protocols": ["openwire"]},
        "stomp": {"host": "0.0.0.0", "port": 61612, "protocols": ["stomp"], "tls": True},
        "mqtt": {"host": "0.0.0.0", "port": 1883, "protocols": ["mqtt"]},
        "ws": {"host": "0.0.0.0", "port": 61614, "protocols": ["stomp", "mqtt"], "websocket": True},
        "auto": {"host": "0.0.0.0", "port": 61617},  # every protocol: the default
    }
    lines = done.stderr.splitlines()
    assert any('<transportConnector name="vm">: not imported: its transport vm://' in l for l in lines)
    assert any('<transportConnector name="openwire">: imported without maximumConnections, '
               'wireFormat.maxFrameSize' in l for l in lines)


ARTEMIS_ACCEPTORS = """<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
<acceptors>
  <acceptor name="artemis">tcp://0.0.0.0:61616?protocols=CORE,AMQP,STOMP,HORNETQ,MQTT,OPENWIRE</acceptor>
  <acceptor name="stomp">tcp://0.0.0.0:61613?protocols=STOMP</acceptor>
  <acceptor name="mqtt">tcp://0.0.0.0:1883?protocols=MQTT,CORE</acceptor>
  <acceptor name="core">tcp://0.0.0.0:5446?protocols=CORE</acceptor>
  <acceptor name="all">tcp://0.0.0.0:5447</acceptor>
</acceptors>
<security-enabled>false</security-enabled>
</core></configuration>
"""


def test_artemis_acceptors_keep_the_protocols_hermod_speaks(tmp_path):
    source = tmp_path / "broker.xml"
    source.write_text(ARTEMIS_ACCEPTORS)
    done = hermod_import("artemis", str(source))
    assert done.returncode == 0, done.stderr
    cfg = tomllib.loads(done.stdout)
    parse(cfg)
    assert {k: v for k, v in cfg["server"].items() if k != "#"} == {"host": "0.0.0.0", "port": 61616}
    listeners = {l["name"]: l.get("protocols") for l in cfg["listener"]}
    assert listeners == {"stomp": ["stomp"], "mqtt": ["mqtt"], "all": None}
    lines = done.stderr.splitlines()
    assert any('<acceptor name="core">: not imported: speaks CORE' in l for l in lines)
    assert any('<acceptor name="mqtt">: imported, but without CORE' in l for l in lines)
    assert any('<acceptor name="artemis">: imported, but without CORE,HORNETQ' in l for l in lines)
