"""`/temp-queue/N` and `/temp-topic/N`: temporary destinations of one connection (ActiveMQ
Classic's names). N is the client's own name for it; the broker gives each a unique address (a
temporary anycast queue of that name, or a temporary multicast address), made on first use by a
SEND or SUBSCRIBE of this connection, like an AMQP dynamic node (no permission asked, as for a
dynamic attach), owned by the connection's user, and deleted when the connection ends. Others
reach it by its address (`/queue/ADDRESS` in a MESSAGE's `reply-to`), with their own rights."""
from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from ...core import limits
from ...core.address import QueuePurpose
from ...core.errors import ResourceLimitExceeded
from ...core.message import ANYCAST, MULTICAST

if TYPE_CHECKING:
    from .connection import StompConnection

log = logging.getLogger("hermod.stomp")

MAX_TEMPORARIES = 1000  # per connection: a client naming a new one per SEND cannot grow the broker


class Temporaries:
    def __init__(self, conn: StompConnection) -> None:
        self.conn = conn
        self.addresses: dict[tuple[str, str], str] = {}  # (routing, N) -> address
        self.names: dict[str, tuple[str, str]] = {}  # address -> (routing, N)

    def address(self, name: str, routing: str) -> str:
        """The address of this connection's `/temp-queue/N` (routing anycast) or `/temp-topic/N`
        (multicast), made now if it is new."""
        key = (routing, name)
        found = self.addresses.get(key)
        if found is not None:
            return found
        limits.check_name(name, "temporary destination")
        if len(self.addresses) >= MAX_TEMPORARIES:
            raise ResourceLimitExceeded(f"more than {MAX_TEMPORARIES} temporary destinations on one connection")
        address = f"{'temp-queue' if routing == ANYCAST else 'temp-topic'}.{uuid.uuid4()}"
        po = self.conn.broker.postoffice
        principal = self.conn.principal
        if routing == ANYCAST:
            po.create_queue(address, address, ANYCAST, temporary=True, purpose=QueuePurpose.TEMPORARY,
                            extra={"owner": principal.name} if principal is not None else None)
        else:
            po.create_address(address, {MULTICAST}, temporary=True)
        self.addresses[key] = address
        self.names[address] = key
        return address

    def stomp_name(self, address: str) -> str | None:
        """`/temp-queue/N` for an address this connection made, else None."""
        found = self.names.get(address)
        if found is None:
            return None
        routing, name = found
        return ("/temp-queue/" if routing == ANYCAST else "/temp-topic/") + name

    def delete_all(self) -> None:
        po = self.conn.broker.postoffice
        for (routing, _name), address in self.addresses.items():
            try:
                if routing == ANYCAST:
                    po.delete_queue(address)
                po.delete_address(address)
            except Exception:  # noqa: BLE001 - one leftover must not keep the others
                log.exception("deleting temporary destination %s", address)
        self.addresses.clear()
        self.names.clear()
