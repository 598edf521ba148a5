"""[[bridge]] in the configuration file: every mistake is one ConfigError naming the key."""
from __future__ import annotations

import pytest

from hermod.broker.bridge import BridgeError, remote_for
from hermod.broker.config import BridgeConfig, ConfigError, parse


def _bridge(**kw) -> dict:
    return {"bridge": [{"name": "b", "queue": "q", "url": "amqp://h", **kw}]}


def test_a_bridge_with_defaults():
    cfg = parse(_bridge())
    assert cfg.bridges == (BridgeConfig("b", "q", "amqp://h"),)
    remote = remote_for(cfg.bridges[0], "bridge[0]", environ={})
    assert (remote.host, remote.port, remote.tls, remote.user) == ("h", 5672, False, None)
    assert remote_for(parse(_bridge(url="amqps://h")).bridges[0], "bridge[0]", {}).port == 5671


@pytest.mark.parametrize("entry, where", [
    (_bridge(url="http://h"), "bridge[0].url"),
    (_bridge(url="amqp://"), "bridge[0].url"),
    (_bridge(url="amqp://h:99999"), "bridge[0].url"),
    (_bridge(url="amqp://u:secret@h"), "bridge[0].url"),
    (_bridge(url="http://u:secret@h"), "bridge[0].url"),
    (_bridge(user="u"), "bridge[0].password_env"),
    (_bridge(window=5), "bridge[0].window"),
    ({"bridge": [{"name": "b", "url": "amqp://h"}]}, "bridge[0].queue"),
    ({"bridge": [{"name": "b", "queue": "q", "url": "amqp://h"}] * 2}, "bridge[1].name"),
])
def test_mistakes_name_the_key(entry, where):
    with pytest.raises(ConfigError) as e:
        parse(entry)
    assert str(e.value).startswith(where), str(e.value)
    assert "secret" not in str(e.value)


def test_the_password_comes_from_the_named_variable():
    cfg = parse(_bridge(user="u", password_env="PW")).bridges[0]
    assert remote_for(cfg, "bridge[0]", {"PW": "p"}).password == "p"
    with pytest.raises(BridgeError, match=r"^bridge\[0\]\.password_env: environment variable PW is not set"):
        remote_for(cfg, "bridge[0]", {})
