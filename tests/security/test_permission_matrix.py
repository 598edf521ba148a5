"""Issue 28, item 3: the permission matrix. Every cell of permission_matrix.py (operation x
entry path) is tried by a user whose role may (success and its effect seen) and by one whose
role may not (the protocol's refusal, `amqp:unauthorized-access` on AMQP, 403 on HTTP, and
nothing changed), against one broker whose config the table wrote. New entry paths join by
registering in the table; see its docstring."""
from __future__ import annotations

import base64
import re
import urllib.error
import urllib.request

import pytest

from hermod_testing import wait_for
from matrix_core import UNAUTHORIZED, USERS, Wire
from permission_matrix import cases, config

CASES = cases()


@pytest.fixture(scope="module")
def wire(start_module_broker):
    wire = Wire(start_module_broker(config=config()))
    yield wire
    wire.close()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_permission_matrix(wire, case):
    outcome = case.path.attempt(wire, case)
    where = f"{case.user} {case.operation} via {case.path.name} on {case.address}: {outcome}"
    if case.expect == "allowed":
        assert outcome.verdict == "allowed", where
        assert outcome.effect, "allowed, but the effect was not seen: " + where
    else:
        assert outcome.verdict == "denied", where
        assert outcome.answer in case.path.denials, where
        assert outcome.effect, "refused, but something changed: " + where
        if outcome.answer == UNAUTHORIZED and case.path.names_denial:
            assert names(outcome.detail, case.operation, case.path.denial_address(case)), \
                "the refusal does not name the operation and the address it touches: " + where
            wait_for(lambda: wire.logged("denied", case.user, case.operation, case.path.denial_address(case)),
                     message=f"a log line of the denial: {where}")


def names(text: str, operation: str, address: str) -> bool:
    """`text` names `operation` and exactly `address` (not a longer name containing it)."""
    return operation in text and re.search(rf"(?<![\w.:]){re.escape(address)}(?![\w#*]|\.[\w#*])", text) is not None


def test_every_operation_has_cells_on_amqp_and_http():
    from permission_matrix import cells
    covered = {(op, path.protocol) for _, op, path in cells()}
    for op in ("send", "consume", "browse", "create_address", "create_durable_queue", "delete_queue"):
        assert (op, "amqp") in covered, op
    for op in ("send", "browse", "manage", "delete_queue"):
        assert (op, "http") in covered and (op, "amqp") in covered, op


@pytest.mark.parametrize("protocol", ["amqp", "openwire", "stomp", "mqtt"])
def test_every_protocol_the_broker_speaks_has_entry_paths(protocol):
    """A protocol the front door hands to an adapter is a way in: it must have entry paths in
    the matrix (permission_matrix.py says how one joins). Protocols only detected (and closed)
    are not served yet."""
    from hermod.broker.protocol.server import SERVED_PROTOCOLS
    from permission_matrix import PATHS
    if protocol not in SERVED_PROTOCOLS:
        pytest.skip(f"the broker does not speak {protocol} yet")
    assert any(path.protocol == protocol for path in PATHS), f"no {protocol} entry path in the matrix"


def _get(wire, path: str, authorization: str | None):
    req = urllib.request.Request(wire.base + path, headers={"Authorization": authorization} if authorization else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers
    except urllib.error.HTTPError as e:
        return e.code, e.headers


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize("who", ["no-credentials", "wrong-password", "unknown-user"])
def test_http_bad_credentials_get_401_with_a_basic_challenge(wire, who):
    authorization = {"no-credentials": None, "wrong-password": _basic("may", "not-the-password"),
                     "unknown-user": _basic("mallory", "guess")}[who]
    for path in ("/api/queues", "/"):  # few: failed logins are answered ever later (throttling)
        status, headers = _get(wire, path, authorization)
        assert status == 401, (path, status)
        assert headers.get("WWW-Authenticate") == 'Basic realm="hermod"', (path, dict(headers))


def test_http_known_user_without_any_right_gets_403(wire):
    for path in ("/api/queues", "/metrics", "/"):
        status, _ = _get(wire, path, _basic("nobody", USERS["nobody"]))
        assert status == 403, (path, status)
