"""The broker drives Proton through `cproton_ffi.lib`, the binding's internal layer: pin the
version and check every engine function the adapter calls still exists (an upgrade that drops
one fails here, not at the first message)."""
from __future__ import annotations

import re
from pathlib import Path

import cproton_ffi
import proton

PROTOCOL = Path(__file__).resolve().parents[2] / "broker" / "protocol"


def test_pinned_proton_version():
    assert proton.VERSION == (0, 40, 0)


def test_every_engine_function_the_adapter_uses_exists():
    used = set()
    for source in PROTOCOL.glob("*.py"):
        used |= set(re.findall(r"\blib\.(pn_[a-z0-9_]+|PN_[A-Z0-9_]+)", source.read_text()))
    assert used, "the adapter should use the raw layer"
    missing = sorted(n for n in used if not hasattr(cproton_ffi.lib, n))
    assert not missing
