"""paho-mqtt clients for the MQTT adapter's tests: connect to a test broker, collect what
arrives, wait on conditions (never on sleeps)."""
from __future__ import annotations

import socket
import threading
import uuid

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.properties import Properties
from paho.mqtt.packettypes import PacketTypes

from hermod_testing import wait_for

V311 = mqtt.MQTTv311
V5 = mqtt.MQTTv5
VERSIONS = (V311, V5)


def host_port(broker) -> tuple[str, int]:
    host, port = broker.address.rsplit(":", 1)
    return host, int(port)


class Client:
    """One paho client on its own network thread, with what it received."""

    def __init__(self, broker, version=V311, client_id: str | None = None, clean: bool = True,
                 username: str | None = None, password: str | None = None, keepalive: int = 60,
                 will: tuple | None = None, properties: Properties | None = None, connect: bool = True):
        self.version = version
        self.client_id = client_id if client_id is not None else f"t-{uuid.uuid4().hex[:10]}"
        kwargs = {"clean_session": clean} if version != V5 else {}
        self.c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=self.client_id, protocol=version, **kwargs)
        self.messages: list[mqtt.MQTTMessage] = []
        self.connack: tuple | None = None  # (reason code value, session present, properties)
        self.disconnected: list = []  # reason codes of disconnections
        self.subacks: dict[int, list] = {}
        self.unsubacks: dict[int, list] = {}
        self.published: set[int] = set()
        self.lock = threading.Lock()
        self.c.on_connect = self._on_connect
        self.c.on_message = self._on_message
        self.c.on_disconnect = self._on_disconnect
        self.c.on_subscribe = self._on_subscribe
        self.c.on_unsubscribe = self._on_unsubscribe
        self.c.on_publish = self._on_publish
        if username is not None:
            self.c.username_pw_set(username, password)
        if will is not None:
            topic, payload, qos, retain, *rest = will
            self.c.will_set(topic, payload, qos, retain, properties=rest[0] if rest else None)
        self.broker = broker
        self.clean = clean
        self.keepalive = keepalive
        self.properties = properties
        if connect:
            self.connect()

    def connect(self, wait: bool = True):
        host, port = host_port(self.broker)
        kwargs = {}
        if self.version == V5:
            kwargs["clean_start"] = self.clean
            if self.properties is not None:
                kwargs["properties"] = self.properties
        self.c.connect(host, port, keepalive=self.keepalive, **kwargs)
        self.c.loop_start()
        if wait:
            wait_for(lambda: self.connack is not None, message=f"CONNACK for {self.client_id}")
        return self

    # -- callbacks -----------------------------------------------------------------------------
    def _on_connect(self, client, userdata, flags, reason_code, properties):
        self.connack = (reason_code.value, flags.session_present, properties)

    def _on_message(self, client, userdata, message):
        with self.lock:
            self.messages.append(message)

    def _on_disconnect(self, client, userdata, flags, reason_code, properties):
        self.disconnected.append(reason_code.value if hasattr(reason_code, "value") else reason_code)

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties):
        self.subacks[mid] = [rc.value for rc in reason_codes]

    def _on_unsubscribe(self, client, userdata, mid, reason_codes, properties):
        self.unsubacks[mid] = [rc.value for rc in reason_codes] if reason_codes else []

    def _on_publish(self, client, userdata, mid, reason_code, properties):
        self.published.add(mid)

    # -- actions -------------------------------------------------------------------------------
    def subscribe(self, topic, qos: int = 1, properties=None, **options) -> list[int]:
        if self.version == V5:
            opts = mqtt.SubscribeOptions(qos=qos, **options)
            result, mid = self.c.subscribe(topic if isinstance(topic, list) else [(topic, opts)],
                                           properties=properties)
        else:
            result, mid = self.c.subscribe(topic if isinstance(topic, list) else topic, qos)
        wait_for(lambda: mid in self.subacks, message=f"SUBACK {mid}")
        return self.subacks[mid]

    def unsubscribe(self, topic) -> list[int]:
        result, mid = self.c.unsubscribe(topic)
        wait_for(lambda: mid in self.unsubacks, message=f"UNSUBACK {mid}")
        return self.unsubacks[mid]

    def publish(self, topic, payload, qos: int = 0, retain: bool = False, properties=None, wait: bool = True):
        info = self.c.publish(topic, payload, qos, retain, properties=properties)
        if wait and qos:
            wait_for(lambda: info.mid in self.published, message=f"acknowledgement of {info.mid}")
        return info

    def wait_messages(self, n: int, timeout: float = 10) -> list[mqtt.MQTTMessage]:
        wait_for(lambda: len(self.messages) >= n, timeout=timeout,
                 message=f"{n} messages at {self.client_id} (have {len(self.messages)})")
        return list(self.messages)

    def payloads(self) -> list[bytes]:
        with self.lock:
            return [m.payload for m in self.messages]

    def close(self, clean: bool = True):
        if clean:
            self.c.disconnect()
        else:
            # An abrupt end: the socket goes without DISCONNECT.
            sock = self.c.socket()
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        self.c.loop_stop()


def props(**values) -> Properties:
    p = Properties(PacketTypes.PUBLISH)
    for k, v in values.items():
        setattr(p, k, v)
    return p


def connect_props(**values) -> Properties:
    p = Properties(PacketTypes.CONNECT)
    for k, v in values.items():
        setattr(p, k, v)
    return p


def raw_connect(broker, packet: bytes, timeout: float = 5) -> bytes:
    """Send raw bytes, return what the broker answers before it closes (or the timeout)."""
    host, port = host_port(broker)
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(packet)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except (socket.timeout, ConnectionResetError):
            pass
        return out


class Raw:
    """A client spoken packet by packet with the broker's own codec (for what no client library
    lets a test do: withhold acknowledgements, resend a QoS 2 PUBLISH, send garbage)."""

    def __init__(self, broker, client_id: str, version: int = 4, clean: bool = True, keep_alive: int = 60,
                 properties=None, username: str | None = None, password: bytes | None = None, timeout: float = 10):
        from hermod.broker.mqtt import Connect, PacketReader, encode
        from hermod.broker.mqtt.properties import EMPTY
        host, port = host_port(broker)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.version = version
        self.reader = PacketReader(1 << 24, version)
        self.pending: list = []
        self._encode = encode
        self.send(Connect(client_id, version, clean, keep_alive, username, password, None,
                          properties if properties is not None else EMPTY))
        self.connack = self.recv()

    def send(self, packet) -> None:
        self.sock.sendall(self._encode(packet, self.version))

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self):
        """The next packet, or None when the broker closed the connection."""
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                return None
            self.pending.extend(self.reader.feed(data))
        return self.pending.pop(0)

    def recv_type(self, kind):
        """The next packet of type `kind`, skipping others (PINGRESP...)."""
        while True:
            p = self.recv()
            if p is None or isinstance(p, kind):
                return p

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
