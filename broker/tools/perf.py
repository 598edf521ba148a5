"""`hermod perf`: a load generator fast enough not to be the limit (see `perfclient`).

Modes:
  throughput  1 producer -> 1 consumer on one address, `--count` messages as fast as credit
              allows; prints msgs/s and, with `--pid`, the broker's CPU seconds per 100k
              deliveries (user + system, from /proc/PID/stat, the process and its descendants).
  latency     the same pair, the producer paced at `--rate` msg/s; prints p50/p99/max end-to-end
              latency in ms (send to receive, one clock: both ends run in this process).

One result line per run, `MODE key=value ...`, e.g.

  throughput msgs=100000 sent=100000 received=100000 secs=1.234 msg_per_s=81037 cpu_s=1.10 cpu_s_per_100k=1.10

Works against any AMQP 1.0 broker with SASL ANONYMOUS: the address is used as given for both the
consumer's source and the producer's target (RabbitMQ 3.10: `/queue/NAME`).
"""
from __future__ import annotations

import argparse
import os
import sys
from urllib.parse import urlsplit


def add_arguments(p) -> None:
    p.add_argument("--url", default=os.environ.get("HERMOD_URL", "amqp://127.0.0.1:5672"),
                   help="broker URL, amqp://HOST:PORT (default %(default)s)")
    p.add_argument("--address", default="perf", help="queue address used by both ends (default %(default)s)")
    p.add_argument("--mode", choices=("throughput", "latency"), default="throughput")
    p.add_argument("--count", type=int, default=None,
                   help="messages to move (default 100000; latency mode: 10 s worth at --rate)")
    p.add_argument("--size", type=int, default=1024, help="body size in bytes (default %(default)s)")
    p.add_argument("--durable", action="store_true", help="send durable messages (header durable=true)")
    p.add_argument("--credit", type=int, default=1000,
                   help="consumer credit window, topped up at half (default %(default)s)")
    p.add_argument("--rate", type=float, default=1000.0, help="latency mode: messages per second (default %(default)s)")
    p.add_argument("--warmup", type=int, default=None,
                   help="messages sent first and left out of the latency figures (default: 100 in latency mode, 0 otherwise)")
    p.add_argument("--presettled", action="store_true", help="producer sends pre-settled (at-most-once)")
    p.add_argument("--pid", type=int, action="append", default=[],
                   help="broker process id (repeatable): report its CPU seconds per 100k deliveries")
    p.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds (default %(default)s)")
    p.add_argument("--hostname", default=None, help="hostname sent in the AMQP open (default: the URL's host)")


def parse_url(url: str) -> tuple[str, int]:
    if "://" not in url:
        url = "amqp://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("amqp", "amqps", ""):
        raise ValueError(f"unsupported URL scheme {parts.scheme!r} (amqp:// or amqps://)")
    return parts.hostname or "127.0.0.1", parts.port or (5671 if parts.scheme == "amqps" else 5672)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, int(round(q / 100.0 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


def format_result(res, args) -> str:
    fields: list[tuple[str, object]] = []
    moved = res.received
    if res.mode == "throughput":
        fields.append(("msgs", moved))
    else:
        fields.append(("msgs", len(res.latencies_ns)))
    fields += [("sent", res.sent), ("received", res.received), ("acked", res.acked)]
    if res.rejected:
        fields.append(("rejected", res.rejected))
    fields.append(("secs", f"{res.secs:.3f}"))
    if res.mode == "throughput":
        fields.append(("msg_per_s", f"{moved / res.secs:.0f}" if res.secs > 0 else "0"))
    else:
        lat = sorted(x / 1e6 for x in res.latencies_ns)
        fields.append(("rate", f"{args.rate:g}"))
        fields.append(("achieved_rate", f"{moved / res.secs:.1f}" if res.secs > 0 else "0"))
        if lat:
            fields += [("p50_ms", f"{percentile(lat, 50):.3f}"), ("p90_ms", f"{percentile(lat, 90):.3f}"),
                       ("p99_ms", f"{percentile(lat, 99):.3f}"), ("p999_ms", f"{percentile(lat, 99.9):.3f}"),
                       ("max_ms", f"{lat[-1]:.3f}"), ("mean_ms", f"{sum(lat) / len(lat):.3f}")]
        if res.out_of_order:
            fields.append(("out_of_order", res.out_of_order))
        if res.unstamped:
            fields.append(("unstamped", res.unstamped))
    if res.cpu_s is not None:
        fields.append(("cpu_s", f"{res.cpu_s:.2f}"))
        if moved:
            fields.append(("cpu_s_per_100k", f"{res.cpu_s * 100000 / moved:.2f}"))
    if moved and res.client_cpu_s:
        fields.append(("client_cpu_s_per_100k", f"{res.client_cpu_s * 100000 / moved:.2f}"))
    fields += [("size", args.size), ("credit", args.credit), ("durable", int(bool(args.durable)))]
    if res.error:
        fields.append(("error", '"' + res.error.replace('"', "'") + '"'))
    return res.mode + " " + " ".join(f"{k}={v}" for k, v in fields)


def main(args) -> int:
    from . import perfclient, perfrun

    try:
        host, port = parse_url(args.url)
    except ValueError as e:
        print(f"hermod perf: {e}", file=sys.stderr)
        return 2
    if args.size < 0 or args.credit <= 0:
        print("hermod perf: --size must be >= 0 and --credit > 0", file=sys.stderr)
        return 2
    latency = args.mode == "latency"
    if latency and args.size < perfclient.STAMP_SIZE:
        print(f"hermod perf: latency mode needs --size >= {perfclient.STAMP_SIZE} (the timestamp lives in the body)",
              file=sys.stderr)
        return 2
    if latency and args.rate <= 0:
        print("hermod perf: --rate must be > 0", file=sys.stderr)
        return 2
    if args.count is None:
        args.count = int(args.rate * 10) if latency else 100000
    if args.warmup is None:
        args.warmup = 100 if latency else 0
    cpu = perfrun.cpu_probe(args.pid) if args.pid else None
    res = perfrun.run(host, port, args.address, mode=args.mode, count=args.count, size=args.size,
                         durable=args.durable, credit=args.credit, rate=args.rate, warmup=args.warmup,
                         presettled=args.presettled, timeout=args.timeout, cpu=cpu, hostname=args.hostname,
                         tls=args.url.startswith("amqps://"))
    print(format_result(res, args), flush=True)
    if res.error:
        print(f"hermod perf: {res.error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # python -m hermod.broker.tools.perf
    parser = argparse.ArgumentParser(prog="hermod perf")
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
