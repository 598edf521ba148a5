"""The link-handler interface: what a `Connection` calls on the handler of any link it owns.

Each attached link has one handler: `ProducerLink` (the client sends, the management endpoint's
requests included), `ConsumerLink` (the client receives) or `CoordinatorLink` (the client
declares and discharges transactions). The connection keeps them in `Connection.links`
(pn_link_t* -> handler) and drives every one through this interface alone, with no test of
what kind of link it is:

- engine events: `on_delivery` (a transfer, or a disposition of a delivery we sent),
  `on_flow` (the peer's flow frame), `on_detach` (the peer, the connection or the broker
  ended the link);
- the connection's output: `set_blocked` (its socket is backed up, or it is again free);
- settlement the link itself does not decide: `settle` (an outcome decided elsewhere, e.g. by
  a transaction's discharge);
- two flags that steer the event pump: `batches_transfers` (its transfers are taken once per
  batch of events, not one event at a time) and `after_transfers` (its deliveries may depend
  on transfers of the same batch, which are taken first);
- what the connection's description and the `/metrics` counters read: `name`, `active`,
  `is_producer` (counted as a publisher).

A handler's `on_delivery(None)` means "take what is queued on the link": the pump calls it so
once per batch for a handler with `batches_transfers`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod


class LinkHandler(ABC):
    """One attached link as its connection sees it (see the module docstring)."""

    __slots__ = ()  # the handlers keep their own __slots__ (the per-message path reads them)

    link: object  # the engine's pn_link_t*
    name: str
    active: bool  # False once detached: late callbacks (the store, a transaction) do nothing
    is_producer: bool = False  # the client sends on it: counted as a publisher
    batches_transfers: bool = False  # transfers taken once per batch of engine events
    after_transfers: bool = False  # a delivery here waits for the batch's transfers

    @abstractmethod
    def on_delivery(self, d) -> None:
        """A transfer or disposition on the link (`d` None: take everything queued)."""

    def on_flow(self) -> None:
        """The peer's flow frame for the link (credit, drain); nothing by default."""

    def set_blocked(self, blocked: bool) -> None:
        """The connection's output is backed up (True) or drained again (False)."""

    @abstractmethod
    def on_detach(self, closed: bool, session_end: bool = False) -> None:
        """The link is gone from the connection: `closed` when it was closed (not merely
        detached), `session_end` when its session or connection went with it."""

    @abstractmethod
    def settle(self, d, outcome: int | None = None, condition: str | None = None,
               description: str = "") -> None:
        """Settle one of the link's deliveries with an outcome decided elsewhere (None: as it
        stands). A peer that settled first is owed no outcome; the delivery is settled anyway."""


__all__ = ["LinkHandler"]
