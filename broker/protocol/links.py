"""Attach handling: a peer's attach becomes a ProducerLink (the client sends) or a ConsumerLink
(the client receives), or is refused with the error condition the core's error maps to."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import cproton
from cproton_ffi import lib

from ..core import errors
from . import conditions
from .binding import obj2dat
from .conditions import set_condition
from .consumer import ConsumerLink
from .producer import ProducerLink
from .revocation import remember

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("hermod.link")

__all__ = ["ConsumerLink", "ProducerLink", "open_link", "refuse", "set_condition"]


def refuse(link, name: str, description: str, info=None) -> None:
    """Refuse an attach: a null source/target in the reply, then a detach carrying the error."""
    set_condition(lib.pn_link_condition(link), name, description)
    if info is not None:  # a redirect's map (conditions.info_for)
        obj2dat(info, lib.pn_condition_info(lib.pn_link_condition(link)))
    # An unspecified terminus is sent as null: JMS clients take any source as success.
    lib.pn_terminus_set_type(lib.pn_link_source(link), lib.PN_UNSPECIFIED)
    lib.pn_terminus_set_type(lib.pn_link_target(link), lib.PN_UNSPECIFIED)
    lib.pn_link_open(link)
    lib.pn_link_close(link)


def open_link(conn: Connection, link):
    """Handle a peer's attach; returns the link's handler, or None when refused."""
    is_sender = lib.pn_link_is_sender(link)  # we send: the client consumes
    broker = conn.broker
    try:
        # The rights the attach is allowed are kept with the link: a reload asks for them again.
        with broker.authorization.recording() as held, broker.acting_as(conn.principal):
            handler = ConsumerLink.attach(conn, link) if is_sender else ProducerLink.attach(conn, link)
        if handler is not None:
            remember(conn, link, held if broker.permissions.enabled else None)
        return handler
    except errors.HermodError as e:
        log.info("refused attach of %s from %s: %s", cproton.pn_link_name(link), conn.peer, e)
        refuse(link, conditions.condition_for(e), str(e), conditions.info_for(e))
    except RecursionError:  # a field nested deeper than Python's decoder goes (a decode bomb)
        log.info("refused attach of %s from %s: a field nests too deeply", cproton.pn_link_name(link), conn.peer)
        refuse(link, conditions.DECODE_ERROR, "a field of the attach nests too deeply to decode")
    except Exception as e:  # noqa: BLE001 - an attach must never take the broker down
        log.exception("attach failed")
        refuse(link, conditions.INTERNAL_ERROR, f"internal error: {e}")
    return None
