"""The crash storm over several brokers (issue 28, item 7): the `brokers` a `crash_storm.Storm`
drives, when it is not one broker.

- `ClusterBrokers`: two cluster nodes ([ha] mode = "cluster") on one PostgreSQL, each with the
  storm's configuration. One node owns every queue (the first to start creates them; a node that
  takes over a dead one's queues takes them all, and a restarted node finds them owned): the
  consumers attach there, the producers send to the other node, which forwards every message
  (composite-free sends, transactions, the divert's copies, the virtual topic's and the durable
  subscription's copies) to the owner. Each kill takes one node down, the owner and the entry
  node in turns; it is restarted (under its node name, once its old lease ran out) before the
  next round, and the round starts once one live node owns every queue.
- `BridgedBrokers`: a local broker whose queue `storm.outbound` a [[bridge]] forwards to
  `storm.inbound` on a remote broker, each on its own store of the back-end. Producers send to
  the local broker, consumers read the remote's; the kills take the local and the remote broker
  in turns, and each comes back on its own port (the bridge's url names the remote's).
"""
from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

from durable_clients import queue_stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scale"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ha"))

from cluster_testing import ClusterNode  # noqa: E402
from hermod.broker.tools.clients import management_call  # noqa: E402
from hermod_testing import BrokerProcess, wait_for  # noqa: E402

CLUSTER_LEASE_S = 10  # a node starved of CPU (nice 19 on a loaded machine) must still renew in time


def _owners(store_url: str) -> dict[str, str]:
    import psycopg
    with psycopg.connect(store_url.replace("postgresql+psycopg://", "postgresql://", 1),
                         autocommit=True) as connection:
        return dict(connection.execute(
            "SELECT o.queue, n.node FROM queue_owners o JOIN cluster_nodes n ON n.holder = o.holder"
            " WHERE n.expires_at > clock_timestamp()").fetchall())


def _queue_names(store_url: str) -> set[str]:
    import psycopg
    with psycopg.connect(store_url.replace("postgresql+psycopg://", "postgresql://", 1),
                         autocommit=True) as connection:
        return {row[0] for row in connection.execute("SELECT name FROM queues").fetchall()}


class ClusterBrokers:
    NAMES = ("node-a", "node-b")

    def __init__(self, store_url: str, directory: Path):
        self.store_url = store_url
        self.directory = directory
        self.nodes: dict[str, ClusterNode | None] = dict.fromkeys(self.NAMES)
        self.urls: dict[str, str] = {}
        self.owner: str | None = None
        self.kills = 0
        self.config = ""

    @property
    def backend(self) -> str:
        return "postgresql-cluster"

    @property
    def current(self):
        return self.nodes[self.NAMES[0]]

    @property
    def running(self) -> bool:
        return all(n is not None and n.proc.poll() is None for n in self.nodes.values())

    def _start_node(self, name: str) -> None:
        """Start `name`; a restart right after a kill waits for its old lease to run out."""
        deadline = time.monotonic() + 300
        while True:
            node = ClusterNode(name, self.store_url, self.directory, lease_s=CLUSTER_LEASE_S,
                               extra=self.config)
            node.start()
            try:
                self.urls[name] = node.wait_ready(300)
                self.nodes[name] = node
                return
            except AssertionError:
                node.kill()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)  # NodeNameTaken: the killed process's row is still live

    def start(self, config: str | None = None, *_args: str):
        self.config = config or ""
        down = [name for name in self.NAMES
                if self.nodes[name] is None or self.nodes[name].proc.poll() is not None]
        if len(down) < len(self.NAMES):
            # The survivor takes every queue once the dead node's lease ran out; only then does
            # the dead node come back (sooner, both would claim a share of them).
            survivors = set(self.NAMES) - set(down)  # not the dead one: its row lives on for a lease
            wait_for(lambda: self._single_owner() in survivors, timeout=120, interval=0.2,
                     message="the surviving node owns every queue")
        for name in down:  # the first start: node-a creates (and owns) every queue
            self._start_node(name)
        try:
            self.owner = wait_for(self._single_owner, timeout=120, interval=0.2,
                                  message="one live node owns every queue")
        except AssertionError:
            unowned = _queue_names(self.store_url) - set(_owners(self.store_url))
            raise AssertionError(f"no single owner: owners {_owners(self.store_url)}, "
                                 f"queues with no live owner {sorted(unowned)}") from None
        return self.current

    def _single_owner(self) -> str | None:
        owners = _owners(self.store_url)
        names = _queue_names(self.store_url)
        holders = set(owners.values())
        if len(holders) == 1 and names <= set(owners):
            return holders.pop()
        return None

    @property
    def url(self) -> str:
        return self.urls[self.owner]

    consumer_url = url

    @property
    def producer_url(self) -> str:
        return next(url for name, url in self.urls.items() if name != self.owner)

    def kill(self) -> None:
        """The owner and the entry node in turns."""
        self.kills += 1
        victim = self.owner if self.kills % 2 else next(n for n in self.NAMES if n != self.owner)
        self.nodes[victim].kill()

    def stop(self) -> int:
        codes = []
        for node in self.nodes.values():
            if node is not None and node.proc.poll() is None:
                node.proc.terminate()
                codes.append(node.proc.wait(30))
        return max(codes, default=0)

    def kill_all(self) -> None:
        for node in self.nodes.values():
            if node is None:
                continue
            code = node.proc.poll()
            if code is not None and code != -9:  # ended on its own: say why
                print(f"{node.node} exited with {code}: {''.join(node.stderr[-5:])}", flush=True)
            node.kill()


BRIDGE_SOURCE = "storm.outbound"
BRIDGE_SINK = "storm.inbound"


def bridge_configs(remote_port: int) -> tuple[str, str]:
    """(local, remote) configurations of the bridged pair."""
    local = (f'[[address]]\nname = "{BRIDGE_SOURCE}"\n  [[address.queue]]\n  name = "{BRIDGE_SOURCE}"\n'
             f'[[bridge]]\nname = "storm-bridge"\nqueue = "{BRIDGE_SOURCE}"\n'
             f'url = "amqp://127.0.0.1:{remote_port}"\naddress = "{BRIDGE_SINK}"\n')
    remote = f'[[address]]\nname = "{BRIDGE_SINK}"\n  [[address.queue]]\n  name = "{BRIDGE_SINK}"\n'
    return local, remote


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BridgedBrokers:
    def __init__(self, local_store: str, remote_store: str, directory: Path, backend: str):
        self.stores = {"local": local_store, "remote": remote_store}
        self.directory = directory
        self._backend = backend
        self.ports = {"local": _free_port(), "remote": _free_port()}
        self.configs = dict(zip(("local", "remote"), bridge_configs(self.ports["remote"])))
        self.brokers: dict[str, BrokerProcess | None] = {"local": None, "remote": None}
        self.kills = 0

    @property
    def backend(self) -> str:
        return f"{self._backend}-bridge"

    @property
    def current(self):
        return self.brokers["local"]

    @property
    def running(self) -> bool:
        return all(b is not None and b.proc.poll() is None for b in self.brokers.values())

    def _start(self, side: str) -> None:
        path = self.directory / f"{side}.toml"
        path.write_text(self.configs[side])
        args = ["--port", str(self.ports[side]), "--config", str(path), "--store", self.stores[side],
                "--http-port", "-1"]
        deadline = time.monotonic() + 300
        while True:
            try:
                self.brokers[side] = BrokerProcess(args, self.directory).start(timeout=300)
                return
            except RuntimeError:  # the port still held for a moment after the kill
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def start(self, _config: str | None = None, *_args: str):
        for side in ("remote", "local"):
            broker = self.brokers[side]
            if broker is None or broker.proc.poll() is not None:
                self._start(side)
        return self.current

    @property
    def url(self) -> str:
        return self.brokers["local"].url

    producer_url = url

    @property
    def consumer_url(self) -> str:
        return self.brokers["remote"].url

    def settled(self) -> bool:
        """The local queue is empty and the bridge has nothing unconfirmed."""
        local = self.brokers["local"].url
        rows = management_call(local, "bridge.stat")
        return (queue_stats(local)[BRIDGE_SOURCE]["messages"] == 0
                and all(r["unconfirmed"] == 0 and r["state"] == "up" for r in rows))

    def kill(self) -> None:
        """The local and the remote broker in turns."""
        self.kills += 1
        self.brokers["local" if self.kills % 2 else "remote"].kill()

    def stop(self) -> int:
        codes = [b.stop() for b in self.brokers.values() if b is not None]
        return max(codes, default=0)
