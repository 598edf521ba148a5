"""MQTT codec micro-benchmark: microseconds per QoS 1 PUBLISH decoded and encoded (timeit).

    .venv/bin/python benchmarks/mqtt_codec.py [payload-bytes ...]

A QoS 1 PUBLISH to `plant/line1/temp` with payloads of the given sizes (default 100, 1024 and
65536), in 3.1.1 and in 5.0 (without properties, and with a content type and two user
properties), one line per case: decode of the body alone, the reader (fixed header, size check
and decode), encode. Cost should grow with the payload only through one copy, never per byte.
"""
from __future__ import annotations

import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hermod.broker.mqtt import MQTT_3_1_1, MQTT_5, PacketReader, Properties, Publish, decode, encode  # noqa: E402
from hermod.broker.mqtt.properties import EMPTY  # noqa: E402

WITH_PROPERTIES = Properties(content_type="application/json", user_properties=(("site", "a"), ("line", "1")))


def per_call(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [100, 1024, 65536]
    print(f"{'case':<28}{'decode µs':>10}{'reader µs':>10}{'encode µs':>10}")
    for size in sizes:
        for version, props, label in ((MQTT_3_1_1, EMPTY, "3.1.1"), (MQTT_5, EMPTY, "5.0"),
                                      (MQTT_5, WITH_PROPERTIES, "5.0 + properties")):
            packet = Publish("plant/line1/temp", b"x" * size, 1, packet_id=42, properties=props)
            data = encode(packet, version)
            header = 2
            while data[header - 1] & 0x80:
                header += 1
            body = data[header:]
            reader = PacketReader(1 << 20, version)
            n = 20000 if size < 10000 else 2000
            d = per_call(lambda: decode(data[0], body, version), n)
            r = per_call(lambda: reader.feed(data), n)
            e = per_call(lambda: encode(packet, version), n)
            print(f"{label + f' {size} B':<28}{d:>10.2f}{r:>10.2f}{e:>10.2f}")


if __name__ == "__main__":
    main()
