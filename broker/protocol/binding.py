"""The one door to the Proton binding's private layer (`proton._data`).

`dat2obj` and `obj2dat` convert between Python values and a `pn_data_t` that the engine owns (a
terminus's filter and properties, a disposition's state, connection properties); the binding
keeps them private, so an upgrade may move or change them. Every module imports them (and the
AMQP value classes that go with them) from here, and tests/wire/test_raw_layer.py pins the
version and checks each name below still exists and round-trips.
"""
from __future__ import annotations

from proton._data import (Described, PropertyDict, SymbolList, dat2obj, int32, obj2dat, symbol,
                          ulong)

__all__ = ["Described", "PropertyDict", "SymbolList", "dat2obj", "int32", "obj2dat", "symbol", "ulong"]
