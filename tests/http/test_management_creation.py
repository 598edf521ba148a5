"""Retry to an address that went away creates it again (and an anycast one its durable queue), as
a client's send would: it needs the same rights, `create_address` and `create_durable_queue`,
over HTTP and AMQP alike. Found in issue 28's adversarial pass: a user with `send` and `manage`
but no `create_address` made addresses through retry (send and move answer 404 for an address
that does not exist, and still do)."""
from __future__ import annotations

import json

import pytest
from proton import Message
from proton.utils import BlockingConnection

from hermod.broker.security.passwords import hash_password
from hermod.broker.tools.clients import ManagementCallError, management_call
from http_helpers import call, http_url, q

PW = {"mgr": "mgr-pw-1", "root": "root-pw-2"}
EVERY = ("send", "consume", "browse", "create_address", "create_durable_queue", "delete_queue", "manage")
CONFIG = "[security]\nanonymous = false\n" + "".join(
    f'[[security.user]]\nname = "{n}"\npassword_hash = "{hash_password(PW[n], iterations=64)}"\nroles = ["{n}"]\n'
    for n in PW) + '[[security.permission]]\nmatch = "#"\n' + "".join(f'{op} = ["root"]\n' for op in EVERY) + \
    '[[security.permission]]\nmatch = "shop.#"\n' + "".join(
        f'{op} = {json.dumps(["root", "mgr"] if op in ("send", "consume", "browse", "manage") else ["root"])}\n'
        for op in EVERY) + \
    '[[security.permission]]\nmatch = "shop.open.#"\n' + "".join(f'{op} = ["root", "mgr"]\n' for op in EVERY) + """
[[address]]
name = "shop.orders"
  [[address.queue]]
  name = "shop.orders"
"""


def http(broker, user):
    import base64
    headers = {"Authorization": "Basic " + base64.b64encode(f"{user}:{PW[user]}".encode()).decode()}
    base = http_url(broker)

    def door(operation, **args):
        method, path, body = {
            "message.send": ("POST", f"/api/addresses/{q(args.get('address', ''))}/messages", {"body": "x"}),
            "queue.move": ("POST", f"/api/queues/{q(args.get('name', ''))}/move", {"to": args.get("to")}),
            "queue.retry": ("POST", f"/api/queues/{q(args.get('name', ''))}/retry", {}),
            "address.list": ("GET", "/api/addresses", None),
        }[operation]
        return call(base, method, path, body, headers=headers)
    return door


def amqp(broker, user):
    url = broker.url.replace("amqp://", f"amqp://{user}:{PW[user]}@")

    def door(operation, **args):
        if operation == "message.send":
            args = {**args, "body": "x"}
        try:
            return 200, management_call(url, operation, args=args)
        except ManagementCallError as e:
            return e.status, str(e)
    return door


@pytest.mark.parametrize("make_door", [http, amqp], ids=["http", "amqp"])
def test_writing_to_a_new_address_needs_the_rights_to_create_it(start_broker, make_door):
    b = start_broker(config=CONFIG)
    conn = BlockingConnection(b.url, user="root", password=PW["root"], allowed_mechs="PLAIN",
                              allow_insecure_mechs=True, timeout=10)
    conn.create_sender("shop.orders").send(Message(body="order"))
    conn.close()
    mgr, root = make_door(b, "mgr"), make_door(b, "root")
    status, _ = mgr("message.send", address="shop.new")  # send and move do not create: 404
    assert status == 404
    status, _ = mgr("queue.move", name="shop.orders", to="shop.elsewhere")
    assert status == 404
    conn = BlockingConnection(b.url, user="root", password=PW["root"], allowed_mechs="PLAIN",
                              allow_insecure_mechs=True, timeout=10)
    for dlq, gone in (("shop.dlq", "shop.gone"), ("shop.open.dlq", "shop.open.gone")):
        conn.create_sender(dlq).send(Message(body="dead", annotations={"x-opt-ORIG-ADDRESS": gone}))
    conn.close()
    status, answer = mgr("queue.retry", name="shop.dlq")
    assert status == 403 and "create_address" in str(answer), answer
    status, answer = mgr("queue.retry", name="shop.open.dlq")  # she may create there
    assert status == 200 and answer["moved"] == 1, answer
    status, addresses = root("address.list")
    names = {a["name"] for a in addresses}
    assert "shop.gone" not in names and "shop.open.gone" in names
    status, answer = root("queue.retry", name="shop.dlq")
    assert status == 200 and answer["moved"] == 1, answer
