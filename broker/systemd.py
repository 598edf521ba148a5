"""systemd `Type=notify`: tell the service manager when the broker serves, that its loop is alive,
and when it stops; and the unit file `hermod systemd-unit` prints.

The notify protocol is one datagram per state change on the AF_UNIX socket named by
`NOTIFY_SOCKET` (a path, or an abstract name written with a leading `@`). It is written with the
socket module: no libsystemd binding is needed. The watchdog ping is sent from the event loop
itself, so a stalled loop stops pinging and systemd restarts the broker (`WatchdogSec`).
"""
from __future__ import annotations

import logging
import os
import shutil
import socket
import sys

log = logging.getLogger("hermod.systemd")


class Notifier:
    """Sends `READY=1`, `WATCHDOG=1` and `STOPPING=1`; does nothing without NOTIFY_SOCKET."""

    def __init__(self, environ=None):
        env = os.environ if environ is None else environ
        self.address = _socket_address(env.get("NOTIFY_SOCKET", ""))
        self.watchdog_s = _watchdog_interval(env)
        self._timer = None
        self._sock = None
        self._stopping = False
        if self.address is not None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._sock.setblocking(False)

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def notify(self, state: str) -> None:
        if self._sock is None:
            return
        try:
            self._sock.sendto(state.encode(), self.address)
        except OSError as e:  # the manager went away or its queue is full: logged, never fatal
            log.warning("systemd notify %s failed: %s", state.split("=")[0], e)

    def ready(self, loop, status: str = "") -> None:
        """Serving: READY=1, then WATCHDOG=1 every half WATCHDOG_USEC when that is set."""
        self.notify("READY=1" + (f"\nSTATUS={status}" if status else ""))
        if self.enabled and self.watchdog_s:
            self._ping(loop)

    def _ping(self, loop) -> None:
        self.notify("WATCHDOG=1")
        self._timer = loop.call_later(self.watchdog_s, self._ping, loop)

    def stopping(self) -> None:
        """STOPPING=1, once, however many ways the stop was asked for."""
        if self._stopping:
            return
        self._stopping = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.notify("STOPPING=1")

    def reloading(self) -> None:
        self.notify("RELOADING=1")

    def reloaded(self) -> None:
        self.notify("READY=1")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _socket_address(value: str) -> str | bytes | None:
    if not value:
        return None
    if value.startswith("@"):  # abstract namespace: a leading NUL byte instead of the '@'
        return b"\0" + value[1:].encode()
    return value


def _own_pids() -> tuple[int, ...]:
    """This process, and in the one-file build its parent too: PyInstaller's bootloader is the
    process systemd started (its MAINPID, the WATCHDOG_PID), and it runs the broker as a child."""
    return (os.getpid(), os.getppid()) if getattr(sys, "frozen", False) else (os.getpid(),)


def _watchdog_interval(env) -> float | None:
    """Half of WATCHDOG_USEC in seconds, when the watchdog is meant for this process."""
    usec, pid = env.get("WATCHDOG_USEC"), env.get("WATCHDOG_PID")
    if not usec or (pid and pid.isdigit() and int(pid) not in _own_pids()):
        return None
    try:
        value = int(usec)
    except ValueError:
        log.warning("WATCHDOG_USEC=%r is not a number: no watchdog pings", usec)
        return None
    return value / 2 / 1_000_000 if value > 0 else None


def unit_file(executable: str | None = None, config: str = "/etc/hermod/hermod.toml",
              user: str = "hermod", watchdog_s: int = 30) -> str:
    """A Type=notify unit: restarts on failure and on a missed watchdog, reloads with SIGHUP,
    and runs with the usual hardening (read-only system, private /tmp, no new privileges)."""
    exe = executable or shutil.which("hermod") or "/usr/local/bin/hermod"
    return f"""\
[Unit]
Description=Hermod AMQP 1.0 message broker
After=network-online.target
Wants=network-online.target

[Service]
Type=notify
# all, not main: the one-file build's broker is a child of the bootloader systemd started.
NotifyAccess=all
ExecStart={exe} run --config {config}
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure
RestartSec=2
WatchdogSec={watchdog_s}
TimeoutStartSec=120
TimeoutStopSec=60
User={user}
Group={user}
StateDirectory=hermod
StateDirectoryMode=0700
WorkingDirectory=/var/lib/hermod
LimitNOFILE=65536
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
SystemCallArchitectures=native
CapabilityBoundingSet=
UMask=0077

[Install]
WantedBy=multi-user.target
"""
