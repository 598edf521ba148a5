"""The command line every Python fidelity client takes (see interop/README.md, "The fidelity clients")."""
from __future__ import annotations

import argparse


def arguments(description: str, argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("mode", choices=["send", "receive"])
    p.add_argument("--url", required=True)
    p.add_argument("--address", required=True)
    p.add_argument("--spec")
    p.add_argument("--sent")
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--output")
    p.add_argument("--timeout", type=float, default=60)
    args = p.parse_args(argv)
    if args.mode == "send" and not (args.spec and args.sent) or args.mode == "receive" and not args.output:
        p.error("send needs --spec and --sent; receive needs --output")
    return args
