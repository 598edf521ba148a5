"""Clients and helpers for the durable-store suite.

Why not BlockingConnection for the crash tests. A crash test must know exactly which outcomes
reached the client before the broker died, and a blocking client hides the moment:

- Producer side, `accepted` is the broker's promise that the message is stored. `AsyncProducer`
  keeps a window of unsettled transfers and records a message as accepted only from the
  broker's disposition (`on_accepted`), so at a SIGKILL up to a window of messages is in
  doubt: sent, maybe committed, not confirmed.
- Consumer side, the broker settles a consumer's delivery only after the acknowledgement is
  committed. A client that settles its own delivery together with the ack (what `accept()`
  does) can never see that settlement, so it cannot tell "acknowledged" from "ack on the wire
  when the broker died". `AckingConsumer` therefore sends the ack as a disposition WITHOUT
  settling (`delivery.update(ACCEPTED)`; the link's settle modes stay the defaults, the client
  just keeps its side of the delivery open), and counts a message as acknowledged only when
  the broker's settlement of that delivery arrives (`on_settled`); then it settles its side. Messages received whose settlement did not arrive
  are in doubt: the broker may or may not have committed their ack.

Both run a proton Container on a thread of their own; lists they fill are only appended to
(safe to read from the test thread under the GIL). `stop()` is thread-safe (an injected event).
"""
from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from proton import Delivery, Message, Timeout
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Container, EventInjector
from sqlalchemy import create_engine, text

from hermod.broker.tools.clients import management_call
from hermod_testing import BrokerProcess, wait_for
from pgcluster import find_bindir
from wire_helpers import connect

TIMEOUT = 15
STORM_START_S = 300  # a broker's start on a loaded machine (the default 20 s is for one test)


def require_postgresql() -> None:
    if find_bindir() is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")


# -- brokers on one store ------------------------------------------------------------------------


class ProcessStarter:
    """`start_broker` (tests/conftest.py) for fixtures wider than one test: same arguments,
    every broker stopped by `stop_all()`."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.started: list[BrokerProcess] = []

    def start(self, *args: str, config: str | None = None, store: str = "memory") -> BrokerProcess:
        argv = ["--port", "0", "--store", store]
        if config is not None:
            path = self.directory / f"hermod-{len(self.started)}.toml"
            path.write_text(config)
            argv += ["--config", str(path)]
        broker = BrokerProcess([*argv, *args], self.directory)
        self.started.append(broker)
        return broker.start(timeout=STORM_START_S)

    def stop_all(self) -> None:
        for broker in self.started:
            broker.stop()


class DurableBrokers:
    """Brokers run one after another on one store URL (`start_broker` stops them at the end)."""

    def __init__(self, start_broker: Callable[..., BrokerProcess], store_url: str):
        self._start_broker = start_broker
        self.store_url = store_url
        self.current: BrokerProcess | None = None

    @property
    def backend(self) -> str:
        return "sqlite" if self.store_url.startswith("sqlite") else "postgresql"

    def start(self, config: str | None = None, *args: str) -> BrokerProcess:
        assert self.current is None or self.current.proc.poll() is not None, "a broker is running"
        self.current = self._start_broker(*args, config=config, store=self.store_url)
        return self.current

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, nothing pending is flushed."""
        self.current.kill()

    def stop(self) -> int:
        """SIGTERM: the clean shutdown (the journal commits what was submitted)."""
        return self.current.stop()

    @property
    def running(self) -> bool:
        return self.current is not None and self.current.proc.poll() is None

    @property
    def url(self) -> str:
        return self.current.url


# -- management and store views --------------------------------------------------------------------


SLOW_ACK_COMMIT = """
CREATE FUNCTION hermod_test_slow_ack() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep(0.3); RETURN NULL; END $$;
CREATE TRIGGER hermod_test_slow_ack AFTER DELETE ON message_refs
FOR EACH STATEMENT EXECUTE FUNCTION hermod_test_slow_ack();
"""


def slow_down_acknowledgements(store_url: str) -> None:
    """Every PostgreSQL statement that deletes references (acknowledgements) takes 300 ms more,
    so a store that lags its broker's answers lags them on every run."""
    import psycopg
    with psycopg.connect(store_url.replace("postgresql+psycopg://", "postgresql://", 1),
                         autocommit=True) as connection:
        connection.execute(SLOW_ACK_COMMIT)


def queue_stats(url: str) -> dict[str, dict]:
    return {row["queue"]: row for row in management_call(url, "queue.stat", timeout=TIMEOUT)}


def address_stats(url: str) -> dict[str, dict]:
    return {row["address"]: row for row in management_call(url, "address.stat", timeout=TIMEOUT)}


class StoreView:
    """Read the store's tables directly (SQLAlchemy Core), while a broker runs or not."""

    def __init__(self, store_url: str):
        self.engine = create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))

    def close(self) -> None:
        self.engine.dispose()

    def scalar(self, sql: str, **params: Any):
        with self.engine.connect() as connection:
            return connection.execute(text(sql), params).scalar()

    def rows(self, sql: str, **params: Any) -> list:
        with self.engine.connect() as connection:
            return list(connection.execute(text(sql), params))

    def queue_names(self) -> set[str]:
        return {row.name for row in self.rows("SELECT name FROM queues")}

    def address_names(self) -> set[str]:
        return {row.name for row in self.rows("SELECT name FROM addresses")}

    def message_count(self) -> int:
        return self.scalar("SELECT count(*) FROM messages")

    def refs_of(self, queue: str) -> list:
        return self.rows(
            "SELECT r.message_id, r.delivery_count FROM message_refs r"
            " JOIN queues q ON q.id = r.queue_id WHERE q.name = :name ORDER BY r.message_id",
            name=queue)

    def __enter__(self) -> StoreView:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class HeldSqlite:
    """A SQLite store the broker cannot commit to while `stop`ped: another connection holds
    an exclusive lock on it (to the broker, an outage) until `start`."""

    def __init__(self, tmp_path: Path, name: str = "held.db"):
        self.path = tmp_path / name
        self.url = f"sqlite:///{self.path}"
        self._lock: sqlite3.Connection | None = None

    def stop(self) -> None:
        self._lock = sqlite3.connect(self.path, isolation_level=None, timeout=10)
        self._lock.execute("BEGIN EXCLUSIVE")  # the store cannot commit until `start`

    def start(self) -> None:
        if self._lock is not None:
            self._lock.execute("ROLLBACK")
            self._lock.close()
            self._lock = None


def sqlite_path(store_url: str) -> Path:
    return Path(store_url.removeprefix("sqlite:///"))


# -- blocking helpers --------------------------------------------------------------------------


def body_of(message: Message):
    body = message.body
    return bytes(body) if isinstance(body, memoryview) else body


def send_durable(url: str, address: str, messages: Sequence[Message], options=None,
                 container_id: str | None = None) -> None:
    """Send and wait for each message's `accepted` (BlockingSender raises on anything else)."""
    conn = connect(url, container_id=container_id)
    try:
        sender = conn.create_sender(address, options=options)
        for message in messages:
            sender.send(message)
        sender.close()
    finally:
        conn.close()


def receive_exactly(url: str, address: str, count: int, *, options=None, name: str | None = None,
                    container_id: str | None = None, quiet_s: float = 0.3) -> list[Message]:
    """Receive and accept `count` messages, then check that no further one arrives within
    `quiet_s` (a bound on a negative, not a synchronisation)."""
    conn = connect(url, container_id=container_id)
    try:
        receiver = conn.create_receiver(address, name=name, options=options,
                                        credit=max(1, min(count + 1, 500)))
        got = []
        for _ in range(count):
            got.append(receiver.receive(timeout=TIMEOUT))
            receiver.accept()
        try:
            extra = receiver.receive(timeout=quiet_s)
        except Timeout:  # nothing more, as expected (a detached link raises instead)
            extra = None
        assert extra is None, f"unexpected extra message {extra!r} on {address}"
        receiver.close()
        return got
    finally:
        conn.close()


def drain_queue(url: str, queue: str, **kw) -> list[Message]:
    """Everything on an anycast queue: the count comes from management (recovered state)."""
    count = queue_stats(url)[queue]["messages"]
    return receive_exactly(url, queue, count, **kw)


# -- asynchronous clients --------------------------------------------------------------------------


class _ThreadClient(MessagingHandler):
    def __init__(self, url: str, **handler_options: Any):
        super().__init__(**handler_options)
        self.url = url
        self.connection = None
        self.disconnected = False
        self.transport_error: str | None = None  # expected after a kill, not otherwise
        self.errors: list[str] = []
        self.done = threading.Event()
        self._stopping = False
        self._trigger: tuple[int, Callable[[], None]] | None = None
        self.triggered_at: int | None = None  # the outcome count when `then` was called
        self._injector = EventInjector()
        # `stop` from another thread and the thread's own end (which closes the injector's
        # pipe) must not cross: a write to a closed, maybe reused, descriptor.
        self._pipe_lock = threading.Lock()
        self._container = Container(self)
        self._container.selectable(self._injector)
        self._thread = threading.Thread(target=self._run, daemon=True, name=type(self).__name__)

    def start(self, *, then: Callable[[], None] | None = None, after: int = 0):
        """Run the client; with `then`, call it on the client's own thread as soon as `after`
        outcomes (accepts, confirmed acks) were counted: a kill lands exactly there, not a
        polling interval later (outcomes already read in the same input batch still count)."""
        if then is not None:
            self._trigger = (after, then)
        self._thread.start()
        return self

    def _counted(self, count: int) -> None:
        if self._trigger is not None and count >= self._trigger[0]:
            _, action = self._trigger
            self._trigger = None
            self.triggered_at = count
            action()

    def _run(self) -> None:
        try:
            self._container.run()
        except Exception as error:  # noqa: BLE001 - surfaced through `errors`
            self.errors.append(f"container: {error!r}")
        finally:
            # Proton's EventInjector never closes its pipe: a long run of clients (the crash
            # storm) would run out of descriptors select() can watch.
            with self._pipe_lock:
                self.done.set()
                for fd in self._injector.pipe:
                    os.close(fd)

    def on_start(self, event) -> None:
        self.connection = event.container.connect(self.url, reconnect=False)
        self.open_link(event.container, self.connection)

    def open_link(self, container, connection) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """Close the connection and end the thread (callable from any thread)."""
        with self._pipe_lock:
            if not self.done.is_set():
                self._injector.trigger(ApplicationEvent("client_stop"))

    def on_client_stop(self, _event) -> None:
        self.finish()

    def finish(self) -> None:
        self._stopping = True
        if self.connection is not None and not self.disconnected:
            self.connection.close()
        self._injector.close()

    def on_transport_error(self, event) -> None:
        self.disconnected = True
        self.transport_error = str(event.transport.condition)
        self._injector.close()

    def on_transport_closed(self, event) -> None:
        self.disconnected = True
        self._injector.close()

    def on_connection_error(self, event) -> None:
        self.errors.append(f"connection: {event.connection.remote_condition}")

    def on_link_error(self, event) -> None:
        self.errors.append(f"link: {event.link.remote_condition}")
        self.finish()

    def join(self, timeout: float = TIMEOUT) -> None:
        assert self.done.wait(timeout), f"{type(self).__name__} did not finish"


class AsyncProducer(_ThreadClient):
    """Sends `messages` (key, Message) in order with up to `window` unsettled transfers;
    `sent`, `accepted`, `refused` list keys in the order those events happened."""

    def __init__(self, url: str, address: str, messages: Sequence[tuple[Any, Message]],
                 window: int = 64):
        super().__init__(url, auto_settle=True)
        self.address = address
        self.messages = list(messages)
        self.window = window
        self.sent: list = []
        self.accepted: list = []
        self.refused: list = []  # (key, outcome, condition) for rejected/released/modified
        self._unsettled: dict[Any, None] = {}  # keys sent with no outcome yet, in order
        self._next = 0
        self.sender = None

    def open_link(self, container, connection) -> None:
        self.sender = container.create_sender(connection, self.address)

    def on_sendable(self, _event) -> None:
        self._pump()

    def _pump(self) -> None:
        sender = self.sender
        while (not self._stopping and not self.disconnected and sender.credit > 0
               and self._next < len(self.messages) and len(self._unsettled) < self.window):
            key, message = self.messages[self._next]
            self._next += 1
            delivery = sender.send(message)
            delivery.test_key = key  # kept with the C delivery (proton's Wrapper attributes)
            self._unsettled[key] = None
            self.sent.append(key)

    def _key(self, delivery) -> Any:
        key = delivery.test_key
        del self._unsettled[key]
        return key

    def on_accepted(self, event) -> None:
        self.accepted.append(self._key(event.delivery))
        self._counted(len(self.accepted))
        self._after_outcome()

    def on_rejected(self, event) -> None:
        condition = event.delivery.remote.condition
        self.refused.append((self._key(event.delivery), "rejected", condition and condition.description))
        self._after_outcome()

    def on_released(self, event) -> None:
        self.refused.append((self._key(event.delivery), "released", None))
        self._after_outcome()

    def _after_outcome(self) -> None:
        if self._next >= len(self.messages) and not self._unsettled:
            self.finish()
        else:
            self._pump()

    @property
    def in_doubt(self) -> list:
        """Sent, and no outcome seen (the broker may or may not have stored them)."""
        return list(self._unsettled)


class AckingConsumer(_ThreadClient):
    """Receives from `address` with `prefetch` credit and acknowledges every message; a
    message counts as acknowledged only once the broker settled it (see the module docstring).
    `key(message)` names a message in `received` / `acked`."""

    def __init__(self, url: str, address: str, key: Callable[[Message], Any], prefetch: int = 50,
                 outcome: int = Delivery.ACCEPTED, link_name: str | None = None,
                 link_options: Any = None, container_id: str | None = None):
        super().__init__(url, prefetch=prefetch, auto_accept=False, auto_settle=False)
        self.address = address
        self.key = key
        self.outcome = outcome  # the acknowledgement sent: ACCEPTED, or REJECTED (dead-letters it)
        self.link_name = link_name
        self.link_options = link_options
        if container_id is not None:
            self._container.container_id = container_id
        self.received: list = []
        self.acked: list = []
        self._awaiting: dict[Any, None] = {}  # keys acked and not yet settled by the broker
        self.probe_outcome: str | None = None
        self._probe: tuple[str, Message] | None = None

    def open_link(self, container, connection) -> None:
        container.create_receiver(connection, self.address, name=self.link_name,
                                  options=self.link_options)

    def on_message(self, event) -> None:
        delivery = event.delivery
        key = self.key(event.message)
        self.received.append(key)
        delivery.test_key = key  # kept with the C delivery (proton's Wrapper attributes)
        self._awaiting[key] = None
        delivery.update(self.outcome)  # the ack; settled by the broker once committed

    def on_settled(self, event) -> None:
        delivery = event.delivery
        if delivery.link.is_sender:  # the probe
            delivery.settle()
            return
        key = getattr(delivery, "test_key", None)
        if key is None or key not in self._awaiting:
            return
        del self._awaiting[key]
        ours = delivery.local_state
        delivery.settle()
        if ours == self.outcome:
            self.acked.append(key)
            self._counted(len(self.acked))

    @property
    def in_doubt(self) -> list:
        """Received and acknowledged, with no settlement from the broker (yet)."""
        return list(self._awaiting)

    # A probe: one durable message sent on this consumer's own connection. Frames on one
    # connection keep their order, so when the probe's outcome arrives every settlement the
    # broker wrote before it has arrived too.

    def probe(self, address: str, message: Message) -> None:
        self.probe_outcome = None
        self._probe = (address, message)
        self._injector.trigger(ApplicationEvent("client_probe"))

    def on_client_probe(self, event) -> None:
        address, message = self._probe
        sender = self._container.create_sender(self.connection, address)
        sender.send(message)

    def on_accepted(self, event) -> None:
        self.probe_outcome = "accepted"

    def on_rejected(self, event) -> None:
        self.probe_outcome = "rejected"


def wait_until(predicate, what: str, timeout: float = TIMEOUT):
    return wait_for(predicate, timeout=timeout, interval=0.005, message=what)


__all__ = ["AckingConsumer", "AsyncProducer", "DurableBrokers", "ProcessStarter", "StoreView",
           "address_stats", "body_of", "drain_queue", "queue_stats", "receive_exactly",
           "require_postgresql", "send_durable", "sqlite_path", "wait_until"]
