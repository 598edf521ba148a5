"""Will messages: published when a connection ends without a normal DISCONNECT (it failed, it
was silent past its keep-alive, it broke the protocol, another connection took its session
over, or a 5.0 DISCONNECT 0x04 asked for it), after the 5.0 will delay (at most the session's
expiry) unless the session is resumed first. Published as the connection's user: `send` on the
will's topic is checked like any PUBLISH."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from ...core.errors import HermodError
from ...mqtt.properties import Properties
from .inbound import publish_message

log = logging.getLogger("hermod.mqtt")


@dataclass(slots=True)
class PendingWill:
    topic: str
    payload: bytes
    qos: int
    retain: bool
    properties: Properties
    principal: object
    client_id: str


def publish_will(broker, will: PendingWill) -> None:
    props = will.properties._replace(will_delay_interval=None, order=())

    def done(error: BaseException | None) -> None:
        if error is not None:
            log.warning("will of MQTT client %s to %s not published: %s", will.client_id, will.topic, error)
    try:
        publish_message(broker, will.principal, will.client_id, will.topic, will.payload, will.qos, will.retain,
                        props, done)
    except HermodError as e:
        log.warning("will of MQTT client %s to %s refused: %s", will.client_id, will.topic, e)
    except Exception:  # noqa: BLE001 - a will must not break the close that publishes it
        log.exception("will of MQTT client %s to %s not published", will.client_id, will.topic)
    else:
        log.info("published the will of MQTT client %s to %s", will.client_id, will.topic)


__all__ = ["PendingWill", "publish_will"]
