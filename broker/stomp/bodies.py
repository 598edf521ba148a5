"""The contract's text-or-bytes rule for a SEND body.

A SEND is a text message when its `content-type` is `text/*` or names a `charset`, or when it has
no `content-length`; otherwise it is bytes. The header `amq-msg-type` (`text` or `bytes`)
decides when present. A text body is decoded by its declared charset (UTF-8 when none is
declared); one that does not decode is refused.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping

from .errors import StompError


def _media_type(content_type: str) -> tuple[str, str | None]:
    """The lower-cased media type and the `charset` parameter (None when absent)."""
    kind, _, params = content_type.partition(";")
    charset = None
    for param in params.split(";"):
        key, eq, value = param.partition("=")
        if eq and key.strip().lower() == "charset":
            charset = value.strip().strip('"') or None
    return kind.strip().lower(), charset


def is_text(headers: Mapping[str, str]) -> bool:
    """Whether a SEND with these (first-occurrence) headers is a text message."""
    kind = headers.get("amq-msg-type")
    if kind is not None:
        if kind == "text":
            return True
        if kind == "bytes":
            return False
        raise StompError(f"amq-msg-type must be 'text' or 'bytes', not {kind[:40]!r}")
    content_type = headers.get("content-type")
    if content_type is not None:
        media, charset = _media_type(content_type)
        if media.startswith("text/") or charset is not None:
            return True
    return "content-length" not in headers


def send_body(headers: Mapping[str, str], body: bytes) -> str | bytes:
    """The SEND's body as the message carries it: a str for a text message, bytes otherwise."""
    if not is_text(headers):
        return body
    charset = "utf-8"
    content_type = headers.get("content-type")
    if content_type is not None:
        charset = _media_type(content_type)[1] or "utf-8"
    try:
        codec = codecs.lookup(charset)
    except LookupError:
        raise StompError(f"unknown charset {charset[:40]!r} in content-type") from None
    try:
        return body.decode(codec.name)
    except UnicodeDecodeError as e:
        raise StompError(f"the text body is not valid {codec.name} (byte {e.start})") from None
