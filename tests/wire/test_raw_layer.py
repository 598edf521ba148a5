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


BROKER = PROTOCOL.parent


def test_only_the_binding_module_imports_the_private_proton_data():
    importers = sorted(str(source.relative_to(BROKER)) for source in BROKER.rglob("*.py")
                       if re.search(r"^\s*(from proton\._data |from proton import _data|import proton\._data)",
                                    source.read_text(), re.M))
    assert importers == ["protocol/binding.py"]


def test_the_private_names_the_broker_uses_exist_and_round_trip():
    from hermod.broker.protocol import binding

    missing = [name for name in binding.__all__ if not hasattr(binding, name)]
    assert not missing
    data = cproton_ffi.lib.pn_data(16)
    try:
        value = {binding.symbol("k"): [binding.ulong(7), binding.int32(-1), "text"],
                 binding.symbol("d"): binding.Described(binding.symbol("x-opt"), binding.symbol("v"))}
        binding.obj2dat(value, data)
        cproton_ffi.lib.pn_data_rewind(data)
        back = binding.dat2obj(data)
    finally:
        cproton_ffi.lib.pn_data_free(data)
    assert back == value
    assert type(back[binding.symbol("k")][0]) is binding.ulong
    assert type(back[binding.symbol("k")][1]) is binding.int32
