"""Copying a transfer's bytes out of Proton, shared by every link that receives."""
from __future__ import annotations

from cproton_ffi import ffi
from cproton_ffi.lib import pn_link_recv  # bound by name: per message (why: connection.py)

SCRATCH_SIZE = 64 * 1024
scratch = ffi.new("char[]", SCRATCH_SIZE)  # one for the loop: every transfer is copied out at once


def receive_bytes(link, pending: int) -> bytes:
    """The current delivery's pending bytes, copied out of Proton. One shared scratch buffer
    serves every link and connection (all on the loop thread); a bigger transfer gets a
    buffer of its own for the one copy, so nothing large stays allocated after it."""
    buf = scratch if pending <= SCRATCH_SIZE else ffi.new("char[]", pending)
    got = pn_link_recv(link, buf, pending)
    return ffi.unpack(buf, got) if got > 0 else b""
