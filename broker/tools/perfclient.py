"""A load generator on Proton's engine, driven raw through the binding's cffi layer.

Proton's own client API (`Container`, `BlockingConnection`) wraps every engine event in Python
objects and tops out near 5k msg/s, which would measure the client rather than the broker. This
module owns its sockets and a `selectors` loop, and drives one `pn_transport` + `pn_collector`
per connection through `cproton_ffi.lib`: engine events are read as integers, socket reads are
256 KiB and are pushed into the transport in capacity-sized pieces, and no `proton.Message` exists
per message. The message is encoded once; each send patches a fixed 24-byte stamp at the end of
the body (magic, sequence number, send time in ns), which every broker passes through untouched
because it is inside the body section. The consumer reads the stamp back from the received bytes.

One process, one thread: the producer and the consumer are two connections on the same loop, so
their timestamps come from the same clock.
"""
from __future__ import annotations

import os
import selectors
import socket
import struct
import time

from cproton_ffi import ffi, lib

READ_CHUNK = 256 * 1024
OUT_CHUNK = 256 * 1024
MAGIC = b"HrmdPerf"
STAMP = struct.Struct("<8sQQ")  # magic, sequence number, send time (perf_counter_ns)
STAMP_SIZE = STAMP.size  # 24
_SEQ_TS = struct.Struct("<QQ")

_DELIVERY = lib.PN_DELIVERY
_LINK_REMOTE_OPEN = lib.PN_LINK_REMOTE_OPEN
_LINK_REMOTE_CLOSE = lib.PN_LINK_REMOTE_CLOSE
_LINK_REMOTE_DETACH = lib.PN_LINK_REMOTE_DETACH
_SESSION_REMOTE_CLOSE = lib.PN_SESSION_REMOTE_CLOSE
_CONNECTION_REMOTE_CLOSE = lib.PN_CONNECTION_REMOTE_CLOSE
_TRANSPORT_ERROR = lib.PN_TRANSPORT_ERROR
_TRANSPORT_CLOSED = lib.PN_TRANSPORT_CLOSED
PN_ACCEPTED = lib.PN_ACCEPTED
NULL = ffi.NULL


class PerfError(Exception):
    """The run could not go on (connect failure, refused attach, broker closed the connection)."""


def _str(ptr) -> str:
    return ffi.string(ptr).decode("utf-8", "replace") if ptr != NULL else ""


def _condition(cond) -> str:
    if cond == NULL or not lib.pn_condition_is_set(cond):
        return ""
    return f"{_str(lib.pn_condition_get_name(cond))}: {_str(lib.pn_condition_get_description(cond))}"


def encode_message(size: int, durable: bool, properties: dict | None = None) -> bytes:
    """The message every send reuses: a header (durable flag), the application `properties` if
    any, and one data section of `size` bytes whose last 24 bytes are the stamp slot. Encoded
    with Proton's codec once (cold path)."""
    from proton import Message

    body = bytes((i * 7 + 65) & 0x7F or 1 for i in range(size))
    msg = Message(body=body, durable=durable, inferred=True, properties=properties)
    data = msg.encode()
    if not data.endswith(body):
        raise RuntimeError("the encoded message does not end with its body")
    return data


# -- one connection ---------------------------------------------------------------------------


class Endpoint:
    """A client connection: socket + transport + collector, one session, and the handlers of its
    links (`roles`: Producer / Consumer, found by the event's link)."""

    def __init__(self, client: "Client", host: str, port: int, hostname: str, container_id: str):
        self.client = client
        self.roles: dict = {}  # link (cdata pointer, hashed by address) -> its Producer/Consumer
        self.closed = False
        self.error = ""
        self.remote_closed = False
        try:
            sock = socket.create_connection((host, port), timeout=10)
        except OSError as e:
            raise PerfError(f"cannot connect to {host}:{port}: {e}") from None
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.conn = lib.pn_connection()
        self.transport = lib.pn_transport()
        self.collector = lib.pn_collector()
        t = self.transport
        if client.tls:
            domain = lib.pn_ssl_domain(lib.PN_SSL_MODE_CLIENT)
            lib.pn_ssl_domain_set_peer_authentication(domain, lib.PN_SSL_ANONYMOUS_PEER, ffi.NULL)
            lib.pn_ssl_init(lib.pn_ssl(t), domain, ffi.NULL)
            lib.pn_ssl_domain_free(domain)
        lib.pn_sasl_allowed_mechs(lib.pn_sasl(t), b"ANONYMOUS")
        lib.pn_connection_collect(self.conn, self.collector)
        lib.pn_connection_set_container(self.conn, container_id.encode())
        lib.pn_connection_set_hostname(self.conn, hostname.encode())
        lib.pn_transport_bind(t, self.conn)
        lib.pn_connection_open(self.conn)
        self.session = lib.pn_session(self.conn)
        lib.pn_session_open(self.session)
        self._in = bytearray(READ_CHUNK)
        self._in_ptr = ffi.from_buffer("char[]", self._in)
        self._in_view = memoryview(self._in)
        self._out_size = OUT_CHUNK
        self._out = ffi.new("char[]", self._out_size)
        self._want_write = False
        client.selector.register(sock, selectors.EVENT_READ, self)

    # -- input ---------------------------------------------------------------------------------
    def on_readable(self) -> None:
        try:
            n = self.sock.recv_into(self._in, READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self.error = self.error or f"socket: {e}"
            n = 0
        t = self.transport
        if n == 0:
            lib.pn_transport_close_tail(t)
            self.process()
            self._drop_socket()
            return
        ptr = self._in_ptr
        pos = 0
        while pos < n:
            capacity = lib.pn_transport_capacity(t)
            if capacity <= 0:
                if capacity == 0:
                    self.process()
                    capacity = lib.pn_transport_capacity(t)
                if capacity <= 0:
                    break
            pushed = lib.pn_transport_push(t, ptr + pos, min(capacity, n - pos))
            if pushed < 0:
                break
            pos += pushed
        self.process()

    def add_role(self, role) -> None:
        self.roles[role.link] = role

    # -- engine events -------------------------------------------------------------------------
    def process(self) -> None:
        col = self.collector
        peek, pop, etype = lib.pn_collector_peek, lib.pn_collector_pop, lib.pn_event_type
        roles = self.roles
        # The usual case is one link per connection: no lookup per event then.
        only = next(iter(roles.values())) if len(roles) == 1 else None
        # A consumer drains its whole link once after the batch (one PN_DELIVERY per transfer
        # would otherwise mean one Python call each); a producer settles each disposition.
        to_drain: set = set()
        while True:
            ev = peek(col)
            if ev == NULL:
                break
            kind = etype(ev)
            if kind == _DELIVERY:
                d = lib.pn_event_delivery(ev)
                role = only or roles.get(lib.pn_delivery_link(d))
                if role is None:
                    pass
                elif role.drains_link:
                    to_drain.add(role)
                else:
                    role.on_delivery(d)
            elif kind == _LINK_REMOTE_OPEN:
                role = only or roles.get(lib.pn_event_link(ev))
                if role is not None:
                    role.on_open()
            elif kind == _LINK_REMOTE_CLOSE or kind == _LINK_REMOTE_DETACH:
                link = lib.pn_event_link(ev)
                self.error = self.error or ("link closed by the broker: " + (
                    _condition(lib.pn_link_remote_condition(link)) or "no condition"))
            elif kind == _SESSION_REMOTE_CLOSE:
                self.error = self.error or ("session ended by the broker: " + (
                    _condition(lib.pn_session_remote_condition(lib.pn_event_session(ev))) or "no condition"))
            elif kind == _CONNECTION_REMOTE_CLOSE:
                self.remote_closed = True
                if not self.client.finishing:
                    self.error = self.error or ("connection closed by the broker: " + (
                        _condition(lib.pn_connection_remote_condition(self.conn)) or "no condition"))
                if lib.pn_connection_state(self.conn) & lib.PN_LOCAL_ACTIVE:
                    lib.pn_connection_close(self.conn)
            elif kind == _TRANSPORT_ERROR:
                if not self.client.finishing:
                    self.error = self.error or ("transport error: " + (
                        _condition(lib.pn_transport_condition(self.transport)) or "?"))
            elif kind == _TRANSPORT_CLOSED:
                self.closed = True
            pop(col)
        for role in to_drain:
            role.drain()

    # -- output --------------------------------------------------------------------------------
    def flush(self) -> None:
        if self._want_write or self.sock is None:
            return
        t = self.transport
        send = self.sock.send
        while True:
            pending = lib.pn_transport_pending(t)
            if pending <= 0:
                if pending < 0 and self.closed:
                    self._drop_socket()
                return
            n = lib.pn_transport_peek(t, self._out, min(pending, self._out_size))
            if n < 0:
                return
            try:
                sent = send(ffi.buffer(self._out, n))
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as e:
                self.error = self.error or f"socket: {e}"
                lib.pn_transport_close_head(t)
                self._drop_socket()
                return
            if sent:
                lib.pn_transport_pop(t, sent)
            if sent < n:
                self._want_write = True
                self.client.selector.modify(self.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, self)
                return

    def on_writable(self) -> None:
        self._want_write = False
        self.client.selector.modify(self.sock, selectors.EVENT_READ, self)
        self.flush()

    def tick(self, now_ms: int) -> None:
        if self.sock is not None:
            lib.pn_transport_tick(self.transport, now_ms)

    def close(self) -> None:
        if lib.pn_connection_state(self.conn) & lib.PN_LOCAL_ACTIVE:
            lib.pn_connection_close(self.conn)

    def _drop_socket(self) -> None:
        if self.sock is not None:
            try:
                self.client.selector.unregister(self.sock)
            except (KeyError, ValueError):
                pass
            self.sock.close()
            self.sock = None
            self.closed = True

    def release(self) -> None:
        self._drop_socket()
        self.roles = {}  # break the endpoint <-> role cycle
        if self.transport is not None:
            lib.pn_transport_unbind(self.transport)
            lib.pn_decref(self.transport)
            # pn_connection_free() is not in the cffi layer: it is release + decref. Without the
            # decref the connection and everything under it (deliveries' buffers included) leaks.
            lib.pn_connection_release(self.conn)
            lib.pn_decref(self.conn)
            lib.pn_collector_free(self.collector)
            self.transport = self.conn = self.collector = None


# -- the two link roles --------------------------------------------------------------------------


_TAGS = b"".join(i.to_bytes(8, "little") for i in range(65536))


class Producer:
    """Sends `count` messages, as fast as credit allows or at a fixed rate."""

    drains_link = False

    def __init__(self, ep: Endpoint, address: str, message: bytes, count: int, presettled: bool,
                 stamp: bool = True, name: str = "hermod-perf-sender"):
        self.ep = ep
        self.count = count
        self.sent = 0
        self.acked = 0
        self.rejected = 0
        self.opened = False
        self.presettled = presettled
        self.link = lib.pn_sender(ep.session, name.encode())
        lib.pn_terminus_set_address(lib.pn_link_target(self.link), address.encode())
        lib.pn_terminus_set_address(lib.pn_link_source(self.link), name.encode())
        if presettled:
            lib.pn_link_set_snd_settle_mode(self.link, lib.PN_SND_SETTLED)
        lib.pn_link_open(self.link)
        self._msg = bytearray(message)
        self._msg_ptr = ffi.from_buffer("char[]", self._msg)
        self._msg_len = len(message)
        self._stamp_at = len(message) - STAMP_SIZE
        self._stamped = stamp and self._stamp_at >= 0  # the body must hold the 24-byte stamp
        if self._stamped:
            STAMP.pack_into(self._msg, self._stamp_at, MAGIC, 0, 0)
        self._seq_at = self._stamp_at + 8
        # Delivery tags: 8-byte little-endian counters, 65,536 of them reused round-robin.
        self._tags = ffi.new("char[]", 8 * 65536)
        ffi.memmove(self._tags, _TAGS, 8 * 65536)
        ep.add_role(self)

    def on_open(self) -> None:
        if lib.pn_terminus_get_type(lib.pn_link_remote_target(self.link)) == lib.PN_UNSPECIFIED:
            return  # a refusal: the detach with the error follows
        self.opened = True

    def send(self, limit: int) -> int:
        """Send up to `limit` messages as credit allows; returns how many were sent."""
        link = self.link
        n = min(lib.pn_link_credit(link), limit, self.count - self.sent)
        if n <= 0:
            return 0
        delivery, link_send, advance, settle = lib.pn_delivery, lib.pn_link_send, lib.pn_link_advance, lib.pn_delivery_settle
        msg, ptr, size, tags = self._msg, self._msg_ptr, self._msg_len, self._tags
        pack, at, stamped, presettled = _SEQ_TS.pack_into, self._seq_at, self._stamped, self.presettled
        clock = time.perf_counter_ns
        seq = self.sent
        for _ in range(n):
            if stamped:
                pack(msg, at, seq, clock())
            d = delivery(link, (8, tags + ((seq & 0xFFFF) << 3)))
            link_send(link, ptr, size)
            advance(link)
            if presettled:
                settle(d)
            seq += 1
        self.sent = seq
        return n

    def on_delivery(self, d) -> None:
        """The broker's disposition for a message we sent."""
        state = lib.pn_delivery_remote_state(d)
        if state or lib.pn_delivery_settled(d):
            if state != PN_ACCEPTED and state:
                self.rejected += 1
            else:
                self.acked += 1
            lib.pn_delivery_settle(d)


class Consumer:
    """Receives messages, accepts and settles each, keeps the window of credit topped up."""

    drains_link = True

    def __init__(self, ep: Endpoint, address: str, credit: int, record_latency: bool,
                 selector: str | None = None, name: str = "hermod-perf-receiver"):
        self.ep = ep
        self.credit = credit
        self.received = 0
        self.unstamped = 0
        self.opened = False
        self.record_latency = record_latency
        self.latencies_ns: list[int] = []
        self.last_seq = -1
        self.out_of_order = 0
        self.first_ns = 0
        self.last_ns = 0
        self.link = lib.pn_receiver(ep.session, name.encode())
        source = lib.pn_link_source(self.link)
        lib.pn_terminus_set_address(source, address.encode())
        if selector:
            _set_selector(source, selector)
        lib.pn_terminus_set_address(lib.pn_link_target(self.link), name.encode())
        lib.pn_link_open(self.link)
        if credit:
            lib.pn_link_flow(self.link, credit)
        self._buf_size = 64 * 1024
        self._buf = bytearray(self._buf_size)
        self._buf_ptr = ffi.from_buffer("char[]", self._buf)
        ep.add_role(self)

    def on_open(self) -> None:
        if lib.pn_terminus_get_type(lib.pn_link_remote_source(self.link)) == lib.PN_UNSPECIFIED:
            return
        self.opened = True

    def on_delivery(self, d) -> None:
        self.drain()

    def drain(self) -> None:
        """Take every complete delivery the link has (partial ones wait for their last frame)."""
        link = self.link
        current, readable, partial = lib.pn_link_current, lib.pn_delivery_readable, lib.pn_delivery_partial
        pending, recv, advance = lib.pn_delivery_pending, lib.pn_link_recv, lib.pn_link_advance
        update, settle = lib.pn_delivery_update, lib.pn_delivery_settle
        buf, ptr = self._buf, self._buf_ptr
        record = self.record_latency
        got = 0
        d = current(link)
        while d != NULL and readable(d) and not partial(d):
            n = pending(d)
            if n > self._buf_size:
                self._buf_size = n
                self._buf = buf = bytearray(n)
                self._buf_ptr = ptr = ffi.from_buffer("char[]", buf)
            n = recv(link, ptr, n)
            advance(link)
            update(d, PN_ACCEPTED)
            settle(d)
            got += 1
            if record:
                self._stamp(buf, n)
            d = current(link)
        if got:
            self.received += got
            self.last_ns = time.perf_counter_ns()
            if not self.first_ns:
                self.first_ns = self.last_ns
            credit = lib.pn_link_credit(link)
            if credit <= self.credit // 2:
                lib.pn_link_flow(link, self.credit - credit)

    def _stamp(self, buf: bytearray, n: int) -> None:
        now = time.perf_counter_ns()
        at = n - STAMP_SIZE
        if at < 0 or buf[at:at + 8] != MAGIC:
            at = bytes(buf[:n]).rfind(MAGIC)  # a broker added something after the body
            if at < 0 or at + STAMP_SIZE > n:
                self.unstamped += 1
                return
        seq, ts = _SEQ_TS.unpack_from(buf, at + 8)
        if seq <= self.last_seq:
            self.out_of_order += 1
        self.last_seq = seq
        self.latencies_ns.append((seq, now - ts))


SELECTOR_DESCRIPTOR = 0x0000468C00000004  # apache.org:selector-filter:string


def _set_selector(source, selector: str) -> None:
    """The source's filter set: {"jms-selector": described(selector-filter, selector)}."""
    data = lib.pn_terminus_filter(source)
    lib.pn_data_put_map(data)
    lib.pn_data_enter(data)
    lib.pn_data_put_symbol(data, _bytes(b"jms-selector"))
    lib.pn_data_put_described(data)
    lib.pn_data_enter(data)
    lib.pn_data_put_ulong(data, SELECTOR_DESCRIPTOR)
    lib.pn_data_put_string(data, _bytes(selector.encode()))
    lib.pn_data_exit(data)
    lib.pn_data_exit(data)


def _bytes(raw: bytes):
    """A pn_bytes_t for the pn_data_put_* calls (cffi copies the struct; the buffer must live
    until the call returns, which the caller's reference ensures)."""
    return (len(raw), ffi.from_buffer(raw))


# -- the loop ------------------------------------------------------------------------------------


class Client:
    def __init__(self, host: str, port: int, hostname: str | None = None, tls: bool = False):
        self.host, self.port = host, port
        self.tls = tls  # amqps: Proton's own TLS on the client side (no server verification:
        # the load generator measures the broker, it does not authenticate it)
        self.hostname = hostname or host
        self.selector = selectors.DefaultSelector()
        self.endpoints: list[Endpoint] = []
        self.finishing = False
        self._last_tick = 0.0

    def connect(self, name: str) -> Endpoint:
        ep = Endpoint(self, self.host, self.port, self.hostname, f"hermod-perf-{name}-{os.getpid()}")
        self.endpoints.append(ep)
        return ep

    def turn(self, timeout: float | None) -> None:
        """One loop turn: wait for IO (at most `timeout` s), handle it, write all output."""
        for ep in self.endpoints:
            ep.flush()
        for key, mask in self.selector.select(timeout):
            ep = key.data
            if mask & selectors.EVENT_READ:
                ep.on_readable()
            if mask & selectors.EVENT_WRITE and ep.sock is not None:
                ep.on_writable()
        now = time.monotonic()
        if now - self._last_tick > 0.5:
            self._last_tick = now
            ms = int(now * 1000)
            for ep in self.endpoints:
                ep.tick(ms)
        for ep in self.endpoints:
            ep.flush()

    def errors(self) -> str:
        return "; ".join(ep.error for ep in self.endpoints if ep.error)

    def wait_for(self, done, deadline: float, what: str) -> None:
        while not done():
            err = self.errors()
            if err:
                raise PerfError(err)
            if time.monotonic() > deadline:
                raise PerfError(f"timed out waiting for {what}")
            self.turn(0.05)

    def close(self, grace: float = 2.0) -> None:
        self.finishing = True
        for ep in self.endpoints:
            if ep.sock is not None:
                ep.close()
        end = time.monotonic() + grace
        while any(ep.sock is not None and not ep.remote_closed for ep in self.endpoints) and time.monotonic() < end:
            self.turn(0.05)
        for ep in self.endpoints:
            ep.release()
        self.selector.close()
