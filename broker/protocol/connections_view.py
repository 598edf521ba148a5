"""The live AMQP connections as management sees them (`management.ports.ConnectionRegistry`).

Ids are handed out the first time a connection is listed and kept while it lives (a weak map:
a closed connection leaves no trace), so an id from a listing closes that connection and no
other. Read on the loop thread, like everything else.
"""
from __future__ import annotations

import itertools
import logging
import weakref
from typing import TYPE_CHECKING

from cproton_ffi import ffi, lib

from . import conditions

if TYPE_CHECKING:
    from .server import Server

log = logging.getLogger("hermod.management")


class ConnectionsView:
    def __init__(self, server: Server):
        self.server = server
        self._ids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._next = itertools.count(1)

    def _id(self, conn) -> str:
        cid = self._ids.get(conn)
        if cid is None:
            cid = self._ids[conn] = str(next(self._next))
        return cid

    def _live(self):
        return [c for c in self.server.connections if not c.closed and c.transport is not None]

    def _clients(self):
        """Connections of the other protocols (adapters/connection.py)."""
        return [c for c in self.server.clients if not c.closed]

    def list_connections(self) -> list[dict]:
        out = [self._describe(c) for c in self._live()]
        out.extend({"id": self._id(c), **c.describe()} for c in self._clients())
        out.sort(key=lambda c: int(c["id"]))
        return out

    def figures(self) -> dict:
        live = self._live()
        publishers = sum(1 for c in live for h in c.links.values() if getattr(h, "is_producer", False))
        sessions = 0
        for c in live:
            s = lib.pn_session_head(c.conn, lib.PN_LOCAL_ACTIVE)
            while s != ffi.NULL:
                sessions += 1
                s = lib.pn_session_next(s, lib.PN_LOCAL_ACTIVE)
        per_listener = {name: 0 for name in self.server.listener_names()}
        per_protocol = {"amqp": len(live)}
        clients = self._clients()
        for c in (*live, *clients):
            name = c.listener.name if c.listener is not None else "main"
            per_listener[name] = per_listener.get(name, 0) + 1
        for c in clients:
            per_protocol[c.protocol_name] = per_protocol.get(c.protocol_name, 0) + 1
        return {"connections": len(live) + len(clients), "sessions": sessions, "publishers": publishers,
                "per_listener": per_listener, "per_protocol": per_protocol}

    def close_connection(self, connection_id: str) -> bool:
        for conn in self._live():
            if self._ids.get(conn) == connection_id:
                log.info("closing connection %s from %s (management)", connection_id, conn.peer)
                conn._detach_links(lambda link: True, session_end=True)
                conn._close_with(conditions.CONNECTION_FORCED, "closed by management")
                self.server.flush()
                return True
        for client in self._clients():
            if self._ids.get(client) == connection_id:
                client.close_by_management()
                return True
        return False

    def _describe(self, conn) -> dict:
        # The login is Hermod's own SASL gate's (protocol/sasl.py), not Proton's: Proton's
        # transport never ran SASL and would name every connection "anonymous".
        principal = conn.principal
        return {"id": self._id(conn), "remote": conn.peer,
                "user": principal.name if principal is not None else None, "protocol": "amqp",
                "container_id": conn.container_id,
                "links": [_describe_link(pn_link, handler) for pn_link, handler in list(conn.links.items())]}


def _describe_link(pn_link, handler) -> dict:
    producer = getattr(handler, "is_producer", False)
    if producer:
        target = handler.target
        address = target.address if target.queue is None else f"{target.address}::{target.queue}"
        filters = None
    else:
        consumers = getattr(handler, "consumers", []) or []
        address = ",".join(f"{c.queue.address.name}::{c.queue.name}" for c in consumers) or None
        filters = next((c.selector_text for c in consumers if c.selector_text), None)
    return {"name": getattr(handler, "name", None),
            # the client's role: it sends on a link we receive on, and the other way round
            "role": "sender" if producer else "receiver",
            "address": address, "credit": lib.pn_link_credit(pn_link),
            "unsettled": lib.pn_link_unsettled(pn_link), "filter": filters,
            "browser": bool(getattr(handler, "browser", False))}
