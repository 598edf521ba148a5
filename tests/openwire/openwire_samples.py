"""The command list OpenWireGolden.java marshals, built again in Python, and the helper that
compiles and runs that Java program against Debian's ActiveMQ client library."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hermod.broker.openwire import bodies
from hermod.broker.openwire import model as m
from hermod.broker.openwire.engine import spec
from hermod.broker.openwire.values import Byte, Char, Float, Long, Short

JAVA_SOURCE = Path(__file__).with_name("java") / "OpenWireGolden.java"
JARS = ["activemq-client.jar", "geronimo-jms_1.1_spec.jar", "hawtbuf.jar", "slf4j-api.jar",
        "slf4j-nop.jar"]
JAVA_CACHE_SIZE = 0x7FFF // 2  # OpenWireFormat.setCacheEnabled sizes its tables so


def classpath() -> str:
    jars = [Path("/usr/share/java") / j for j in JARS]
    missing = [str(j) for j in jars if not j.exists()]
    if missing or not shutil.which("javac"):
        raise RuntimeError(f"the Java side needs `make openwire-java` (missing: {missing or 'javac'})")
    return ":".join(str(j) for j in jars)


def compiled() -> str:
    """The class directory (compiled once per source version), with the classpath."""
    cp = classpath()
    digest = hashlib.sha256(JAVA_SOURCE.read_bytes()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"hermod-openwire-java-{os.getuid()}-{digest}"
    if not (out / "OpenWireGolden.class").exists():
        tmp = Path(tempfile.mkdtemp(prefix=out.name + "-"))
        subprocess.run(["javac", "-nowarn", "-d", str(tmp), "-cp", cp, str(JAVA_SOURCE)],
                       check=True, capture_output=True, timeout=300)
        try:
            tmp.rename(out)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # another run won the race
    return f"{out}:{cp}"


def run_java(mode: str, stdin: str = "") -> list[str]:
    done = subprocess.run(["java", "-cp", compiled(), "OpenWireGolden", mode], input=stdin,
                          capture_output=True, text=True, check=True, timeout=300)
    return done.stdout.splitlines()


TRACE = (m.StackTraceElement("org.example.Sender", "send", "Sender.java", 42),
         m.StackTraceElement("org.example.Main", "main", None, -1))


def expected_commands() -> list[tuple[str, Any]]:
    """The same commands, field for field, as OpenWireGolden.commands()."""
    conn_value = "ID:host-40000-1700000000000-1:1"
    conn = m.ConnectionId(conn_value)
    session = m.SessionId(conn_value, 1)
    producer = m.ProducerId(conn_value, 1, 1)
    consumer = m.ConsumerId(conn_value, 1, 1)
    queue = m.Queue("orders")
    topic = m.Topic("prices.>")
    temp_queue = m.TempQueue("ID:host-40000-1700000000000-1:1:1")
    broker_id = m.BrokerId("ID:broker-1")
    out: list[tuple[str, Any]] = []

    out.append(("wireformat", m.WireFormatInfo(b"ActiveMQ", 12, {
        "StackTraceEnabled": True, "PlatformDetails": "Java", "CacheEnabled": True,
        "TcpNoDelayEnabled": True, "SizePrefixDisabled": False, "CacheSize": 1024,
        "ProviderName": "ActiveMQ", "TightEncodingEnabled": True, "MaxFrameSize": Long((1 << 63) - 1),
        "MaxInactivityDuration": Long(30000), "MaxInactivityDurationInitalDelay": Long(10000),
        "MaxFrameSizeEnabled": True, "ProviderVersion": "5.17.2"})))
    peer = m.BrokerInfo(broker_id=m.BrokerId("ID:peer-2"), broker_name="peer")
    out.append(("broker", m.BrokerInfo(
        broker_id=broker_id, broker_url="tcp://localhost:61616", broker_name="hermod",
        peer_broker_infos=(peer,), fault_tolerant_configuration=True, connection_id=70000,
        network_properties="a=b")))
    consumer_info = m.ConsumerInfo(
        command_id=4, response_required=True, consumer_id=consumer, destination=topic,
        prefetch_size=1000, maximum_pending_message_limit=10,
        selector="color = 'red' AND weight > 2.5", client_id="client-\u00e9",
        subscription_name="sub", no_local=True, exclusive=True, priority=5, dispatch_async=True,
        network_consumer_path=(consumer,))
    out += [
        ("connection", m.ConnectionInfo(
            command_id=1, response_required=True, connection_id=conn, client_id="client-\u00e9",
            user_name="user", password="p\u00e4ssw\u00f6rd", manageable=True, client_master=True,
            broker_path=(broker_id,))),
        ("session", m.SessionInfo(command_id=2, response_required=True, session_id=session)),
        ("producer", m.ProducerInfo(command_id=3, producer_id=producer, destination=queue,
                                    window_size=1024, dispatch_async=True)),
        ("consumer", consumer_info),
    ]
    ltx = m.LocalTransactionId(5, conn)
    xid = m.XATransactionId(0x1234, b"\x01\x02\x03\xff", b"\x09")
    out += [
        ("begin", m.TransactionInfo(connection_id=conn, transaction_id=ltx, type=0)),
        ("prepare", m.TransactionInfo(connection_id=conn, transaction_id=xid, type=1)),
        ("destination", m.DestinationInfo(connection_id=conn, destination=temp_queue,
                                          operation_type=0)),
        ("unsubscribe", m.RemoveSubscriptionInfo(connection_id=conn, subscription_name="sub",
                                                 client_id="client")),
        ("keepalive", m.KeepAliveInfo()),
        ("shutdown", m.ShutdownInfo()),
        ("flush", m.FlushCommand()),
        ("remove", m.RemoveInfo(object_id=consumer, last_delivered_sequence_id=-1)),
        ("control", m.ControlCommand(command="shutdown")),
        ("connection-error", m.ConnectionError(
            exception=m.Throwable("java.io.IOException", "gone", TRACE,
                                  m.Throwable("java.lang.IllegalStateException", "inner", TRACE)),
            connection_id=conn)),
        ("consumer-control", m.ConsumerControl(consumer_id=consumer, destination=topic, prefetch=0,
                                               start=True)),
        ("connection-control", m.ConnectionControl(fault_tolerant=True,
                                                   reconnect_to="tcp://other:61616",
                                                   token=b"\x07\x07")),
        ("producer-ack", m.ProducerAck(producer_id=producer, size=4096)),
        ("pull", m.MessagePull(consumer_id=consumer, destination=queue, timeout=5000,
                               correlation_id="pull-1")),
    ]

    def mid(seq: int, text_view: str | None = None) -> m.MessageId:
        return m.MessageId(text_view, producer, seq, 0)

    out.append(("text", m.ActiveMQTextMessage(
        command_id=9, response_required=True, producer_id=producer, destination=queue,
        message_id=mid(1, "ID:host-40000-1700000000000-1:1:1:1:1"), persistent=True, priority=4,
        timestamp=1700000000123, expiration=1700000060123, correlation_id="corr-\u00fc",
        type="order", group_id="group-1", group_sequence=3, reply_to=temp_queue, user_id="user",
        broker_path=(broker_id,), arrival=1700000000200, broker_in_time=1700000000201,
        broker_out_time=1700000000202, jmsx_group_first_for_consumer=True,
        content=bodies.encode_text("h\u00e9llo w\u00f6rld \U0001f600 \x00 end"),
        properties={
            "bool": True, "byte": Byte(-7), "char": Char("x"), "short": Short(-300),
            "int": 70000, "long": Long(1 << 40), "float": Float(2.5), "double": -0.125,
            "string": "caf\u00e9", "bigstring": "ab" * 5000, "bytes": b"\x00\x01\xfe",
            "map": {"k": "v", "n": 1}, "list": [Long(1), "two", None], "null": None})))
    out.append(("bytes", m.ActiveMQBytesMessage(
        producer_id=producer, destination=topic, message_id=mid(2), content=bytes(range(256)),
        transaction_id=ltx)))
    out.append(("map", m.ActiveMQMapMessage(
        producer_id=producer, destination=queue, message_id=mid(3),
        content=bodies.encode_map_body({"name": "widget", "count": 3, "ok": False,
                                        "raw": b"\x05"}))))
    out.append(("stream", m.ActiveMQStreamMessage(
        producer_id=producer, destination=queue, message_id=mid(4),
        content=bodies.encode_stream_body(["first", 2, True, 3.5, Char("z"), b"\x01\x02"]))))
    serialized = b"\xac\xed\x00\x05t\x00\x13a serialized stringy"  # y: the stream reset
    out.append(("object", m.ActiveMQObjectMessage(
        producer_id=producer, destination=queue, message_id=mid(5), content=serialized)))
    out.append(("advisory", m.ActiveMQMessage(
        producer_id=producer, destination=m.TempTopic("ID:temp-topic-1"), message_id=mid(6),
        data_structure=consumer_info)))
    out.append(("compressed", m.ActiveMQTextMessage(
        producer_id=producer, destination=queue, message_id=mid(7), compressed=True,
        content=bodies.encode_text("compress me " * 1000, compressed=True))))
    out.append(("large", m.ActiveMQTextMessage(
        producer_id=producer, destination=queue, message_id=mid(8),
        content=bodies.encode_text("0123456789\u00e9" * 10000))))
    out.append(("blob", m.ActiveMQBlobMessage(
        producer_id=producer, destination=queue, message_id=mid(9),
        remote_blob_url="http://blobs/1", mime_type="text/plain")))
    dispatched = m.ActiveMQTextMessage(
        producer_id=producer, destination=queue, message_id=mid(10),
        content=bodies.encode_text("to you"), redelivery_counter=2, target_consumer_id=consumer)
    out.append(("dispatch", m.MessageDispatch(consumer_id=consumer, destination=queue,
                                              message=dispatched, redelivery_counter=2)))
    out.append(("ack", m.MessageAck(
        command_id=11, destination=queue, consumer_id=consumer, transaction_id=ltx, ack_type=2,
        first_message_id=mid(1), last_message_id=mid(10), message_count=10)))
    out.append(("poison", m.MessageAck(
        destination=queue, consumer_id=consumer, ack_type=1, last_message_id=mid(10),
        message_count=1,
        poison_cause=m.Throwable("java.lang.Throwable", "Delivery[7] exceeds redelivery policy limit",
                                 TRACE, m.Throwable("java.lang.RuntimeException", "handler failed",
                                                    TRACE)))))
    out += [
        ("response", m.Response(correlation_id=7)),
        ("exception", m.ExceptionResponse(
            correlation_id=8,
            exception=m.Throwable("javax.jms.JMSSecurityException",
                                  "User name [x] or password is invalid.", TRACE))),
        ("data", m.DataResponse(correlation_id=9, data=consumer)),
        ("data-array", m.DataArrayResponse(correlation_id=10, data=(m.SubscriptionInfo(
            client_id="client", destination=topic, subscription_name="sub", selector="a > 1",
            subscribed_destination=topic, no_local=True),))),
        ("integer", m.IntegerResponse(correlation_id=11, result=42)),
        ("dispatch-notification", m.MessageDispatchNotification(
            consumer_id=consumer, destination=queue, delivery_sequence_id=1 << 33,
            message_id=mid(1))),
    ]
    return out


def for_version(value: Any, version: int) -> Any:
    """`value` as a peer of that version sees it: fields the version lacks at their defaults."""
    if isinstance(value, tuple):
        return tuple(for_version(v, version) for v in value)
    if not dataclasses.is_dataclass(value) or not isinstance(value, m.DataStructure):
        return value
    present = {name for name, _, _ in spec(type(value), version)[1]}
    changes = {}
    for f in dataclasses.fields(value):
        v = getattr(value, f.name)
        changes[f.name] = for_version(v, version) if f.name in present else f.default
    return type(value)(**changes)


def without_traces(value):
    """What arrives when stack traces are off: class name and message only."""
    if isinstance(value, m.Throwable):
        return m.Throwable(value.class_name, value.message)
    if isinstance(value, tuple):
        return tuple(without_traces(v) for v in value)
    if dataclasses.is_dataclass(value) and isinstance(value, m.DataStructure):
        return type(value)(**{f.name: without_traces(getattr(value, f.name))
                              for f in dataclasses.fields(value)})
    return value
