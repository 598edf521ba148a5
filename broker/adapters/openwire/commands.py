"""What a command handler of the OpenWire connection returns besides None (answer it now)."""

LATER = object()  # the handler answers by itself (a send once stored, a commit...)
BLOCKED = object()  # a send that must wait for room (the `block` policy)

__all__ = ["BLOCKED", "LATER"]
