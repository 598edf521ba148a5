"""Where a client command connects and as whom: `--url` (default `$HERMOD_URL`, else
amqp://127.0.0.1:5672), `--user` with `--password-file` / `--password-stdin` (or, as before,
`amqp://user:password@host`), `--ca` to verify the broker's certificate (else the system's CAs,
which `SSL_CERT_FILE` can name), `--cert` / `--key` for a client certificate (SASL EXTERNAL).

A password is never printed: `Target.shown` and `scrub` mask it wherever a URL or an error
text could carry it.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

DEFAULT_URL = "amqp://127.0.0.1:5672"


class TargetError(ValueError):
    """A bad combination of connection options (one line for the CLI)."""


def default_url() -> str:
    return os.environ.get("HERMOD_URL") or DEFAULT_URL


def add_arguments(parser) -> None:
    """The connection options every client command takes."""
    group = parser.add_argument_group("connection")
    group.add_argument("--url", default=None,
                       help=f"the broker (default: $HERMOD_URL, else {DEFAULT_URL}); amqps:// for TLS")
    group.add_argument("--user", help="log in as this user (SASL PLAIN or SCRAM)")
    secret = group.add_mutually_exclusive_group()
    secret.add_argument("--password-file", metavar="FILE", help="read the password from the first line of FILE")
    secret.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    group.add_argument("--ca", metavar="FILE", help="CA bundle (PEM) the broker's certificate must verify against")
    group.add_argument("--cert", metavar="FILE", help="client certificate (PEM), for SASL EXTERNAL")
    group.add_argument("--key", metavar="FILE", help="the client certificate's private key (PEM)")


def _mask(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


@dataclass(frozen=True)
class Target:
    url: str
    user: str | None = None
    password: str | None = None
    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    @classmethod
    def from_args(cls, args, stdin=None) -> Target:
        url = getattr(args, "url", None) or default_url()
        password = None
        if getattr(args, "password_file", None):
            try:
                with open(args.password_file, encoding="utf-8") as f:
                    password = f.readline().rstrip("\r\n")
            except OSError as e:
                raise TargetError(f"--password-file {args.password_file}: {e.strerror}") from None
        elif getattr(args, "password_stdin", False):
            password = (stdin or sys.stdin).readline().rstrip("\r\n")
        user = getattr(args, "user", None)
        parts = urlsplit(url)
        if parts.password is not None:  # credentials in the URL, as before: taken out of it
            if user is None:
                user = unquote(parts.username or "")
            if password is None:
                password = unquote(parts.password)
            url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        if password is not None and not user:
            raise TargetError("a password needs --user")
        cert, key = getattr(args, "cert", None), getattr(args, "key", None)
        if (cert is None) != (key is None):
            raise TargetError("--cert and --key go together")
        return cls(url, user, password, getattr(args, "ca", None), cert, key)

    @property
    def shown(self) -> str:
        """The URL as it may be printed: the user, never the password."""
        if self.user:
            parts = urlsplit(self.url)
            return urlunsplit(parts._replace(netloc=f"{self.user}@{parts.netloc}"))
        return _mask(self.url)

    def scrub(self, text: str) -> str:
        """`text` with the password (and any URL carrying one) masked."""
        if self.password:
            text = text.replace(self.password, "***")
        return text

    def connection_options(self) -> dict:
        """Keyword arguments for Proton's BlockingConnection."""
        options: dict = {}
        if self.user:
            # the user asked to send a password; over amqp:// PLAIN needs this
            options.update(user=self.user, password=self.password or "", allow_insecure_mechs=True)
        if self.ca or self.cert:
            from proton import SSLDomain
            domain = SSLDomain(SSLDomain.MODE_CLIENT)
            if self.ca:
                domain.set_trusted_ca_db(self.ca)
                domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
            if self.cert:
                domain.set_credentials(self.cert, self.key, None)
            options["ssl_domain"] = domain
            if self.cert and not self.user:
                options["allowed_mechs"] = "EXTERNAL"
        return options


def as_target(url_or_target: str | Target) -> Target:
    """Library callers may still pass a URL string (credentials in it are honoured)."""
    if isinstance(url_or_target, Target):
        return url_or_target

    class _Args:
        url = url_or_target
    return Target.from_args(_Args())
