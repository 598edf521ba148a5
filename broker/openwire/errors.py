"""The codec's one error type. Everything malformed, truncated, over a limit or of an unknown
type surfaces as an `OpenWireError`, so the adapter can close that connection with its message
as the reason and never see an IndexError, struct.error or MemoryError from a hostile peer."""


class OpenWireError(Exception):
    """Bytes that are not a valid OpenWire command (or a value that cannot be encoded)."""


class Truncated(OpenWireError):
    """The input ended inside a command. `needed` is the input length (from the start of the
    buffer being decoded) that is known to be required before another attempt can succeed; the
    frame reader without size prefixes uses it to avoid re-parsing a partial command per byte."""

    def __init__(self, needed: int) -> None:
        super().__init__(f"command ends early: {needed} bytes needed")
        self.needed = needed
