"""The `hermod` PySpark data source (Spark 4's Python data source API).

- `option("store", URL)`: batch read of retained messages (or, with `table`, of the
  acknowledgement and dead-letter records) in id-range partitions, see `store_reader`.
- `option("url", URL).option("queue", Q)`: one partition browses a live queue over AMQP.
- write and writeStream: each task publishes its rows to `address` unsettled and returns only
  when the broker has accepted every one (see `amqp_client.Publisher`); a task that fails is
  retried by Spark, so delivery is at-least-once. A micro-batch commits when all its tasks have.

Everything here is pickled to executors; options are parsed and checked on the driver, where a
bad option fails the job before any task runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from . import store_reader
from .rows import COLUMNS
from .store_reader import IdRange, ReadError, Selection


class HermodDataSource(DataSource):
    """Format `hermod`: retained messages and live queues in, AMQP messages out."""

    @classmethod
    def name(cls) -> str:
        return "hermod"

    def schema(self) -> str:
        table = self.options.get("table", "messages")
        if table not in store_reader.TABLES:
            raise ReadError(f"option table: expected one of {', '.join(store_reader.TABLES)}, "
                            f"not {table!r}")
        if "store" not in self.options and table != "messages":
            raise ReadError("option table needs option store")
        return store_reader.schema_of(table)

    def reader(self, schema: StructType) -> DataSourceReader:
        if "store" in self.options:
            return StoreReader(self.options, schema)
        if "url" in self.options and "queue" in self.options:
            return BrowseReader(self.options)
        raise ReadError("format hermod needs option store (retained messages) or options url "
                        "and queue (browse a live queue)")

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise WriteError("format hermod only appends: use mode('append')")
        return HermodWriter(WritePlan.of(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        if overwrite:
            raise WriteError("format hermod only appends: use outputMode('append')")
        return HermodStreamWriter(WritePlan.of(self.options, schema))


# -- reading ----------------------------------------------------------------------------------


class RangePartition(InputPartition):
    def __init__(self, id_range: IdRange) -> None:
        super().__init__(id_range)
        self.id_range = id_range


class StoreReader(DataSourceReader):
    def __init__(self, options, schema: StructType | None = None) -> None:
        from hermod.broker.times import TimeError, parse_time
        from hermod.store.engine import make_engine

        url = options["store"]
        table = options.get("table", "messages")
        try:
            from_ms = parse_time(options["from"]) if options.get("from") else None
            to_ms = parse_time(options["to"]) if options.get("to") else None
        except TimeError as error:
            raise ReadError(f"option from/to: {error}") from None
        partitions = options.get("numPartitions")
        try:
            self.partitions_wanted = int(partitions) if partitions else None
        except ValueError:
            raise ReadError(f"option numPartitions: expected a positive integer, not {partitions!r}") from None
        if self.partitions_wanted is not None and self.partitions_wanted < 1:
            raise ReadError(f"option numPartitions: expected a positive integer, not {partitions!r}")
        # Retained messages go to Spark as Arrow batches when the schema is the contract's.
        self.arrow = table == "messages" and schema is not None and \
            schema.simpleString() == _MESSAGES_SIMPLE
        self.schema = schema
        engine = make_engine(url)
        try:
            addresses = store_reader.resolve_addresses(engine, table, options.get("address"))
            self.selection = Selection(url, table, addresses, from_ms, to_ms)
            self.ranges = store_reader.plan(engine, self.selection, self.partitions_wanted)
        finally:
            engine.dispose()

    def partitions(self) -> list[InputPartition]:
        return [RangePartition(r) for r in self.ranges]

    def read(self, partition: InputPartition) -> Iterator:
        arrow_schema = _arrow_schema(self.schema) if self.arrow else None
        if arrow_schema is not None:
            return store_reader.read_arrow(self.selection, partition.id_range, arrow_schema)
        return store_reader.read(self.selection, partition.id_range)


def _simple(columns) -> str:
    return "struct<" + ",".join(f"{name}:{kind.lower().replace(' ', '')}" for name, kind in columns) + ">"


_MESSAGES_SIMPLE = _simple(COLUMNS)


def _arrow_schema(schema: StructType):
    """The Arrow schema Spark expects for `schema` (None where this PySpark cannot say: the
    reader then yields tuples)."""
    try:
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(schema, timezone="UTC")
    except (ImportError, TypeError):
        return None


class BrowseReader(DataSourceReader):
    def __init__(self, options) -> None:
        self.url = options["url"]
        self.queue = options["queue"]
        self.user = options.get("user")
        self.password = options.get("password")

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        from hermod.broker.tools.amqp_client import browse
        from .rows import browsed_row

        address = self.queue.split("::", 1)[0]
        for position, encoded in enumerate(browse(self.url, self.queue, self.user, self.password)):
            yield browsed_row(position, address, encoded)


# -- writing ----------------------------------------------------------------------------------


class WriteError(ValueError):
    """Bad write options (one line)."""


def amqp_kind(data_type) -> str:
    """The AMQP type a Spark column's values are sent as (others: their text, as a string)."""
    for spark_type, kind in ((BooleanType, "boolean"), (ByteType, "byte"), (ShortType, "short"),
                             (IntegerType, "int"), (LongType, "long"), (FloatType, "float"),
                             (DoubleType, "double"), (StringType, "string"), (BinaryType, "binary"),
                             (TimestampNTZType, "timestamp_ntz"), (TimestampType, "timestamp")):
        if isinstance(data_type, spark_type):
            return kind
    return "text"


def _amqp_value(kind: str, value: Any) -> tuple[str, Any]:
    """(AMQP type name, value) for a Spark value of the given column kind."""
    if kind in ("timestamp", "timestamp_ntz"):
        if kind == "timestamp_ntz" or value.tzinfo is not None:
            moment = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
            return "timestamp", round(moment.timestamp() * 1000)
        return "timestamp", round(value.timestamp() * 1000)  # naive local time, as Spark hands it
    if kind == "text":
        return "string", _text(value)
    if kind == "binary":
        return "binary", bytes(value)
    return kind, value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


@dataclass(frozen=True)
class WritePlan:
    """The options and the columns a row is read from, fixed on the driver."""

    url: str
    address: str
    routing_type: str = "anycast"
    user: str | None = None
    password: str | None = None
    durable: bool = True
    body: str | None = "body"  # None: the rows have no body column
    body_kind: str = "string"
    property_columns: tuple[tuple[str, str], ...] = ()  # (column, kind)
    properties_kind: str | None = None  # value kind of a `properties` map column
    typed_properties: bool = False  # a `property_types` map column gives each property's type
    fields: tuple[str, ...] = field(default_factory=tuple)  # subject, group_id, ... present

    @staticmethod
    def of(options, schema: StructType) -> WritePlan:
        url, address = options.get("url"), options.get("address")
        if not url or not address:
            raise WriteError("format hermod writes need options url and address")
        routing_type = options.get("routingType", "anycast").lower()
        if routing_type not in ("anycast", "multicast"):
            raise WriteError(f"option routingType: expected anycast or multicast, not {routing_type!r}")
        durable_text = options.get("durable", "true").lower()
        if durable_text not in ("true", "false"):
            raise WriteError(f"option durable: expected true or false, not {durable_text!r}")
        columns = {f.name: f.dataType for f in schema.fields}
        body = options.get("body")
        if body is not None and body not in columns:
            raise WriteError(f"option body: no column {body!r}")
        body = body or ("body" if "body" in columns else None)
        body_kind = "null"
        if body is not None:
            kind = amqp_kind(columns[body])
            body_kind = kind if kind in ("string", "binary") else "text"
        property_columns = []
        for name in filter(None, (n.strip() for n in options.get("propertyColumns", "").split(","))):
            if name not in columns:
                raise WriteError(f"option propertyColumns: no column {name!r}")
            property_columns.append((name, amqp_kind(columns[name])))
        properties_kind = None
        if isinstance(columns.get("properties"), MapType):
            properties_kind = amqp_kind(columns["properties"].valueType)
        typed = (properties_kind == "string" and isinstance(columns.get("property_types"), MapType))
        present = tuple(n for n in ("subject", "group_id", "message_id", "priority", "durable")
                        if n in columns)
        return WritePlan(url, address, routing_type, options.get("user"), options.get("password"),
                         durable_text == "true", body, body_kind, tuple(property_columns),
                         properties_kind, typed, present)

    def encode(self, row) -> bytes:
        from .amqp_types import parse_text
        from .rows import encode_message

        values = row.asDict(recursive=False) if hasattr(row, "asDict") else dict(row)
        entries: list[tuple[str, str, Any]] = []
        if self.properties_kind is not None and values.get("properties"):
            types = (values.get("property_types") or {}) if self.typed_properties else {}
            for key, value in values["properties"].items():
                kind = types.get(key)
                if value is None:
                    if kind == "null":  # a recorded AMQP null goes back as one
                        entries.append((str(key), "null", None))
                    continue
                if kind is not None and kind not in ("null", "list", "map", "array", "described",
                                                     "decimal32", "decimal64", "decimal128", "unknown"):
                    entries.append((str(key), kind, parse_text(kind, value)))
                else:
                    entries.append((str(key), *_amqp_value(self.properties_kind, value)))
        for name, kind in self.property_columns:
            value = values.get(name)
            if value is not None:
                entries.append((name, *_amqp_value(kind, value)))
        body = values.get(self.body) if self.body else None
        body_kind = self.body_kind if body is not None else "null"
        if body_kind == "text":
            body_kind, body = "string", _text(body)
        durable = self.durable
        if "durable" in self.fields and values.get("durable") is not None:
            durable = bool(values["durable"])
        priority = values.get("priority") if "priority" in self.fields else None
        message_id = values.get("message_id") if "message_id" in self.fields else None
        return encode_message(
            body_kind, body, durable=durable,
            priority=None if priority is None else max(0, min(255, int(priority))),
            message_id=None if message_id is None else str(message_id),
            subject=values.get("subject") if "subject" in self.fields else None,
            group_id=values.get("group_id") if "group_id" in self.fields else None,
            application_properties=entries)

    def publish(self, rows: Iterator) -> int:
        """Send every row and wait until each is accepted; returns how many were sent."""
        from hermod.broker.tools.amqp_client import Publisher

        publisher = None
        try:
            for row in rows:
                if publisher is None:  # an empty partition opens no connection
                    publisher = Publisher(self.url, self.address, self.routing_type,
                                          user=self.user, password=self.password)
                publisher.send(self.encode(row))
            if publisher is None:
                return 0
            publisher.flush()
            return publisher.sent
        finally:
            if publisher is not None:
                publisher.close()


@dataclass
class SentMessages(WriterCommitMessage):
    count: int


class HermodWriter(DataSourceWriter):
    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator) -> WriterCommitMessage:
        return SentMessages(self.plan.publish(iterator))

    def commit(self, messages) -> None:
        """Nothing to do: every message was accepted before its task ended."""

    def abort(self, messages) -> None:
        """Messages already accepted stay sent (at-least-once; AMQP has no job transaction)."""


class HermodStreamWriter(DataSourceStreamWriter):
    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator) -> WriterCommitMessage:
        return SentMessages(self.plan.publish(iterator))

    def commit(self, messages, batchId: int) -> None:
        """The micro-batch is committed by Spark once every task returned (all accepted)."""

    def abort(self, messages, batchId: int) -> None:
        """A failed micro-batch is run again by Spark: its messages may be sent twice."""
