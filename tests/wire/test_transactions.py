"""Local transactions on the wire, with python-qpid-proton's client Transaction API: the
coordinator, transactional sends and acknowledgements, consume-and-produce, rollback, refusals,
and (with the store) a commit that survives a restart."""
from __future__ import annotations

import queue as queues
import threading
from concurrent.futures import Future

from proton import Delivery, Described, Message, ulong
from proton.handlers import MessagingHandler, TransactionHandler
from proton.reactor import ApplicationEvent, AtMostOnce, Container, EventInjector

from hermod.broker.tools.clients import management_call
from hermod_testing import wait_for
from wire_helpers import connect, nothing_more, receive_bodies, send

TIMEOUT = 10
TRANSACTIONAL_STATE = 0x34


def stats(url: str, queue: str) -> dict:
    return {r["queue"]: r for r in management_call(url, "queue.stat")}.get(queue, {})


class TxClient(MessagingHandler, TransactionHandler):
    """A Proton Container on its own thread, driven step by step from the test: `call(fn)` runs
    fn on the container's thread and returns its result; outcomes that come later (declared,
    discharged, a transfer settled, a message received) arrive through futures and queues."""

    def __init__(self, url: str):
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.url = url
        self.conn = None
        self._opened: Future = Future()
        self._calls: queues.Queue = queues.Queue()
        self._declares: dict[int, Future] = {}
        self._discharges: dict[int, Future] = {}
        self._transfers: dict[tuple, Future] = {}
        self.inbox: dict[str, queues.Queue] = {}
        self._injector = EventInjector()
        self.container = Container(self)
        self.container.selectable(self._injector)
        self._thread = threading.Thread(target=self.container.run, daemon=True)
        self._thread.start()
        self._opened.result(TIMEOUT)

    # -- driving the container from the test thread ----------------------------------------------
    def call(self, fn, *args):
        done: Future = Future()
        self._calls.put((fn, args, done))
        self._injector.trigger(ApplicationEvent("call"))
        return done.result(TIMEOUT)

    def on_call(self, event) -> None:
        fn, args, done = self._calls.get()
        try:
            done.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            done.set_exception(e)

    def close(self) -> None:
        def stop():
            self.conn.close()
            self._injector.close()
        self.call(stop)
        self._thread.join(TIMEOUT)

    # -- transactions ---------------------------------------------------------------------------
    def declare(self, settle_before_discharge: bool = False):
        def start():
            done: Future = Future()
            txn = self.container.declare_transaction(self.conn, handler=self,
                                                     settle_before_discharge=settle_before_discharge)
            self._declares[id(txn)] = done
            return done
        return self.call(start).result(TIMEOUT)

    def on_transaction_declared(self, event) -> None:
        self._declares.pop(id(event.transaction)).set_result(event.transaction)

    def on_transaction_declare_failed(self, event) -> None:
        self._declares.pop(id(event.transaction)).set_exception(AssertionError("declare failed"))

    def _discharge(self, txn, fail: bool) -> tuple[str, str | None]:
        def start():
            done: Future = Future()
            self._discharges[id(txn)] = done
            txn.abort() if fail else txn.commit()
            return done
        return self.call(start).result(TIMEOUT)

    def commit(self, txn) -> tuple[str, str | None]:
        """("committed", None), or ("failed", condition name)."""
        return self._discharge(txn, fail=False)

    def abort(self, txn) -> tuple[str, str | None]:
        return self._discharge(txn, fail=True)

    def on_transaction_committed(self, event) -> None:
        self._discharges.pop(id(event.transaction)).set_result(("committed", None))

    def on_transaction_aborted(self, event) -> None:
        self._discharges.pop(id(event.transaction)).set_result(("aborted", None))

    def on_transaction_commit_failed(self, event) -> None:
        cond = event.delivery.remote.condition
        self._discharges.pop(id(event.transaction)).set_result(("failed", cond.name if cond else None))

    # -- links and messages ---------------------------------------------------------------------
    def sender(self, address: str | None, **kw):
        return self.call(lambda: self.container.create_sender(self.conn, address, **kw))

    def sender_on_new_session(self, address: str, name: str):
        def make():
            ssn = self.conn.session()
            ssn.open()
            snd = ssn.sender(name)
            snd.target.address = address
            snd.open()
            return snd
        return self.call(make)

    def receiver(self, address: str, credit: int):
        def make():
            r = self.container.create_receiver(self.conn, address)
            self.inbox[r.name] = queues.Queue()
            r.flow(credit)
            return r
        return self.call(make)

    def send(self, sender, body, txn=None, **fields) -> Future:
        """Send one message (in `txn` when given); the future gives (state, data, condition name)
        once the broker settles it."""
        def start():
            done: Future = Future()
            message = Message(body=body, **fields)
            dlv = txn.send(sender, message) if txn is not None else sender.send(message)
            self._transfers[(sender.name, dlv.tag)] = done
            return done
        return self.call(start)

    def send_presettled(self, sender, body, txn, **fields) -> None:
        """A presettled transfer in `txn`: the broker can answer nothing. Sent once the link
        has credit: Proton holds a transfer without credit back, so a discharge sent next on
        the coordinator (which has credit) could reach the broker first."""
        wait_for(lambda: self.call(lambda: sender.credit) > 0, message="credit for the presettled sender")

        def start():
            dlv = sender.delivery(str(len(self._transfers) + 1000))
            sender.stream(Message(body=body, **fields).encode())
            dlv.local.data = [txn.id]
            dlv.update(TRANSACTIONAL_STATE)
            sender.advance()
            dlv.settle()
        self.call(start)

    def send_with_txn_id(self, sender, body, txn_id: bytes) -> Future:
        def start():
            done: Future = Future()
            dlv = sender.send(Message(body=body))
            dlv.local.data = [txn_id]
            dlv.update(TRANSACTIONAL_STATE)
            self._transfers[(sender.name, dlv.tag)] = done
            return done
        return self.call(start)

    def on_settled(self, event) -> None:
        dlv = event.delivery
        done = self._transfers.pop((dlv.link.name, dlv.tag), None)
        if done is not None:
            cond = dlv.remote.condition
            done.set_result((dlv.remote_state, dlv.remote.data, cond.name if cond else None))

    def on_message(self, event) -> None:
        self.inbox[event.receiver.name].put((event.delivery, event.message))

    def get(self, receiver, timeout: float = TIMEOUT):
        return self.inbox[receiver.name].get(timeout=timeout)

    def nothing_for(self, receiver, timeout: float = 0.3) -> bool:
        try:
            self.inbox[receiver.name].get(timeout=timeout)
        except queues.Empty:
            return True
        return False

    def accept(self, txn, delivery) -> None:
        self.call(txn.accept, delivery)

    def settled(self, delivery) -> bool:
        return self.call(lambda: delivery.settled)

    # -- connection -----------------------------------------------------------------------------
    def on_start(self, event) -> None:
        self.conn = event.container.connect(self.url)

    def on_connection_opened(self, event) -> None:
        if not self._opened.done():
            self._opened.set_result(True)

    def on_transport_error(self, event) -> None:
        if not self._opened.done():
            self._opened.set_exception(ConnectionError(str(event.transport.condition)))


def body_of(message) -> object:
    body = message.body
    return bytes(body) if isinstance(body, memoryview) else body


def take_in_transaction(client: TxClient, plain, address: str, body: str = "a", **declare):
    """Put one message `body` on `address`, receive it on `client` and accept it in a new
    transaction, which is returned."""
    send(plain, address, [body])
    delivery, _ = client.get(client.receiver(address, credit=1))
    txn = client.declare(**declare)
    client.accept(txn, delivery)
    return txn


# -- the coordinator ----------------------------------------------------------------------------
def test_coordinator_offers_the_transaction_capabilities(broker):
    client = TxClient(broker.url)
    client.declare()

    def offered():
        data = client.conn._txn_ctrl.remote_target.capabilities
        data.rewind()
        data.next()
        return data.get_object()
    caps = client.call(offered)
    assert {str(c) for c in caps} == {"amqp:local-transactions", "amqp:multi-txns-per-ssn",
                                      "amqp:multi-ssns-per-txn"}
    client.close()


def test_declare_gives_each_transaction_its_own_id(broker):
    client = TxClient(broker.url)
    first, second = client.declare(), client.declare()
    assert first.id and second.id and first.id != second.id
    client.close()


# -- transactional sends --------------------------------------------------------------------------
def test_transactional_sends_are_routed_only_at_commit(broker):
    plain = connect(broker.url)
    r = plain.create_receiver("tx.sends", credit=10)
    client = TxClient(broker.url)
    txn = client.declare()
    sender = client.sender("tx.sends")
    outcomes = [client.send(sender, f"m{i}", txn).result(TIMEOUT) for i in range(3)]
    # Settled at once with transactional-state{txn, accepted}; nothing reaches the queue yet.
    for state, data, _ in outcomes:
        assert state == TRANSACTIONAL_STATE
        assert bytes(data[0]) == bytes(txn.id) and data[1].descriptor == ulong(0x24)
    assert nothing_more(r)
    assert stats(broker.url, "tx.sends")["messages"] == 0
    assert client.commit(txn) == ("committed", None)
    assert receive_bodies(r, 3) == ["m0", "m1", "m2"]
    client.close()
    plain.close()


def test_rollback_drops_transactional_sends(broker):
    plain = connect(broker.url)
    r = plain.create_receiver("tx.dropped", credit=10)
    client = TxClient(broker.url)
    txn = client.declare()
    sender = client.sender("tx.dropped")
    for i in range(2):
        client.send(sender, f"m{i}", txn).result(TIMEOUT)
    assert client.abort(txn) == ("aborted", None)
    client.send(sender, "after").result(TIMEOUT)
    assert receive_bodies(r, 1) == ["after"]
    assert nothing_more(r)
    assert stats(broker.url, "tx.dropped")["added"] == 1
    client.close()
    plain.close()


# -- transactional acknowledgements -------------------------------------------------------------
def test_transactional_acks_are_applied_at_commit(broker):
    plain = connect(broker.url)
    send(plain, "tx.acks", ["a", "b"])
    client = TxClient(broker.url)
    r = client.receiver("tx.acks", credit=2)
    got = [client.get(r) for _ in range(2)]
    txn = client.declare()
    for delivery, _ in got:
        client.accept(txn, delivery)
    wait_for(lambda: stats(broker.url, "tx.acks")["messages"] == 2, message="still on the queue")
    assert stats(broker.url, "tx.acks")["acked"] == 0
    assert client.commit(txn) == ("committed", None)
    q = stats(broker.url, "tx.acks")
    assert (q["messages"], q["acked"]) == (0, 2)
    wait_for(lambda: all(client.settled(d) for d, _ in got), message="deliveries settled at commit")
    client.close()
    plain.close()


def test_rollback_returns_acquired_messages_to_the_queue(broker):
    plain = connect(broker.url)
    client = TxClient(broker.url)
    txn = take_in_transaction(client, plain, "tx.back")
    # The client gives back (releases) what it accepted in an aborted transaction.
    assert client.abort(txn) == ("aborted", None)
    client.close()
    again = plain.create_receiver("tx.back", credit=1).receive(timeout=TIMEOUT)
    assert (again.body, again.delivery_count) == ("a", 1)
    assert stats(broker.url, "tx.back")["acked"] == 0
    plain.close()


def test_rollback_of_a_settled_acknowledgement_puts_the_message_back_counted(broker):
    plain = connect(broker.url)
    client = TxClient(broker.url)
    txn = take_in_transaction(client, plain, "tx.settled", settle_before_discharge=True)
    assert client.abort(txn) == ("aborted", None)
    again = plain.create_receiver("tx.settled", credit=1).receive(timeout=TIMEOUT)
    assert (again.body, again.delivery_count) == ("a", 1)
    client.close()
    plain.close()


def test_unsettled_delivery_stays_with_its_consumer_after_rollback(broker):
    plain = connect(broker.url)
    send(plain, "tx.kept", ["a"])
    client = TxClient(broker.url)
    r = client.receiver("tx.kept", credit=1)
    delivery, _ = client.get(r)
    txn = client.declare()

    def accept_in_txn_without_releasing_later():
        delivery.local.data = [txn.id, Described(ulong(0x24), [])]
        delivery.update(TRANSACTIONAL_STATE)
    client.call(accept_in_txn_without_releasing_later)
    assert client.abort(txn) == ("aborted", None)
    other = plain.create_receiver("tx.kept", credit=5)
    assert nothing_more(other)  # still out with the first consumer
    assert stats(broker.url, "tx.kept")["messages"] == 1

    def accept():
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()
    client.call(accept)
    wait_for(lambda: stats(broker.url, "tx.kept")["acked"] == 1, message="acknowledged outside the transaction")
    client.close()
    plain.close()


# -- consume and produce ----------------------------------------------------------------------------
def test_consume_and_produce_in_one_committed_transaction(broker):
    plain = connect(broker.url)
    client = TxClient(broker.url)
    shipping = client.sender("tx.shipping")
    txn = take_in_transaction(client, plain, "tx.orders", "order-1")
    client.send(shipping, "shipped order-1", txn).result(TIMEOUT)
    assert client.commit(txn) == ("committed", None)
    assert stats(broker.url, "tx.orders")["messages"] == 0
    assert receive_bodies(plain.create_receiver("tx.shipping", credit=1), 1) == ["shipped order-1"]
    client.close()
    plain.close()


def test_consume_and_produce_rolled_back_leaves_both_queues_as_they_were(broker):
    plain = connect(broker.url)
    shipped = plain.create_receiver("tx.shipping2", credit=5)
    client = TxClient(broker.url)
    shipping = client.sender("tx.shipping2")
    txn = take_in_transaction(client, plain, "tx.orders2", "order-1")
    client.send(shipping, "shipped order-1", txn).result(TIMEOUT)
    assert client.abort(txn) == ("aborted", None)
    client.close()
    assert receive_bodies(plain.create_receiver("tx.orders2", credit=1), 1) == ["order-1"]
    assert nothing_more(shipped)
    plain.close()


# -- refusals ---------------------------------------------------------------------------------------
def test_discharge_of_an_unknown_transaction_is_rejected_with_illegal_state(broker):
    client = TxClient(broker.url)
    txn = client.declare()
    assert client.commit(txn) == ("committed", None)
    assert client.commit(txn) == ("failed", "amqp:illegal-state")  # already discharged
    client.close()


def test_transfer_naming_an_unknown_transaction_is_rejected_with_illegal_state(broker):
    plain = connect(broker.url)
    r = plain.create_receiver("tx.unknown", credit=5)
    client = TxClient(broker.url)
    sender = client.sender("tx.unknown")
    state, _, condition = client.send_with_txn_id(sender, "m", b"no-such-txn").result(TIMEOUT)
    assert (state, condition) == (Delivery.REJECTED, "amqp:illegal-state")
    assert nothing_more(r)
    client.close()
    plain.close()


def test_commit_of_a_rollback_only_transaction_is_rejected_with_the_recorded_cause(broker):
    plain = connect(broker.url)
    r = plain.create_receiver("tx.doomed", credit=5)
    client = TxClient(broker.url)
    txn = client.declare()
    good = client.sender("tx.doomed")
    client.send(good, "kept back", txn).result(TIMEOUT)
    # A presettled transfer with no `to` on an anonymous link cannot be routed: it is dropped
    # and the transaction can only roll back.
    relay = client.sender(None, options=AtMostOnce())
    client.send_presettled(relay, "lost", txn)
    assert client.commit(txn) == ("failed", "failed")
    assert nothing_more(r)
    client.close()
    plain.close()


def test_a_presettled_send_to_a_full_address_dooms_the_transaction(start_broker):
    b = start_broker(config="""
[[address_settings]]
match = "full.#"
max_size_bytes = 2000
address_full_policy = "fail"
""")
    client = TxClient(b.url)
    sender = client.sender("full.tx")
    for _ in range(100):  # fill the address until the fail policy refuses
        state, _, condition = client.send(sender, b"x" * 500).result(TIMEOUT)
        if state == Delivery.REJECTED:
            assert condition == "amqp:resource-limit-exceeded"
            break
    else:
        raise AssertionError("the address never filled up")
    txn = client.declare()
    client.send_presettled(client.sender("full.tx", name="presettled", options=AtMostOnce()), b"y" * 500, txn)
    assert client.commit(txn) == ("failed", "amqp:resource-limit-exceeded")
    client.close()


def test_a_transactional_send_to_a_composite_part_whose_queue_is_gone_is_refused_not_found(broker):
    client = TxClient(broker.url)
    sender = client.sender("txc.kept,txc.gone")
    presettled = client.sender("txc.kept,txc.gone", name="presettled", options=AtMostOnce())
    wait_for(lambda: "txc.gone" in {r["queue"] for r in management_call(broker.url, "queue.stat")})
    management_call(broker.url, "queue.delete", args={"name": "txc.gone"})
    txn = client.declare()
    state, _, condition = client.send(sender, "unsettled", txn).result(TIMEOUT)
    assert (state, condition) == (Delivery.REJECTED, "amqp:not-found")
    assert client.commit(txn) == ("committed", None)  # a refused unsettled send is the client's to handle
    txn = client.declare()
    client.send_presettled(presettled, "presettled", txn)  # dropped: the transaction must not commit
    assert client.commit(txn) == ("failed", "amqp:not-found")
    assert stats(broker.url, "txc.kept")["messages"] == 0
    client.close()


def test_a_transactional_send_to_a_composite_with_a_full_fail_part_is_refused(start_broker):
    b = start_broker(config="""
[[address_settings]]
match = "txfull.#"
max_size_bytes = 1000
address_full_policy = "fail"
""")
    plain = connect(b.url)
    plain.create_sender("txfull.b").send(Message(body=b"x" * 1500))  # over the limit: full from now on
    client = TxClient(b.url)
    sender = client.sender("txplain.a,txfull.b")
    txn = client.declare()
    state, _, condition = client.send(sender, "unsettled", txn).result(TIMEOUT)
    assert (state, condition) == (Delivery.REJECTED, "amqp:resource-limit-exceeded")
    assert client.commit(txn) == ("committed", None)
    txn = client.declare()
    client.send_presettled(client.sender("txplain.a,txfull.b", name="presettled", options=AtMostOnce()),
                           "presettled", txn)
    assert client.commit(txn) == ("failed", "amqp:resource-limit-exceeded")
    assert (stats(b.url, "txplain.a").get("messages", 0), stats(b.url, "txfull.b")["messages"]) == (0, 1)
    client.close()
    plain.close()


# -- several transactions and sessions -----------------------------------------------------------
def test_several_transactions_on_one_session_are_independent(broker):
    plain = connect(broker.url)
    r = plain.create_receiver("tx.many", credit=10)
    client = TxClient(broker.url)
    first, second, third = client.declare(), client.declare(), client.declare()
    sender = client.sender("tx.many")
    client.send(sender, "first", first).result(TIMEOUT)
    client.send(sender, "second", second).result(TIMEOUT)
    client.send(sender, "third", third).result(TIMEOUT)
    assert client.commit(second) == ("committed", None)
    assert receive_bodies(r, 1) == ["second"]
    assert client.abort(first) == ("aborted", None)
    assert client.commit(third) == ("committed", None)
    assert receive_bodies(r, 1) == ["third"]
    assert nothing_more(r)
    client.close()
    plain.close()


def test_one_transaction_spans_links_on_several_sessions(broker):
    plain = connect(broker.url)
    r = plain.create_receiver("tx.sessions", credit=10)
    client = TxClient(broker.url)
    txn = client.declare()
    a = client.sender("tx.sessions")
    b = client.sender_on_new_session("tx.sessions", "other-session")
    client.send(a, "from a", txn).result(TIMEOUT)
    client.send(b, "from b", txn).result(TIMEOUT)
    assert nothing_more(r)
    assert client.commit(txn) == ("committed", None)
    assert sorted(receive_bodies(r, 2)) == ["from a", "from b"]
    client.close()
    plain.close()


def test_a_transaction_is_known_only_on_the_connection_that_declared_it(broker):
    plain = connect(broker.url)
    r = plain.create_receiver("tx.owned", credit=10)
    owner, other = TxClient(broker.url), TxClient(broker.url)
    owner.declare()
    txn = owner.declare()  # ids count per connection: the other's first one is not this one
    other.declare()  # the other connection has transactions of its own, just not this one
    state, _, condition = other.send_with_txn_id(other.sender("tx.owned"), "stolen", bytes(txn.id)).result(TIMEOUT)
    assert (state, condition) == (Delivery.REJECTED, "amqp:illegal-state")
    owner.send(owner.sender("tx.owned"), "owned", txn).result(TIMEOUT)
    assert owner.commit(txn) == ("committed", None)
    assert receive_bodies(r, 1) == ["owned"]
    assert nothing_more(r)
    owner.close()
    other.close()
    plain.close()


def test_closing_the_connection_rolls_back_open_transactions(broker):
    plain = connect(broker.url)
    r = plain.create_receiver("tx.closed.out", credit=5)
    client = TxClient(broker.url)
    txn = take_in_transaction(client, plain, "tx.closed")
    client.send(client.sender("tx.closed.out"), "never", txn).result(TIMEOUT)
    client.close()
    assert receive_bodies(plain.create_receiver("tx.closed", credit=1), 1) == ["a"]
    assert nothing_more(r)
    plain.close()


# -- with the store ---------------------------------------------------------------------------------
def test_committed_durable_work_survives_a_restart_and_rolled_back_work_does_not(start_broker, tmp_path):
    store = f"sqlite:///{tmp_path / 'hermod.db'}"
    b = start_broker(store=store)
    plain = connect(b.url)
    send(plain, "tx.durable", ["keep", "take"], durable=True)
    client = TxClient(b.url)
    r = client.receiver("tx.durable", credit=2)
    got = {body_of(m): d for d, m in (client.get(r), client.get(r))}
    sender = client.sender("tx.durable")
    committed = client.declare()
    client.accept(committed, got["take"])
    client.send(sender, "new", committed, durable=True).result(TIMEOUT)
    assert client.commit(committed) == ("committed", None)
    rolled_back = client.declare()
    client.send(sender, "never", rolled_back, durable=True).result(TIMEOUT)
    assert client.abort(rolled_back) == ("aborted", None)
    client.close()
    plain.close()
    assert b.stop() == 0

    again = start_broker(store=store)
    conn = connect(again.url)
    r = conn.create_receiver("tx.durable", credit=10)
    assert receive_bodies(r, 2) == ["keep", "new"]
    assert nothing_more(r)
    conn.close()
