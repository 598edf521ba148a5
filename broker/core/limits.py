"""Limits on what a client may ask for (contract: "Delivery guarantees and limits on what clients
send"). Each check costs O(1) for anything far over its limit: a 600 KB name is refused by its
length in characters, before it is encoded, split or matched against a wildcard."""
from __future__ import annotations

from .errors import InvalidField, ResourceLimitExceeded

MAX_NAME_BYTES = 1024  # an address or queue name, UTF-8
MAX_SELECTOR_BYTES = 16 * 1024
MAX_COMPOSITE_PARTS = 256
# The longest text a composite of MAX_COMPOSITE_PARTS names could be (names, `, ` separators
# and `topic://` prefixes): anything longer is refused without being split.
MAX_COMPOSITE_CHARS = MAX_COMPOSITE_PARTS * (MAX_NAME_BYTES + 16)


def utf8_length_over(text: str, limit: int) -> int | None:
    """The UTF-8 length of `text` when it is over `limit` bytes, else None (a UTF-8 character
    takes 1 to 4 bytes, so only text between limit/4 and limit characters is encoded)."""
    n = len(text)
    if n > limit:
        return n if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    if n * 4 <= limit:
        return None
    size = len(text.encode("utf-8", "surrogatepass"))
    return size if size > limit else None


def _shown(text: str) -> str:
    return text if len(text) <= 64 else text[:64] + "..."


def check_name(name: str | None, what: str = "address") -> None:
    """Refuse an address or queue name over MAX_NAME_BYTES (amqp:invalid-field)."""
    if name is None:
        return
    size = utf8_length_over(name, MAX_NAME_BYTES)
    if size is not None:
        raise InvalidField(f"{what} name of {size} bytes is longer than {MAX_NAME_BYTES} bytes: {_shown(name)!r}")


def check_selector(text: str | None) -> None:
    """Refuse a selector over MAX_SELECTOR_BYTES (amqp:invalid-field)."""
    if text is None:
        return
    size = utf8_length_over(text, MAX_SELECTOR_BYTES)
    if size is not None:
        raise InvalidField(f"selector of {size} bytes is longer than {MAX_SELECTOR_BYTES} bytes")


def check_composite_length(text: str) -> None:
    if len(text) > MAX_COMPOSITE_CHARS:
        raise ResourceLimitExceeded(
            f"composite address of {len(text)} characters: at most {MAX_COMPOSITE_PARTS} parts "
            f"of up to {MAX_NAME_BYTES} bytes")


def check_composite_parts(count: int) -> None:
    if count > MAX_COMPOSITE_PARTS:
        raise ResourceLimitExceeded(
            f"composite address with more than {MAX_COMPOSITE_PARTS} parts (at most {MAX_COMPOSITE_PARTS})")
