"""A throw-away test CA and certificates, made with the `openssl` command in a temporary
directory for each test session (never committed)."""
from __future__ import annotations

import subprocess
from pathlib import Path


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(d: Path, name: str) -> None:
    _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
         "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=d)


def make_cert(d: Path, name: str, cn: str, ca: str, server: bool = False) -> None:
    _run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", f"{name}.key",
         "-out", f"{name}.csr", cwd=d)
    ext = d / f"{name}.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n" if server else "extendedKeyUsage=clientAuth\n")
    _run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
         "-days", "2", "-extfile", ext.name, "-out", f"{name}.crt", cwd=d)


def make_all(d: Path) -> Path:
    """ca, server (CN localhost, SAN 127.0.0.1), alice and mallory (client, CA-signed), and
    rogue (a client certificate from another CA)."""
    d.mkdir(parents=True, exist_ok=True)
    make_ca(d, "ca")
    make_ca(d, "otherca")
    make_cert(d, "server", "localhost", "ca", server=True)
    make_cert(d, "server2", "localhost", "ca", server=True)
    make_cert(d, "alice", "alice", "ca")
    make_cert(d, "mallory", "mallory", "ca")
    make_cert(d, "rogue", "alice", "otherca")
    return d
