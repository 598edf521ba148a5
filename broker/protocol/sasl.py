"""The SASL layer, run by Hermod in front of Proton.

Proton 0.40's own SASL server offers only ANONYMOUS and EXTERNAL, so Hermod reads the first
bytes of every connection itself: the SASL protocol header, then sasl-init / sasl-response
frames, answered with sasl-mechanisms / sasl-challenge / sasl-outcome. Only after a successful
outcome (and an AMQP protocol header behind it) are the following bytes handed to the
`pn_transport`, which has no SASL layer of its own. Proton therefore never sees a byte of an
unauthenticated connection: skipping SASL, ignoring a failed outcome or sending AMQP frames
before the outcome all end at this gate.

A bare AMQP header is accepted as the anonymous user when anonymous logins are allowed (clients
that skip SASL keep working with the embedded default); otherwise it is answered with the AMQP
header, an open and a close carrying `amqp:unauthorized-access`, and nothing of it reaches Proton.
"""
from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING, Callable

from ..security.auth import ANONYMOUS, Authenticator, Principal
from ..security.scram import HASHES, ScramError, ScramServer
from .amqptypes import DecodeError, Described, Symbol, UByte, ULong, decode, encode

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("hermod.security")

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
TLS_HEADER = b"AMQP\x02\x01\x00\x00"
MAX_SASL_FRAME = 64 * 1024  # SASL frames are small; a larger one is an attack, not a login
MAX_STEPS = 4

SASL_MECHANISMS, SASL_INIT, SASL_CHALLENGE, SASL_RESPONSE, SASL_OUTCOME = 0x40, 0x41, 0x42, 0x43, 0x44
_BY_SYMBOL = {"amqp:sasl-init:list": SASL_INIT, "amqp:sasl-response:list": SASL_RESPONSE}
OK, AUTH, SYS, SYS_PERM = 0, 1, 2, 3

# What a client may send behind a sasl-init or sasl-response while its password is checked (a
# pipelined AMQP header, open, begin and attach): kept for Proton, up to this much.
MAX_PENDING_INPUT = 1024 * 1024

_HEADER, _INIT, _RESPONSE, _AMQP_HEADER, _DONE, _FAILED, _CHECKING = range(7)


def _frame(frame_type: int, body: bytes) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, frame_type, 0) + body


def _performative(code: int, fields: list) -> bytes:
    """The descriptor as smallulong (`00 53 code`), as every AMQP peer writes it: some clients
    (Azure's _pyamqp) read a frame's type from its third byte and misread the 8-byte ulong form."""
    return b"\x00\x53" + bytes((code,)) + encode(fields)


def sasl_frame(code: int, fields: list) -> bytes:
    return _frame(1, _performative(code, fields))


def _symbol_array(symbols: list[str]) -> bytes:
    """sasl-server-mechanisms is a multiple symbol field: an array of sym8 (or sym32)."""
    raw = [s.encode("ascii") for s in symbols]
    if all(len(r) < 256 for r in raw):
        body = b"\xa3" + b"".join(bytes((len(r),)) + r for r in raw)
    else:
        body = b"\xb3" + b"".join(struct.pack(">I", len(r)) + r for r in raw)
    return b"\xf0" + struct.pack(">II", len(body) + 4, len(raw)) + body


def mechanisms_frame(mechs: list[str]) -> bytes:
    fields = b"\xd0" + struct.pack(">II", len(_symbol_array(mechs)) + 4, 1) + _symbol_array(mechs)
    return _frame(1, b"\x00\x53\x40" + fields)


def refusal(container_id: str, description: str) -> bytes:
    """AMQP header, open and close with amqp:unauthorized-access: the answer to a connection
    that skipped SASL when anonymous logins are off."""
    error = Described(ULong(0x1D), [Symbol("amqp:unauthorized-access"), description])
    return (AMQP_HEADER + _frame(0, _performative(0x10, [container_id]))
            + _frame(0, _performative(0x18, [error])))


class SaslGate:
    """The SASL exchange of one connection. `feed(data)` returns the bytes for Proton once the
    connection is authenticated (the gate is then done), None while it is not."""

    def __init__(self, conn: Connection, auth: Authenticator, mechanisms: list[str],
                 host: str, external_user: str | None, on_done: Callable[[Principal], None]):
        self.conn = conn
        self.auth = auth
        self.offered = mechanisms
        self.host = host
        self.external_user = external_user
        self.on_done = on_done
        self.state = _HEADER
        self.buf = bytearray()
        self.mechanism = ""
        self.steps = 0
        self._scram: ScramServer | None = None
        self._scram_user = ""
        self._pending: asyncio.Task | None = None  # the login throttle's turn for this login

    # -- input -----------------------------------------------------------------------------------
    def feed(self, data: bytes) -> bytes | None:
        if self.state == _FAILED:
            return None  # whatever a refused client sends after its outcome goes nowhere
        self.buf += data
        if self.state == _CHECKING:
            if len(self.buf) > MAX_PENDING_INPUT:
                self._drop(f"sent over {MAX_PENDING_INPUT} bytes while its login was checked")
            return None
        while self.state not in (_DONE, _FAILED, _CHECKING):
            if self.state == _HEADER:
                if not self._header():
                    return None
            elif self.state == _AMQP_HEADER:
                if len(self.buf) < 8:
                    return None
                if bytes(self.buf[:8]) != AMQP_HEADER:
                    return self._drop("sent something other than the AMQP header after SASL")
                self.state = _DONE
            else:
                frame = self._next_frame()
                if frame is None:
                    return None
                if frame is not False:
                    self._on_frame(frame)
        if self.state == _DONE:
            rest, self.buf = bytes(self.buf), bytearray()
            return rest
        return None

    def _header(self) -> bool:
        if len(self.buf) < 8:
            if not b"AMQP".startswith(bytes(self.buf[:4])):
                self._drop("did not start with an AMQP protocol header")
            return False
        header = bytes(self.buf[:8])
        if header == SASL_HEADER:
            del self.buf[:8]
            self.conn.socket.write(SASL_HEADER + mechanisms_frame(self.offered))
            self.state = _INIT
            return True
        if header == AMQP_HEADER:
            if self.auth.anonymous:
                if not self._admit(ANONYMOUS, sasl=False):
                    return False
                log.info("connection %s logged in as anonymous (no SASL)", self.conn.peer)
                self.state = _DONE  # the header stays in the buffer: Proton reads it
                return True
            log.info("connection %s skipped SASL: refused (anonymous logins are off)", self.conn.peer)
            self.state = _FAILED
            self.conn.socket.write(refusal(self.conn.broker.container_id,
                                           "authentication required: anonymous logins are off"))
            self.conn.socket.close()
            return False
        if header.startswith(b"AMQP"):
            self.conn.socket.write(SASL_HEADER)
            return self._drop(f"asked for protocol {header[4:].hex()}, not SASL or AMQP")
        return self._drop("did not start with an AMQP protocol header")

    def _next_frame(self):
        """One SASL frame body (bytes), False for an empty frame, None for more input needed."""
        if len(self.buf) < 8:
            return None
        size, doff, ftype = struct.unpack_from(">IBB", self.buf, 0)
        if size < 8 or size > MAX_SASL_FRAME or doff < 2 or doff * 4 > size:
            return self._drop(f"sent a malformed SASL frame (size {size})")
        if ftype != 1:
            return self._drop("sent an AMQP frame before SASL ended")
        if len(self.buf) < size:
            return None
        body = bytes(self.buf[doff * 4:size])
        del self.buf[:size]
        return body if body else False

    # -- the exchange ----------------------------------------------------------------------------
    def _on_frame(self, body: bytes) -> None:
        try:
            value, _ = decode(body)
        except DecodeError:
            self._drop("sent an undecodable SASL frame")
            return
        if not isinstance(value, Described) or not isinstance(value.value, list):
            self._drop("sent a SASL frame that is not a performative")
            return
        code = _BY_SYMBOL.get(value.descriptor, value.descriptor) if isinstance(value.descriptor, str) \
            else value.descriptor
        fields = value.value
        self.steps += 1
        if self.steps > MAX_STEPS:
            self._drop("sent too many SASL frames")
        elif self.state == _INIT and code == SASL_INIT:
            mech = fields[0] if fields else None
            response = fields[1] if len(fields) > 1 else None
            self._init(mech, response)
        elif self.state == _RESPONSE and code == SASL_RESPONSE:
            response = fields[0] if fields else None
            self._respond(response if isinstance(response, bytes) else b"")
        else:
            self._drop(f"sent SASL performative {code!r} out of turn")

    def _init(self, mech, response) -> None:
        if not isinstance(mech, str) or mech not in self.offered:
            self._fail(f"mechanism {mech!r} is not offered", str(mech))
            return
        self.mechanism = mech
        if response is not None and not isinstance(response, bytes):
            self._drop("sent a sasl-init whose initial response is not binary")
            return
        if mech == "ANONYMOUS":
            self._succeed(ANONYMOUS)
        elif mech == "EXTERNAL":
            self._external(response or b"")
        elif response is None:
            self._challenge(b"")  # the client waits for an empty challenge before its response
        else:
            self._respond(response)

    def _respond(self, response: bytes) -> None:
        mech = self.mechanism
        if mech == "PLAIN":
            self._plain(response)
        elif mech in HASHES:
            self._scram_step(response)
        else:
            self._drop("sent a sasl-response for a mechanism that takes none")

    def _plain(self, response: bytes) -> None:
        parts = response.split(b"\x00")
        if len(parts) != 3:
            self._fail("malformed PLAIN response", "?")
            return
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            self._fail("PLAIN response is not UTF-8", "?")
            return
        if authzid and authzid != user:
            self._fail(f"may not act as {authzid!r}", user)
            return
        logins = self.conn.broker.logins
        self._check(logins.check_plain(self.host, user, password),
                    lambda principal: self._succeed(principal) if principal is not None
                    else self._answer_failure("wrong user name or password", user))

    def _scram_step(self, response: bytes) -> None:
        try:
            if self._scram is None:
                self._scram = ScramServer(self.mechanism)
                self._scram_user = self._scram.first(response)
                self._challenge(self._scram.challenge(self.auth.scram_keys(self.mechanism, self._scram_user)))
                return
        except ScramError as e:
            self._fail(str(e), self._scram_user or "?")
            return
        scram, user, mechanism, why = self._scram, self._scram_user, self.mechanism, ["wrong password"]

        def check():  # in the login throttle's turn, off the loop
            try:
                final = scram.final(response)
            except ScramError as e:
                why[0] = str(e)
                return None
            principal = self.auth.principal(user, mechanism)
            if principal is None:
                why[0] = "unknown user"
                return None
            return principal, final

        self._check(self.conn.broker.logins.attempt(self.host, check),
                    lambda result: self._succeed(*result) if result is not None
                    else self._answer_failure(why[0], user))

    def _external(self, response: bytes) -> None:
        user = self.external_user
        try:
            authzid = response.decode("utf-8")
        except UnicodeDecodeError:
            authzid = "?"
        if user is None:
            self._fail("no verified client certificate", "?")
        elif authzid and authzid != user:
            self._fail(f"certificate of {user!r} may not act as {authzid!r}", user)
        else:
            principal = self.auth.principal(user, "EXTERNAL")
            if principal is None:
                self._fail("no user named by the certificate's CN", user)
            else:
                self._succeed(principal)

    # -- answers ---------------------------------------------------------------------------------
    def _challenge(self, data: bytes) -> None:
        self.state = _RESPONSE
        self.conn.socket.write(sasl_frame(SASL_CHALLENGE, [data]))

    def _succeed(self, principal: Principal, additional: bytes | None = None) -> None:
        if not self._admit(principal, sasl=True):
            return
        fields = [UByte(OK)] + ([additional] if additional is not None else [])
        self.conn.socket.write(sasl_frame(SASL_OUTCOME, fields))
        log.info("connection %s logged in as %s (%s)", self.conn.peer, principal.name, principal.mechanism
                 if principal is not ANONYMOUS else "ANONYMOUS")
        self.state = _AMQP_HEADER

    def _fail(self, why: str, user: str) -> None:
        """A login that failed before any password check (a mechanism not offered, a malformed
        response, no certificate): a failure all the same, answered in the address's turn after
        its delay (security/throttle.py); nothing more is read."""
        self._check(self.conn.broker.logins.attempt(self.host, None),
                    lambda _none: self._answer_failure(why, user))

    def _check(self, attempt, then: Callable) -> None:
        """Wait for the login throttle's answer (a coroutine) without reading anything more for
        the exchange; `then(result)` once it comes, if the connection is still there."""
        self.state = _CHECKING
        self._pending = task = asyncio.get_running_loop().create_task(attempt)

        def done(task: asyncio.Task) -> None:
            self._pending = None
            if task.cancelled() or self.state != _CHECKING:
                return
            sock = self.conn.socket
            if sock is None or sock.is_closing():
                return
            error = task.exception()
            if error is not None:
                log.error("connection %s: login check failed: %r", self.conn.peer, error)
                self._answer_failure("internal error", "?")
                return
            then(task.result())
            if self.state == _AMQP_HEADER and self.buf:
                self.conn.data_received(b"")  # what the client pipelined behind its login
        task.add_done_callback(done)

    def abandon(self) -> None:
        """The connection went away: its login no longer waits for a turn."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None

    def _answer_failure(self, why: str, user: str) -> None:
        """The sasl-outcome of a failed login, its wait already spent; then close."""
        self.state = _FAILED
        self.buf.clear()
        log.warning("connection %s: login failed for user %r with %s: %s (failure %d from %s)",
                    self.conn.peer, user, self.mechanism or "?", why,
                    self.conn.broker.logins.failures(self.host), self.host)
        self.conn.broker.audit("login_failed", peer=self.conn.peer, user=user, mechanism=self.mechanism,
                               reason=why, via="amqp")
        sock = self.conn.socket
        if sock is not None and not sock.is_closing():
            sock.write(sasl_frame(SASL_OUTCOME, [UByte(AUTH)]))
            sock.close()

    def _admit(self, principal: Principal, sasl: bool) -> bool:
        """Count the connection against the user's limit (`max_connections_per_user`); at the
        limit it is refused: sasl-outcome sys-perm, or a close without SASL."""
        if not self.auth.connect(principal):
            self.state = _FAILED
            self.buf.clear()
            log.warning("connection %s: user %s is at its connection limit (%d); refused", self.conn.peer,
                        principal.name, self.auth.max_connections)
            self.conn.broker.audit("connection_limit", peer=self.conn.peer, user=principal.name, via="amqp")
            self.conn.socket.write(sasl_frame(SASL_OUTCOME, [UByte(SYS_PERM)]) if sasl else
                                   refusal(self.conn.broker.container_id, "connection limit reached"))
            self.conn.socket.close()
            return False
        self.conn.broker.audit("login", peer=self.conn.peer, user=principal.name, mechanism=principal.mechanism,
                               via="amqp")
        self.on_done(principal)
        return True

    def _drop(self, why: str):
        log.info("connection %s %s; closing it", self.conn.peer, why)
        self.abandon()
        self.state = _FAILED
        self.buf.clear()
        self.conn.socket.close()
        return None


def certificate_user(socket_transport) -> str | None:
    """The subject CN of the client certificate the TLS handshake verified, if any."""
    cert = socket_transport.get_extra_info("peercert")
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None


def open_gate(conn: Connection, socket_transport) -> SaslGate:
    auth = conn.broker.auth
    external = certificate_user(socket_transport)
    listener = conn.listener
    mechanisms = auth.offered(getattr(listener, "mechanisms", None), external is not None)
    peer = socket_transport.get_extra_info("peername")

    def done(principal: Principal) -> None:
        conn.principal = principal

    return SaslGate(conn, auth, mechanisms, peer[0] if peer else "?", external, done)
