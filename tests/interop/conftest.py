"""Fixtures for the interop tests: each non-Python client program as a `Tool` (interop_clients.py).

Using a client's fixture runs interop/setup.sh for it once per session: installed / built when
missing, skipped with the reason when its toolchain cannot be installed here at all.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from interop_clients import INTEROP, PROTONC_BUILD, RHEA, ClientProcess, Tool, node, setup_component

# the Python-client helpers of the wire tests (wire_helpers)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "wire"))
os.environ.setdefault("NODE_NO_WARNINGS", "1")


@pytest.fixture
def _clients():
    started: list[ClientProcess] = []
    yield started
    for p in started:
        p.kill()


@pytest.fixture
def rhea_send(_clients) -> Tool:
    setup_component("rhea")
    return Tool("rhea send.js", [node(), str(RHEA / "send.js")], RHEA, _clients)


@pytest.fixture
def rhea_receive(_clients) -> Tool:
    setup_component("rhea")
    return Tool("rhea receive.js", [node(), str(RHEA / "receive.js")], RHEA, _clients)


@pytest.fixture
def jms(_clients) -> Tool:
    """The JMS-style client (interop/rhea/jms.js): first argument produce / consume / unsubscribe."""
    setup_component("rhea")
    return Tool("jms.js", [node(), str(RHEA / "jms.js")], RHEA, _clients)


@pytest.fixture
def protonc_send(_clients) -> Tool:
    setup_component("protonc")
    return Tool("protonc-send", [str(PROTONC_BUILD / "protonc-send")], INTEROP, _clients)


@pytest.fixture
def protonc_receive(_clients) -> Tool:
    setup_component("protonc")
    return Tool("protonc-receive", [str(PROTONC_BUILD / "protonc-receive")], INTEROP, _clients)


