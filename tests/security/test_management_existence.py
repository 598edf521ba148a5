"""Management queue operations answered 404 before 403: a tenant who may not manage
`secret.payroll` learnt whether it existed (404 for a missing queue, 403 for an existing one).
Contract ("Security": management is checked per address; "HTTP": a known user without the right
gets 403): the caller without the right gets the same 403 whether the queue exists or not, over
HTTP and AMQP management; 404 only to one who holds the right where the queue would be."""
from __future__ import annotations

import pytest

from matrix_core import Wire, anycast_address, users_toml

TENANT = "may"  # matrix_core's users: `may` is the tenant here, `admin` holds everything

CONFIG = "\n".join([
    "[security]\nanonymous = false\n", users_toml(),
    '[[security.permission]]\nmatch = "#"\n' + "".join(
        f'{right} = ["admin"]\n' for right in ("send", "consume", "browse", "manage", "delete_queue",
                                               "create_address", "create_durable_queue")),
    '[[security.permission]]\nmatch = "tenantA.#"\n' + "".join(
        f'{right} = ["admin", "may"]\n' for right in ("send", "consume", "browse", "manage", "delete_queue",
                                                      "create_address", "create_durable_queue")),
    '[[security.permission]]\nmatch = "hermod.management"\nsend = ["admin", "may"]\n',
    anycast_address("secret.payroll"), anycast_address("tenantA.orders"),
])

# (name, HTTP method, path after the queue name, body, AMQP operation)
OPERATIONS = [
    ("get", "GET", "", None, "queue.get"),
    ("peek", "GET", "/messages", None, "queue.browse"),
    ("purge", "POST", "/purge", {}, "queue.purge"),
    ("move", "POST", "/move", {"to": "tenantA.orders"}, "queue.move"),
    ("retry", "POST", "/retry", {}, "queue.retry"),
    ("delete", "DELETE", "", None, "queue.delete"),
]


@pytest.fixture(scope="module")
def wire(start_module_broker):
    wire = Wire(start_module_broker(config=CONFIG))
    wire.send("secret.payroll", "salary-1")
    yield wire
    wire.close()


def http(wire, op, name):
    _, method, tail, body, _ = op
    return wire.http(TENANT, method, f"/api/queues/{name}{tail}", body)


def amqp(wire, op, name):
    args = {"name": name}
    if op[0] == "move":
        args["to"] = "tenantA.orders"
    return wire.management(TENANT, op[4], args)


def masked(answer, name: str):
    """The answer with the queue's name put back to a placeholder, for comparing two names."""
    text = answer.get("error") if isinstance(answer, dict) else answer
    return str(text).replace(name, "NAME")


@pytest.mark.parametrize("op", OPERATIONS, ids=[o[0] for o in OPERATIONS])
@pytest.mark.parametrize("transport", ["http", "amqp"])
def test_a_tenant_learns_nothing_of_whether_another_tenants_queue_exists(wire, op, transport):
    ask = http if transport == "http" else amqp
    existing = ask(wire, op, "secret.payroll")
    missing = ask(wire, op, "secret.nothing")
    assert existing[0] == 403, existing
    assert missing[0] == 403, missing
    assert masked(existing[1], "secret.payroll") == masked(missing[1], "secret.nothing"), (existing, missing)
    assert wire.messages("secret.payroll") == 1  # nothing touched


@pytest.mark.parametrize("transport", ["http", "amqp"])
def test_a_missing_queue_where_the_caller_may_manage_is_404(wire, transport):
    op = OPERATIONS[2]  # purge
    status, _ = (http if transport == "http" else amqp)(wire, op, "tenantA.nothing")
    assert status == 404
    fqqn_status, _ = (http if transport == "http" else amqp)(wire, op, "secret.payroll%3A%3Anothing"
                                                             if transport == "http" else "secret.payroll::nothing")
    assert fqqn_status == 403  # an FQQN is checked on its address part
