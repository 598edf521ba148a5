"""The per-connection codec and the WireFormatInfo negotiation, as Classic does them.

Both sides send a WireFormatInfo first, in the initial format (loose, no cache, size-prefixed).
When the peer's arrives, each option is settled (`negotiate`) and both directions switch to the
result for every later command. `OpenWireCodec.feed` switches right after decoding the peer's
WireFormatInfo, so commands that follow it in the same read are decoded in the negotiated format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import model
from .engine import DEFAULT_CACHE_SIZE, Marshaller
from .errors import OpenWireError
from .framing import FrameReader
from .model import WireFormatInfo
from .values import Long

MAGIC = b"ActiveMQ"
LATEST_VERSION = max(model.VERSIONS)
LONG_MAX = (1 << 63) - 1

# The option names as Classic marshals them (`MaxInactivityDurationInitalDelay` is its spelling).
TIGHT_ENCODING = "TightEncodingEnabled"
CACHE_ENABLED = "CacheEnabled"
SIZE_PREFIX_DISABLED = "SizePrefixDisabled"
MAX_INACTIVITY_DURATION = "MaxInactivityDuration"
MAX_INACTIVITY_INITIAL_DELAY = "MaxInactivityDurationInitalDelay"
MAX_FRAME_SIZE = "MaxFrameSize"
STACK_TRACE = "StackTraceEnabled"
TCP_NO_DELAY = "TcpNoDelayEnabled"
CACHE_SIZE = "CacheSize"


def wire_format_info(*, version: int = LATEST_VERSION, tight: bool = True, cache: bool = True,
                     cache_size: int = 1024, stack_trace: bool = True, tcp_no_delay: bool = True,
                     max_inactivity_duration: int = 30_000,
                     max_inactivity_initial_delay: int = 10_000,
                     max_frame_size: int = LONG_MAX, **extra: Any) -> WireFormatInfo:
    """A WireFormatInfo with Classic's defaults (those of its OpenWireFormatFactory) unless
    given; `extra` adds options such as `ProviderName`. Size prefixes are always on: the codec
    frames by them (and negotiation keeps them when either side wants them)."""
    props: dict[str, Any] = {
        TIGHT_ENCODING: tight,
        CACHE_ENABLED: cache,
        SIZE_PREFIX_DISABLED: False,
        MAX_INACTIVITY_DURATION: Long(max_inactivity_duration),
        MAX_INACTIVITY_INITIAL_DELAY: Long(max_inactivity_initial_delay),
        MAX_FRAME_SIZE: Long(max_frame_size),
        STACK_TRACE: stack_trace,
        TCP_NO_DELAY: tcp_no_delay,
        CACHE_SIZE: cache_size,
    }
    props.update(extra)
    return WireFormatInfo(MAGIC, version, props)


@dataclass(frozen=True, slots=True)
class Negotiated:
    """The settled wire format. `max_inactivity_duration` (ms, 0 = no inactivity check) is how
    long a side may stay silent before the other drops it; the check starts after
    `max_inactivity_initial_delay`."""

    version: int
    tight: bool
    cache: bool
    cache_size: int
    stack_trace: bool
    tcp_no_delay: bool
    size_prefix_disabled: bool
    max_frame_size: int
    max_inactivity_duration: int
    max_inactivity_initial_delay: int


def _flag(info: WireFormatInfo, name: str) -> bool:
    return (info.properties or {}).get(name) is True


def _number(info: WireFormatInfo, name: str) -> int:
    v = (info.properties or {}).get(name)
    if v is None:
        return 0
    if type(v) is bool or not isinstance(v, int):
        raise OpenWireError(f"WireFormatInfo option {name} is not a number: {v!r}")
    return int(v)


def _positive_min(a: int, b: int) -> int:
    """Classic's min for versions and frame sizes: a value of 0 or less means "no preference"."""
    return a if (a < b and a > 0) or b <= 0 else b


def negotiate(ours: WireFormatInfo, theirs: WireFormatInfo) -> Negotiated:
    """Settle the wire format from our WireFormatInfo and the peer's, as Classic's
    `renegotiateWireFormat` and inactivity monitor do: the lower version, the smaller frame
    size, each feature only if both sides enable it, the smaller cache, the shorter inactivity
    duration and initial delay. Raises `OpenWireError` for a bad magic or a version outside
    9-12."""
    if theirs.magic != MAGIC:
        raise OpenWireError(f"WireFormatInfo magic {theirs.magic!r} is not {MAGIC!r}")
    version = _positive_min(ours.version, theirs.version)
    if version not in model.VERSIONS:
        raise OpenWireError(
            f"OpenWire version {theirs.version} is not supported (versions "
            f"{min(model.VERSIONS)} to {max(model.VERSIONS)} are)")
    cache = _flag(ours, CACHE_ENABLED) and _flag(theirs, CACHE_ENABLED)
    cache_size = min(_number(ours, CACHE_SIZE), _number(theirs, CACHE_SIZE)) if cache else 0
    if cache_size < 0:
        raise OpenWireError(f"negative CacheSize {cache_size}")
    return Negotiated(
        version=version,
        tight=_flag(ours, TIGHT_ENCODING) and _flag(theirs, TIGHT_ENCODING),
        cache=cache,
        cache_size=cache_size,
        stack_trace=_flag(ours, STACK_TRACE) and _flag(theirs, STACK_TRACE),
        tcp_no_delay=_flag(ours, TCP_NO_DELAY) and _flag(theirs, TCP_NO_DELAY),
        size_prefix_disabled=_flag(ours, SIZE_PREFIX_DISABLED) and _flag(theirs, SIZE_PREFIX_DISABLED),
        max_frame_size=_positive_min(_number(ours, MAX_FRAME_SIZE), _number(theirs, MAX_FRAME_SIZE)),
        max_inactivity_duration=min(_number(ours, MAX_INACTIVITY_DURATION),
                                    _number(theirs, MAX_INACTIVITY_DURATION)),
        max_inactivity_initial_delay=min(_number(ours, MAX_INACTIVITY_INITIAL_DELAY),
                                         _number(theirs, MAX_INACTIVITY_INITIAL_DELAY)),
    )


def marshaller_for(n: Negotiated) -> Marshaller:
    return Marshaller(n.version, tight=n.tight, cache=n.cache,
                      cache_size=n.cache_size or DEFAULT_CACHE_SIZE, stack_trace=n.stack_trace)


class OpenWireCodec:
    """One connection's codec. `hello()` is our WireFormatInfo to send first; `feed(bytes)`
    returns the commands completed by those bytes (negotiating when the peer's WireFormatInfo
    arrives); `encode(command)` gives the bytes to send. Raises `OpenWireError` only."""

    def __init__(self, *, max_command_size: int, preferred: WireFormatInfo | None = None) -> None:
        self.preferred = preferred or wire_format_info()
        if _flag(self.preferred, SIZE_PREFIX_DISABLED):
            raise ValueError("this codec frames by size prefixes: SizePrefixDisabled must be false")
        self.max_command_size = max_command_size
        self.negotiated: Negotiated | None = None
        self.peer: WireFormatInfo | None = None
        self._frames = FrameReader(max_command_size)
        self._in = self._out = Marshaller(self.preferred.version)

    def hello(self) -> bytes:
        """Our WireFormatInfo in the initial format (loose, uncached), framed."""
        return Marshaller(self.preferred.version).encode_framed(self.preferred)

    def feed(self, data: bytes | bytearray | memoryview) -> list[model.DataStructure]:
        out = []
        for body in self._frames.feed(data):
            command = self._in.decode(body)
            if isinstance(command, WireFormatInfo):
                self._negotiate(command)
            out.append(command)
        return out

    def encode(self, command: model.DataStructure) -> bytes:
        return self._out.encode_framed(command)

    @property
    def marshaller(self) -> Marshaller:
        """What encodes outgoing commands now (its version, tight and cache settings)."""
        return self._out

    def pending_bytes(self) -> int:
        """The size of the command being received (not complete yet): see FrameReader.expected."""
        return self._frames.expected()

    def _negotiate(self, theirs: WireFormatInfo) -> None:
        n = negotiate(self.preferred, theirs)
        self.peer = theirs
        self.negotiated = n
        # Each direction has its own cache: what we send and what we receive.
        self._in = marshaller_for(n)
        self._out = marshaller_for(n)
