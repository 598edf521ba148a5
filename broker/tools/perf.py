"""`hermod perf`: a load generator fast enough not to be the limit (see `perfclient`).

Scenarios (`--scenario`; `--producers N` / `--consumers N` on each, one connection per link):
  q1      queue: producers -> one queue -> consumers (competing), unsettled sends, `--count` in all
  q1d     the same with durable messages (header durable=true)
  t4      topic: producers -> one topic -> `--consumers` subscribers (default 4), each gets all
  lat     q1 paced at `--rate` msg/s: p50/p99/max end-to-end latency, and the echo floor (a plain
          TCP echo at the same rate, no broker) measured right after, for comparison
  fanout  producers -> one address with `--diverts K` copies: consumers on the address and on
          ADDRESS.copy0 .. copyK-1 (the broker must have those diverts: `--print-config`)
`--mode throughput|latency` (older scripts) is q1 (q1d with `--durable`) / lat.

Result: one line on stdout, `MODE key=value ...` (MODE throughput or latency), e.g.

  throughput scenario=q1 msgs=100000 sent=100000 received=100000 ... msg_per_s=81037 cpu_s_per_100k=1.10

or, with `--json`, one JSON object (msg_per_s, deliveries_per_s, cpu_s_per_100k and rss_mib with
`--pid`, p50_ms/p99_ms and echo_p50_ms/echo_p99_ms for lat). A progress line goes to stderr:
rewritten in place on a terminal, one line every few seconds otherwise (`--no-progress`: none).
CPU is the broker's (user + system from /proc/PID/stat, the process and its descendants) over
the timed part only.

Works against any AMQP 1.0 broker with SASL ANONYMOUS: addresses are used as given (RabbitMQ
3.10: `/queue/NAME`, `/topic/NAME`); a bare t4 address gets Hermod's `topic://` prefix.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from urllib.parse import urlsplit

from .perfecho import percentile

SCENARIOS = ("q1", "q1d", "t4", "lat", "fanout")
DEFAULT_ADDRESS = {"q1": "perf", "q1d": "perf.durable", "t4": "perf.topic", "lat": "perf", "fanout": "perf.fan"}


def add_arguments(p) -> None:
    p.add_argument("--url", default=os.environ.get("HERMOD_URL", "amqp://127.0.0.1:5672"),
                   help="broker URL, amqp://HOST:PORT (default %(default)s)")
    p.add_argument("--scenario", choices=SCENARIOS, default=None, help="what to measure (default q1)")
    p.add_argument("--address", default=None, help="the address (default per scenario: perf, perf.topic, ...)")
    p.add_argument("--mode", choices=("throughput", "latency"), default=None,
                   help="older spelling: throughput = q1 (q1d with --durable), latency = lat")
    p.add_argument("--producers", type=int, default=1, help="producer links (default %(default)s)")
    p.add_argument("--consumers", type=int, default=None,
                   help="consumer links (default 1; t4: 4 subscribers; fanout: per copy)")
    p.add_argument("--diverts", type=int, default=0, help="fanout: divert copies of the address (default 0)")
    p.add_argument("--print-config", action="store_true",
                   help="fanout: print the Hermod [[divert]] tables the scenario expects, and exit")
    p.add_argument("--count", type=int, default=None,
                   help="messages to send in all (default 100000; lat: 10 s worth at --rate)")
    p.add_argument("--size", type=int, default=1024, help="body size in bytes (default %(default)s)")
    p.add_argument("--durable", action="store_true", help="send durable messages (header durable=true)")
    p.add_argument("--credit", type=int, default=1000,
                   help="consumer credit window, topped up at half (default %(default)s)")
    p.add_argument("--rate", type=float, default=1000.0, help="lat: messages per second in all (default %(default)s)")
    p.add_argument("--warmup", type=int, default=None,
                   help="messages each producer sends first, left out of the latency figures (default: 100 for lat, 0 otherwise)")
    p.add_argument("--presettled", action="store_true", help="producers send pre-settled (at-most-once)")
    p.add_argument("--pid", type=int, action="append", default=[],
                   help="broker process id (repeatable): report its CPU seconds per 100k deliveries and its RSS")
    p.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds (default %(default)s)")
    p.add_argument("--hostname", default=None, help="hostname sent in the AMQP open (default: the URL's host)")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout instead of the result line")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    p.add_argument("--no-echo-floor", action="store_true", help="lat: skip the echo floor measurement")


def parse_url(url: str) -> tuple[str, int]:
    if "://" not in url:
        url = "amqp://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("amqp", "amqps", ""):
        raise ValueError(f"unsupported URL scheme {parts.scheme!r} (amqp:// or amqps://)")
    return parts.hostname or "127.0.0.1", parts.port or (5671 if parts.scheme == "amqps" else 5672)


def divert_config(address: str, diverts: int) -> str:
    """The Hermod configuration the fanout scenario expects: K non-exclusive diverts of
    `address`, copy I forwarded to ADDRESS.copyI."""
    return "".join(f'[[divert]]\nname = "perf-copy{i}"\naddress = "{address}"\nforwarding_address = "{address}.copy{i}"\n\n'
                   for i in range(diverts))


def topic_address(address: str) -> str:
    return address if "://" in address or address.startswith("/") else "topic://" + address


def scenario_flow(scenario: str, address: str, producers: int, consumers: int | None, diverts: int, count: int):
    """The Flow (who sends and receives where, how many deliveries each message makes)."""
    from .perfrun import Flow

    if scenario == "t4":
        n = 4 if consumers is None else consumers
        topic = topic_address(address)
        return Flow([topic] * producers, [(topic, None)] * n, count, fanout=n)
    n = 1 if consumers is None else consumers
    if scenario == "fanout":
        copies = [address] + [f"{address}.copy{i}" for i in range(diverts)]
        return Flow([address] * producers, [(a, None) for a in copies for _ in range(n)], count,
                    fanout=len(copies))
    return Flow([address] * producers, [(address, None)] * n, count)


class Progress:
    """The progress line on stderr: in place on a terminal (4 a second), else every 5 s."""

    def __init__(self, label: str, stream=sys.stderr, enabled: bool = True):
        self.label, self.stream, self.enabled = label, stream, enabled
        self.tty = enabled and stream.isatty()
        self.every = 0.25 if self.tty else 5.0
        self.next_at = time.monotonic() + self.every
        self.shown = False

    def __call__(self, received: int, expected: int, sent: int, elapsed: float) -> None:
        if not self.enabled or time.monotonic() < self.next_at:
            return
        self.next_at = time.monotonic() + self.every
        rate = received / elapsed if elapsed > 0 else 0.0
        text = (f"{self.label}: {received}/{expected} deliveries ({100.0 * received / max(1, expected):.0f}%), "
                f"{sent} sent, {elapsed:.1f} s, {rate:,.0f} deliveries/s")
        self.stream.write(("\r" + text + "\x1b[K") if self.tty else text + "\n")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.tty and self.shown:
            self.stream.write("\n")
            self.stream.flush()


def summary(res, args, scenario: str, flow, echo: dict | None = None) -> dict:
    """The run's figures as one flat dict (the JSON summary; the result line shows the same)."""
    msgs = len(res.latencies_ns) if res.mode == "latency" else res.received // max(1, flow.fanout)
    out: dict = {"scenario": scenario, "mode": res.mode, "producers": len(flow.targets),
                 "consumers": len(flow.sources), "msgs": msgs, "sent": res.sent, "received": res.received,
                 "acked": res.acked, "expected": res.expected, "secs": round(res.secs, 3)}
    if res.rejected:
        out["rejected"] = res.rejected
    if res.secs > 0:
        out["msg_per_s"] = round(res.received / max(1, flow.fanout) / res.secs, 1)
        out["deliveries_per_s"] = round(res.received / res.secs, 1)
    if res.mode == "latency":
        lat = sorted(x / 1e6 for x in res.latencies_ns)
        out["rate"] = args.rate
        if lat:
            out.update(p50_ms=round(percentile(lat, 50), 3), p90_ms=round(percentile(lat, 90), 3),
                       p99_ms=round(percentile(lat, 99), 3), p999_ms=round(percentile(lat, 99.9), 3),
                       max_ms=round(lat[-1], 3), mean_ms=round(sum(lat) / len(lat), 3))
        if res.out_of_order:
            out["out_of_order"] = res.out_of_order
        if res.unstamped:
            out["unstamped"] = res.unstamped
        if echo:
            out.update(echo_p50_ms=echo["p50_ms"], echo_p99_ms=echo["p99_ms"], echo_max_ms=echo["max_ms"])
    if res.cpu_s is not None:
        out["cpu_s"] = round(res.cpu_s, 3)
        if res.received:
            out["cpu_s_per_100k"] = round(res.cpu_s * 100000 / res.received, 3)
    if res.received and res.client_cpu_s:
        out["client_cpu_s_per_100k"] = round(res.client_cpu_s * 100000 / res.received, 3)
    if res.rss_bytes is not None:
        out["rss_mib"] = round(res.rss_bytes / 2**20, 1)
    out.update(size=args.size, credit=args.credit, durable=int(bool(args.durable)))
    if scenario == "fanout":
        out["diverts"] = args.diverts
    if res.error:
        out["error"] = res.error
    return out


def format_line(s: dict) -> str:
    """`MODE key=value ...` (MODE throughput or latency; older scripts parse this)."""
    def show(v):
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 1000 else f"{v:.0f}"
        if isinstance(v, str) and (" " in v or not v):
            return '"' + v.replace('"', "'") + '"'
        return str(v)
    return s["mode"] + " " + " ".join(f"{k}={show(v)}" for k, v in s.items() if k != "mode")


def main(args) -> int:
    from . import perfclient, perfecho, perfrun

    scenario = args.scenario or {"latency": "lat", None: "q1"}.get(args.mode, "q1d" if args.durable else "q1")
    if args.mode and args.scenario and (args.mode == "latency") != (args.scenario == "lat"):
        print(f"hermod perf: --mode {args.mode} does not go with --scenario {args.scenario}", file=sys.stderr)
        return 2
    address = args.address or DEFAULT_ADDRESS[scenario]
    if args.print_config:
        print(divert_config(address, args.diverts), end="")
        return 0
    try:
        host, port = parse_url(args.url)
    except ValueError as e:
        print(f"hermod perf: {e}", file=sys.stderr)
        return 2
    if args.size < 0 or args.credit <= 0 or args.producers < 1 or (args.consumers is not None and args.consumers < 1) \
            or args.diverts < 0:
        print("hermod perf: --size and --diverts must be >= 0, --credit, --producers and --consumers > 0",
              file=sys.stderr)
        return 2
    latency = scenario == "lat"
    if latency and args.size < perfclient.STAMP_SIZE:
        print(f"hermod perf: latency needs --size >= {perfclient.STAMP_SIZE} (the timestamp lives in the body)",
              file=sys.stderr)
        return 2
    if latency and args.rate <= 0:
        print("hermod perf: --rate must be > 0", file=sys.stderr)
        return 2
    if scenario == "q1d":
        args.durable = True
    if args.count is None:
        args.count = int(args.rate * 10) if latency else 100000
    if args.warmup is None:
        args.warmup = 100 if latency else 0
    flow = scenario_flow(scenario, address, args.producers, args.consumers, args.diverts, args.count)
    progress = Progress(f"hermod perf {scenario}", enabled=not args.no_progress)
    res = perfrun.run_flow(host, port, flow, mode="latency" if latency else "throughput", size=args.size,
                           durable=args.durable, credit=args.credit, rate=args.rate, warmup=args.warmup,
                           presettled=args.presettled, timeout=args.timeout,
                           cpu=perfrun.cpu_probe(args.pid) if args.pid else None,
                           rss=perfrun.rss_probe(args.pid) if args.pid else None,
                           hostname=args.hostname, tls=args.url.startswith("amqps://"), progress=progress)
    progress.done()
    echo = None
    if latency and not res.error and not args.no_echo_floor:
        echo = perfecho.echo_floor(args.rate, min(args.count, 5000), args.size)
    s = summary(res, args, scenario, flow, echo)
    print(json.dumps(s) if args.json else format_line(s), flush=True)
    if res.error:
        print(f"hermod perf: {res.error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # python -m hermod.broker.tools.perf
    parser = argparse.ArgumentParser(prog="hermod perf")
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
