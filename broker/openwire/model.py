"""The OpenWire data structures and commands a JMS client and a broker exchange, as declared data.

Each class lists its marshalled fields in wire order; `wire(kind, ...)` on a field records how it
is encoded and from which wire format version it exists. `engine.py` reads these declarations
(one field list per type and version) and interprets them in loose or tight form; nothing here
knows about bytes. Field order and type codes follow ActiveMQ Classic 5.17's v9-v12 marshallers.

Identifiers and destinations are frozen (hashable): they are the values the data-structure cache
keys on, and equal values share one cache slot, as Classic's `equals` makes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

# Field kinds.
BOOL = "bool"          # loose: one byte; tight: one bit
BYTE = "byte"          # one signed byte
INT = "int"            # four bytes
LONG = "long"          # loose: eight bytes; tight: two bits then 0, 2, 4 or 8 bytes
STRING = "string"      # nullable string
NESTED = "nested"      # nullable data structure, written in full
CACHED = "cached"      # nested, through the data-structure cache when it is enabled
ARRAY = "array"        # nullable array of nested data structures (16-bit count)
BYTES = "bytes"        # nullable byte array (32-bit length)
PROPERTIES = "props"   # nullable byte sequence holding a marshalled primitive map
THROWABLE = "throwable"
MAGIC = "magic"        # the eight constant bytes `ActiveMQ`

VERSIONS = (9, 10, 11, 12)


def wire(kind: str, default: Any = None, *, since: int = 9, of: type | None = None) -> Any:
    """A marshalled field: its kind, the first version that has it, and for nested kinds the
    class the value must be an instance of (checked when decoding untrusted input)."""
    return field(default=default, metadata={"openwire": (kind, since, of)})


class DataStructure:
    """Anything with an OpenWire type code."""

    TYPE: ClassVar[int] = -1
    #: Classic's MarshallAware: nested in tight form it carries one more bit.
    MARSHAL_AWARE: ClassVar[bool] = False
    __slots__ = ()


# --- identifiers ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class BrokerId(DataStructure):
    TYPE: ClassVar[int] = 124
    value: str | None = wire(STRING)


@dataclass(frozen=True, slots=True)
class ConnectionId(DataStructure):
    TYPE: ClassVar[int] = 120
    value: str | None = wire(STRING)


@dataclass(frozen=True, slots=True)
class SessionId(DataStructure):
    TYPE: ClassVar[int] = 121
    connection_id: str | None = wire(STRING)
    value: int = wire(LONG, 0)


@dataclass(frozen=True, slots=True)
class ConsumerId(DataStructure):
    TYPE: ClassVar[int] = 122
    connection_id: str | None = wire(STRING)
    session_id: int = wire(LONG, 0)
    value: int = wire(LONG, 0)


@dataclass(frozen=True, slots=True)
class ProducerId(DataStructure):
    TYPE: ClassVar[int] = 123
    connection_id: str | None = wire(STRING)
    value: int = wire(LONG, 0)
    session_id: int = wire(LONG, 0)


@dataclass(frozen=True, slots=True)
class MessageId(DataStructure):
    TYPE: ClassVar[int] = 110
    text_view: str | None = wire(STRING, since=10)
    producer_id: ProducerId | None = wire(CACHED, of=ProducerId)
    producer_sequence_id: int = wire(LONG, 0)
    broker_sequence_id: int = wire(LONG, 0)


class TransactionId(DataStructure):
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class LocalTransactionId(TransactionId):
    TYPE: ClassVar[int] = 111
    value: int = wire(LONG, 0)
    connection_id: ConnectionId | None = wire(CACHED, of=ConnectionId)


@dataclass(frozen=True, slots=True)
class XATransactionId(TransactionId):
    TYPE: ClassVar[int] = 112
    format_id: int = wire(INT, 0)
    global_transaction_id: bytes | None = wire(BYTES)
    branch_qualifier: bytes | None = wire(BYTES)


class Destination(DataStructure):
    """ActiveMQDestination: a physical name, its kind given by the type code."""

    __slots__ = ()
    physical_name: str | None


@dataclass(frozen=True, slots=True)
class Queue(Destination):
    TYPE: ClassVar[int] = 100
    physical_name: str | None = wire(STRING)


@dataclass(frozen=True, slots=True)
class Topic(Destination):
    TYPE: ClassVar[int] = 101
    physical_name: str | None = wire(STRING)


@dataclass(frozen=True, slots=True)
class TempQueue(Destination):
    TYPE: ClassVar[int] = 102
    physical_name: str | None = wire(STRING)


@dataclass(frozen=True, slots=True)
class TempTopic(Destination):
    TYPE: ClassVar[int] = 103
    physical_name: str | None = wire(STRING)


# --- exceptions ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class StackTraceElement:
    class_name: str | None = None
    method_name: str | None = None
    file_name: str | None = None
    line_number: int = 0


@dataclass(frozen=True, slots=True)
class Throwable:
    """A Java exception on the wire: its class name (the client rebuilds that class when it
    has it, so `javax.jms.JMSSecurityException` raises as such) and message; the stack trace and
    cause travel only when the negotiated `StackTraceEnabled` is true."""

    class_name: str | None
    message: str | None = None
    stack_trace: tuple[StackTraceElement, ...] = ()
    cause: Throwable | None = None


# --- commands ------------------------------------------------------------------------------

@dataclass(slots=True)
class WireFormatInfo(DataStructure):
    """Not a BaseCommand: no command id. `properties` is the marshalled options map."""

    TYPE: ClassVar[int] = 1
    MARSHAL_AWARE: ClassVar[bool] = True
    magic: bytes = wire(MAGIC, b"ActiveMQ")
    version: int = wire(INT, 0)
    properties: dict[str, Any] | None = wire(PROPERTIES)


@dataclass(slots=True)
class BaseCommand(DataStructure):
    command_id: int = wire(INT, 0)
    response_required: bool = wire(BOOL, False)


@dataclass(slots=True)
class BrokerInfo(BaseCommand):
    TYPE: ClassVar[int] = 2
    broker_id: BrokerId | None = wire(CACHED, of=BrokerId)
    broker_url: str | None = wire(STRING)
    peer_broker_infos: tuple[BrokerInfo, ...] | None = wire(ARRAY, of=DataStructure)
    broker_name: str | None = wire(STRING)
    slave_broker: bool = wire(BOOL, False)
    master_broker: bool = wire(BOOL, False)
    fault_tolerant_configuration: bool = wire(BOOL, False)
    duplex_connection: bool = wire(BOOL, False)
    network_connection: bool = wire(BOOL, False)
    connection_id: int = wire(LONG, 0)
    broker_upload_url: str | None = wire(STRING)
    network_properties: str | None = wire(STRING)


@dataclass(slots=True)
class ConnectionInfo(BaseCommand):
    TYPE: ClassVar[int] = 3
    connection_id: ConnectionId | None = wire(CACHED, of=ConnectionId)
    client_id: str | None = wire(STRING)
    password: str | None = wire(STRING)
    user_name: str | None = wire(STRING)
    broker_path: tuple[BrokerId, ...] | None = wire(ARRAY, of=BrokerId)
    broker_master_connector: bool = wire(BOOL, False)
    manageable: bool = wire(BOOL, False)
    client_master: bool = wire(BOOL, True)  # Classic's default
    fault_tolerant: bool = wire(BOOL, False)
    failover_reconnect: bool = wire(BOOL, False)
    client_ip: str | None = wire(STRING)


@dataclass(slots=True)
class SessionInfo(BaseCommand):
    TYPE: ClassVar[int] = 4
    session_id: SessionId | None = wire(CACHED, of=SessionId)


@dataclass(slots=True)
class ConsumerInfo(BaseCommand):
    TYPE: ClassVar[int] = 5
    consumer_id: ConsumerId | None = wire(CACHED, of=ConsumerId)
    browser: bool = wire(BOOL, False)
    destination: Destination | None = wire(CACHED, of=Destination)
    prefetch_size: int = wire(INT, 0)
    maximum_pending_message_limit: int = wire(INT, 0)
    dispatch_async: bool = wire(BOOL, False)
    selector: str | None = wire(STRING)
    client_id: str | None = wire(STRING, since=10)
    subscription_name: str | None = wire(STRING)
    no_local: bool = wire(BOOL, False)
    exclusive: bool = wire(BOOL, False)
    retroactive: bool = wire(BOOL, False)
    priority: int = wire(BYTE, 0)
    broker_path: tuple[BrokerId, ...] | None = wire(ARRAY, of=BrokerId)
    additional_predicate: DataStructure | None = wire(NESTED, of=DataStructure)
    network_subscription: bool = wire(BOOL, False)
    optimized_acknowledge: bool = wire(BOOL, False)
    no_range_acks: bool = wire(BOOL, False)
    network_consumer_path: tuple[ConsumerId, ...] | None = wire(ARRAY, of=ConsumerId)


@dataclass(slots=True)
class ProducerInfo(BaseCommand):
    TYPE: ClassVar[int] = 6
    producer_id: ProducerId | None = wire(CACHED, of=ProducerId)
    destination: Destination | None = wire(CACHED, of=Destination)
    broker_path: tuple[BrokerId, ...] | None = wire(ARRAY, of=BrokerId)
    dispatch_async: bool = wire(BOOL, False)
    window_size: int = wire(INT, 0)


@dataclass(slots=True)
class TransactionInfo(BaseCommand):
    """`type`: 0 begin, 1 prepare, 2 commit one phase, 3 commit two phase, 4 rollback,
    5 recover, 6 forget, 7 end."""

    TYPE: ClassVar[int] = 7
    connection_id: ConnectionId | None = wire(CACHED, of=ConnectionId)
    transaction_id: TransactionId | None = wire(CACHED, of=TransactionId)
    type: int = wire(BYTE, 0)


@dataclass(slots=True)
class DestinationInfo(BaseCommand):
    """`operation_type`: 0 add, 1 remove."""

    TYPE: ClassVar[int] = 8
    connection_id: ConnectionId | None = wire(CACHED, of=ConnectionId)
    destination: Destination | None = wire(CACHED, of=Destination)
    operation_type: int = wire(BYTE, 0)
    timeout: int = wire(LONG, 0)
    broker_path: tuple[BrokerId, ...] | None = wire(ARRAY, of=BrokerId)


@dataclass(slots=True)
class RemoveSubscriptionInfo(BaseCommand):
    TYPE: ClassVar[int] = 9
    connection_id: ConnectionId | None = wire(CACHED, of=ConnectionId)
    subscription_name: str | None = wire(STRING)
    client_id: str | None = wire(STRING)


@dataclass(slots=True)
class KeepAliveInfo(BaseCommand):
    TYPE: ClassVar[int] = 10


@dataclass(slots=True)
class ShutdownInfo(BaseCommand):
    TYPE: ClassVar[int] = 11


@dataclass(slots=True)
class RemoveInfo(BaseCommand):
    """`object_id`: the ConnectionId, SessionId, ConsumerId or ProducerId being removed."""

    TYPE: ClassVar[int] = 12
    object_id: DataStructure | None = wire(CACHED, of=DataStructure)
    last_delivered_sequence_id: int = wire(LONG, -2)  # Classic's LAST_DELIVERED_UNKNOWN


@dataclass(slots=True)
class ControlCommand(BaseCommand):
    TYPE: ClassVar[int] = 14
    command: str | None = wire(STRING)


@dataclass(slots=True)
class FlushCommand(BaseCommand):
    TYPE: ClassVar[int] = 15


@dataclass(slots=True)
class ConnectionError(BaseCommand):  # noqa: A001 - Classic's name for the command
    TYPE: ClassVar[int] = 16
    exception: Throwable | None = wire(THROWABLE)
    connection_id: ConnectionId | None = wire(NESTED, of=ConnectionId)


@dataclass(slots=True)
class ConsumerControl(BaseCommand):
    TYPE: ClassVar[int] = 17
    destination: Destination | None = wire(NESTED, of=Destination)
    close: bool = wire(BOOL, False)
    consumer_id: ConsumerId | None = wire(NESTED, of=ConsumerId)
    prefetch: int = wire(INT, 0)
    flush: bool = wire(BOOL, False)
    start: bool = wire(BOOL, False)
    stop: bool = wire(BOOL, False)


@dataclass(slots=True)
class ConnectionControl(BaseCommand):
    TYPE: ClassVar[int] = 18
    close: bool = wire(BOOL, False)
    exit: bool = wire(BOOL, False)
    fault_tolerant: bool = wire(BOOL, False)
    resume: bool = wire(BOOL, False)
    suspend: bool = wire(BOOL, False)
    connected_brokers: str | None = wire(STRING, "")  # Classic's default
    reconnect_to: str | None = wire(STRING, "")
    rebalance_connection: bool = wire(BOOL, False)
    token: bytes | None = wire(BYTES)


@dataclass(slots=True)
class ProducerAck(BaseCommand):
    TYPE: ClassVar[int] = 19
    producer_id: ProducerId | None = wire(NESTED, of=ProducerId)
    size: int = wire(INT, 0)


@dataclass(slots=True)
class MessagePull(BaseCommand):
    TYPE: ClassVar[int] = 20
    consumer_id: ConsumerId | None = wire(CACHED, of=ConsumerId)
    destination: Destination | None = wire(CACHED, of=Destination)
    timeout: int = wire(LONG, 0)
    correlation_id: str | None = wire(STRING)
    message_id: MessageId | None = wire(NESTED, of=MessageId)


@dataclass(slots=True)
class Message(BaseCommand):
    """ActiveMQMessage and its subtypes share these fields; the body is `content` (see
    `bodies.py` for each subtype's format) and `properties` the typed property map."""

    MARSHAL_AWARE: ClassVar[bool] = True
    producer_id: ProducerId | None = wire(CACHED, of=ProducerId)
    destination: Destination | None = wire(CACHED, of=Destination)
    transaction_id: TransactionId | None = wire(CACHED, of=TransactionId)
    original_destination: Destination | None = wire(CACHED, of=Destination)
    message_id: MessageId | None = wire(NESTED, of=MessageId)
    original_transaction_id: TransactionId | None = wire(CACHED, of=TransactionId)
    group_id: str | None = wire(STRING)
    group_sequence: int = wire(INT, 0)
    correlation_id: str | None = wire(STRING)
    persistent: bool = wire(BOOL, False)
    expiration: int = wire(LONG, 0)
    priority: int = wire(BYTE, 0)
    reply_to: Destination | None = wire(NESTED, of=Destination)
    timestamp: int = wire(LONG, 0)
    type: str | None = wire(STRING)
    content: bytes | None = wire(BYTES)
    properties: dict[str, Any] | None = wire(PROPERTIES)
    data_structure: DataStructure | None = wire(NESTED, of=DataStructure)
    target_consumer_id: ConsumerId | None = wire(CACHED, of=ConsumerId)
    compressed: bool = wire(BOOL, False)
    redelivery_counter: int = wire(INT, 0)
    broker_path: tuple[BrokerId, ...] | None = wire(ARRAY, of=BrokerId)
    arrival: int = wire(LONG, 0)
    user_id: str | None = wire(STRING)
    received_by_df_bridge: bool = wire(BOOL, False)
    droppable: bool = wire(BOOL, False)
    cluster: tuple[BrokerId, ...] | None = wire(ARRAY, of=BrokerId)
    broker_in_time: int = wire(LONG, 0)
    broker_out_time: int = wire(LONG, 0)
    jmsx_group_first_for_consumer: bool = wire(BOOL, False, since=10)


@dataclass(slots=True)
class ActiveMQMessage(Message):
    TYPE: ClassVar[int] = 23


@dataclass(slots=True)
class ActiveMQBytesMessage(Message):
    TYPE: ClassVar[int] = 24


@dataclass(slots=True)
class ActiveMQMapMessage(Message):
    TYPE: ClassVar[int] = 25


@dataclass(slots=True)
class ActiveMQObjectMessage(Message):
    TYPE: ClassVar[int] = 26


@dataclass(slots=True)
class ActiveMQStreamMessage(Message):
    TYPE: ClassVar[int] = 27


@dataclass(slots=True)
class ActiveMQTextMessage(Message):
    TYPE: ClassVar[int] = 28


@dataclass(slots=True)
class ActiveMQBlobMessage(Message):
    TYPE: ClassVar[int] = 29
    remote_blob_url: str | None = wire(STRING)
    mime_type: str | None = wire(STRING)
    deleted_by_broker: bool = wire(BOOL, False)


@dataclass(slots=True)
class MessageDispatch(BaseCommand):
    TYPE: ClassVar[int] = 21
    consumer_id: ConsumerId | None = wire(CACHED, of=ConsumerId)
    destination: Destination | None = wire(CACHED, of=Destination)
    message: Message | None = wire(NESTED, of=Message)
    redelivery_counter: int = wire(INT, 0)


@dataclass(slots=True)
class MessageAck(BaseCommand):
    """`ack_type`: 0 delivered, 1 poison, 2 standard, 3 redelivered, 4 individual,
    5 unmatched, 6 expired."""

    TYPE: ClassVar[int] = 22
    destination: Destination | None = wire(CACHED, of=Destination)
    transaction_id: TransactionId | None = wire(CACHED, of=TransactionId)
    consumer_id: ConsumerId | None = wire(CACHED, of=ConsumerId)
    ack_type: int = wire(BYTE, 0)
    first_message_id: MessageId | None = wire(NESTED, of=MessageId)
    last_message_id: MessageId | None = wire(NESTED, of=MessageId)
    message_count: int = wire(INT, 0)
    poison_cause: Throwable | None = wire(THROWABLE)


@dataclass(slots=True)
class Response(BaseCommand):
    TYPE: ClassVar[int] = 30
    correlation_id: int = wire(INT, 0)


@dataclass(slots=True)
class ExceptionResponse(Response):
    TYPE: ClassVar[int] = 31
    exception: Throwable | None = wire(THROWABLE)


@dataclass(slots=True)
class DataResponse(Response):
    TYPE: ClassVar[int] = 32
    data: DataStructure | None = wire(NESTED, of=DataStructure)


@dataclass(slots=True)
class DataArrayResponse(Response):
    TYPE: ClassVar[int] = 33
    data: tuple[DataStructure, ...] | None = wire(ARRAY, of=DataStructure)


@dataclass(slots=True)
class IntegerResponse(Response):
    TYPE: ClassVar[int] = 34
    result: int = wire(INT, 0)


@dataclass(slots=True)
class SubscriptionInfo(DataStructure):
    """A durable subscription as listed to a client (not a BaseCommand)."""

    TYPE: ClassVar[int] = 55
    client_id: str | None = wire(STRING)
    destination: Destination | None = wire(CACHED, of=Destination)
    selector: str | None = wire(STRING)
    subscription_name: str | None = wire(STRING)
    subscribed_destination: Destination | None = wire(NESTED, of=Destination)
    no_local: bool = wire(BOOL, False, since=11)


@dataclass(slots=True)
class MessageDispatchNotification(BaseCommand):
    TYPE: ClassVar[int] = 90
    consumer_id: ConsumerId | None = wire(CACHED, of=ConsumerId)
    destination: Destination | None = wire(CACHED, of=Destination)
    delivery_sequence_id: int = wire(LONG, 0)
    message_id: MessageId | None = wire(NESTED, of=MessageId)


#: Every type this codec reads and writes, by type code.
TYPES: dict[int, type[DataStructure]] = {
    cls.TYPE: cls for cls in (
        WireFormatInfo, BrokerInfo, ConnectionInfo, SessionInfo, ConsumerInfo, ProducerInfo,
        TransactionInfo, DestinationInfo, RemoveSubscriptionInfo, KeepAliveInfo, ShutdownInfo,
        RemoveInfo, ControlCommand, FlushCommand, ConnectionError, ConsumerControl,
        ConnectionControl, ProducerAck, MessagePull, MessageDispatch, MessageAck,
        ActiveMQMessage, ActiveMQBytesMessage, ActiveMQMapMessage, ActiveMQObjectMessage,
        ActiveMQStreamMessage, ActiveMQTextMessage, ActiveMQBlobMessage, Response,
        ExceptionResponse, DataResponse, DataArrayResponse, IntegerResponse, SubscriptionInfo,
        MessageDispatchNotification, Queue, Topic, TempQueue, TempTopic, MessageId,
        LocalTransactionId, XATransactionId, ConnectionId, SessionId, ConsumerId, ProducerId,
        BrokerId)
}
