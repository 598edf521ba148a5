"""A connection's limits on what its peer opens: sessions (`[server]
max_sessions_per_connection`, each given an incoming window) and links
(`max_links_per_connection`). One over a limit is refused with `amqp:resource-limit-exceeded`
and the connection carries on; a peer that keeps opening refused ones is closed.

`ConnectionLimits` is a mixin of `Connection` (protocol/connection.py); the attributes are its.
"""
from __future__ import annotations

import logging

import cproton
from cproton_ffi import ffi, lib

from . import conditions
from .conditions import set_condition
from .links import open_link, refuse

log = logging.getLogger("hermod.connection")

# A session's incoming window, in frames of the negotiated size: Proton 0.40 enforces it (a
# client past it gets amqp:session:window-violation) only when a capacity is set. Above the
# producer credit, so a client that respects credit is never held up by the window.
SESSION_WINDOW_FRAMES = 2048
# Proton reads the capacity through 32 bits: at 4 GiB and over (max_frame_size of 2 MiB and up
# times 2048) it wrapped and the session took nothing (every send hung). Capped below it.
MAX_SESSION_CAPACITY = (1 << 31) - 1
# A session or link over its limit is refused and the connection carries on; one that keeps
# opening refused ones and never ends or detaches them (each still costs engine memory, about
# 2.4 KiB a link) is closed once it holds this many times the limit.
REFUSED_SLACK = 16


class ConnectionLimits:
    """Connection's begin and attach, within the limits (a mixin; see the module docstring)."""

    def _on_begin(self, s) -> None:
        if not lib.pn_session_state(s) & lib.PN_LOCAL_UNINIT:
            return
        self.sessions += 1
        cfg = self.broker.config.server
        if self.sessions > cfg.max_sessions_per_connection:
            log.warning("session from %s refused: max_sessions_per_connection (%d) reached", self.peer,
                        cfg.max_sessions_per_connection)
            if self.sessions > REFUSED_SLACK * cfg.max_sessions_per_connection:
                self._over_limit("sessions", cfg.max_sessions_per_connection)
                return
            set_condition(lib.pn_session_condition(s), conditions.RESOURCE_LIMIT_EXCEEDED,
                          f"too many sessions on this connection (max {cfg.max_sessions_per_connection})")
            lib.pn_session_open(s)
            lib.pn_session_close(s)
            return
        lib.pn_session_set_incoming_capacity(s, min(MAX_SESSION_CAPACITY, lib.pn_transport_get_max_frame(
            self.transport) * SESSION_WINDOW_FRAMES))
        lib.pn_session_open(s)

    def _on_attach(self, link) -> None:
        if not lib.pn_link_state(link) & lib.PN_LOCAL_UNINIT:
            return
        self.engine_links += 1
        if not lib.pn_session_state(lib.pn_link_session(link)) & lib.PN_LOCAL_ACTIVE:
            return  # on a session we refused: its end is on the way, and frees the link
        cfg = self.broker.config.server
        if self.engine_links > cfg.max_links_per_connection:
            log.warning("link %s from %s refused: max_links_per_connection (%d) reached",
                        cproton.pn_link_name(link), self.peer, cfg.max_links_per_connection)
            if self.engine_links > REFUSED_SLACK * cfg.max_links_per_connection:
                # Refused links it never detaches would still cost engine memory: enough.
                self._over_limit("links", cfg.max_links_per_connection)
                return
            refuse(link, conditions.RESOURCE_LIMIT_EXCEEDED,
                   f"too many links on this connection (max {cfg.max_links_per_connection})")
            return
        handler = open_link(self, link)
        if handler is not None:
            self.links[link] = handler
            if self.writing_paused:
                handler.set_blocked(True)  # a receiver attached now starts blocked too

    def _over_limit(self, what: str, limit: int) -> None:
        log.warning("connection %s closed: it kept opening %s past the limit of %d", self.peer, what, limit)
        self._detach_links(lambda link: True, session_end=True)
        self._close_with(conditions.RESOURCE_LIMIT_EXCEEDED,
                         f"too many {what} on this connection (max {limit}), and the refused ones not closed")
        self._close_tail()  # read nothing more from it

    def _links_left_on(self, s) -> int:
        """Links of session `s` the peer attached and never detached (freed with the session)."""
        n = 0
        link = lib.pn_link_head(self.conn, 0)
        while link != ffi.NULL:
            if lib.pn_link_session(link) == s and lib.pn_link_state(link) & lib.PN_REMOTE_ACTIVE:
                n += 1
            link = lib.pn_link_next(link, 0)
        return n
