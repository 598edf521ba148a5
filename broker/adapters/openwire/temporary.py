"""Temporary queues and topics of an OpenWire connection (a mixin of OpenWireConnection):
DestinationInfo add and remove, each announced on Classic's advisory topics; they go with the
connection. A temporary queue belongs to its maker's user (others may send to it)."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ...core import errors
from ...core.address import QueuePurpose
from ...core.message import ANYCAST, MULTICAST
from ...openwire import model
from . import advisories

log = logging.getLogger("hermod.openwire")


class TemporaryDestinations:
    """OpenWireConnection's temporary-destination half (the attributes are the connection's)."""

    broker: Any
    peer: str
    temporary: dict[str, str]

    if TYPE_CHECKING:
        @property
        def user(self) -> str | None: ...

    def _on_destination_info(self, info: model.DestinationInfo) -> Any:
        d = info.destination
        if not isinstance(d, (model.TempQueue, model.TempTopic)) or not d.physical_name:
            return None
        name = d.physical_name
        po = self.broker.postoffice
        if info.operation_type == 0:
            if name in self.temporary:
                return None
            if isinstance(d, model.TempQueue):
                if name not in po.queues:
                    po.create_queue(name, name, ANYCAST, temporary=True, purpose=QueuePurpose.TEMPORARY,
                                    extra={"owner": self.user} if self.user is not None else None)
                self.temporary[name] = ANYCAST
            else:
                po.create_address(name, {MULTICAST}, temporary=True)
                self.temporary[name] = MULTICAST
            advisories.temporary_destination(self, info)  # type: ignore[arg-type]  # the connection itself
        else:
            self._remove_temporary(name)
            advisories.temporary_destination(self, info)  # type: ignore[arg-type]  # the connection itself
        return None

    def _remove_temporary(self, name: str) -> None:
        rt = self.temporary.pop(name, None)
        if rt is None:
            return
        po = self.broker.postoffice
        try:
            if rt == ANYCAST and name in po.queues:
                po.delete_queue(name)
            elif rt == MULTICAST and name in po.addresses:
                po.delete_address(name)
        except errors.HermodError as exc:
            log.info("openwire %s: temporary destination %s not removed: %s", self.peer, name, exc)


__all__ = ["TemporaryDestinations"]
