"""The routing core: addresses, queues, bindings, diverts, transactions, flow control.

Knows no Proton, SQL, protocol adapter or store (ARCHITECTURE.md). The routing vocabulary is
importable from here; everything else from its module."""
from .address import Address, QueuePurpose, RoutingType
from .bindings import Bindings, RoutingContext
from .forwarding import Divert, Target

__all__ = ["Address", "Bindings", "Divert", "QueuePurpose", "RoutingContext", "RoutingType", "Target"]
