"""OpenWire XA branches outlive a broker kill (contract, "Other protocols": PREPARE survives a
broker restart and RECOVER lists it), with the real ActiveMQ 5.17 client, on SQLite and
PostgreSQL: a branch that sent a message and acknowledged another is prepared, the broker is
SIGKILLed and restarted on the same store; the acknowledged message stays invisible, RECOVER
lists the branch, and COMMIT delivers the sent message and removes the acknowledged one (or
ROLLBACK gives the acknowledged message back and drops the sent one)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "openwire"))

from owclient import JmsError, OwClient  # noqa: E402

from hermod_testing import wait_for  # noqa: E402


def port_of(b) -> int:
    return int(b.address.rsplit(":", 1)[1])


def xa_client(b) -> OwClient:
    c = OwClient(port_of(b))
    c("xaconnect", c.url.replace(":", "%3A").replace("/", "%2F"))
    c("xasession", "x")
    return c


def plain_client(b) -> OwClient:
    c = OwClient(port_of(b))
    c.connect()
    c("session", "s", "false", "auto")
    return c


def prepare_branch(b, gtrid: str) -> None:
    """`ack-me` waits on xa.in; branch `gtrid` consumes it and sends `xa-sent` to xa.out, is
    prepared, and its client is killed."""
    c = plain_client(b)
    x = xa_client(b)
    try:
        c("producer", "p", "s", "queue:xa.in", "persistent")
        c("send", "p", "text", "ack-me")
        x("producer", "xp", "x", "queue:xa.out", "persistent")
        x("xastart", "x", gtrid)
        x("consumer", "xc", "x", "queue:xa.in")
        assert x.receive("xc")["body"] == "ack-me"
        x("send", "xp", "text", "xa-sent")
        x("xaend", "x", gtrid)
        assert x("xaprepare", "x", gtrid) == "0"  # XA_OK
    finally:
        x.kill()
        c.close()


def nothing_on(c: OwClient, queue: str, name: str) -> bool:
    c("consumer", name, "s", f"queue:{queue}")
    found = c.receive(name, 300)
    c("closeconsumer", name)
    return found is None


@pytest.mark.parametrize("decision", ["commit", "rollback"])
def test_a_prepared_branch_survives_a_broker_kill_and_is_decided_after(brokers, decision):
    b = brokers.start()
    prepare_branch(b, "g1")
    w = plain_client(b)
    try:
        assert nothing_on(w, "xa.in", "i0"), "the acknowledged message is invisible while prepared"
        assert nothing_on(w, "xa.out", "o0"), "the sent message waits for the commit"
    finally:
        w.close()
    brokers.kill()
    b = brokers.start()
    w = plain_client(b)
    x = xa_client(b)
    try:
        assert nothing_on(w, "xa.in", "i1"), "still invisible after the restart"
        assert nothing_on(w, "xa.out", "o1")
        assert x("xarecover", "x") == "g1"
        if decision == "commit":
            x("xacommit", "x", "g1", "false")
            w("consumer", "o2", "s", "queue:xa.out")
            assert w.receive("o2")["body"] == "xa-sent"
            assert nothing_on(w, "xa.in", "i2")
        else:
            x("xarollback", "x", "g1")
            w("consumer", "i2", "s", "queue:xa.in")
            back = w.receive("i2")
            assert back["body"] == "ack-me"
            assert nothing_on(w, "xa.out", "o2")
        assert x("xarecover", "x") == ""
    finally:
        x.close()
        w.close()
    brokers.kill()  # the decision was stored: nothing comes back after another kill
    b = brokers.start()
    w = plain_client(b)
    x = xa_client(b)
    try:
        assert x("xarecover", "x") == ""
        assert nothing_on(w, "xa.in", "i3")
        assert nothing_on(w, "xa.out", "o3")
    finally:
        x.close()
        w.close()


def test_commit_or_rollback_of_an_unknown_xid_is_xaer_nota(brokers):
    b = brokers.start()
    x = xa_client(b)
    try:
        with pytest.raises(JmsError) as refused:
            x("xacommit", "x", "never-seen", "false")
        assert refused.value.java_class == "javax.transaction.xa.XAException"
        assert refused.value.message.startswith("errorCode=-4 ")  # XAER_NOTA
        with pytest.raises(JmsError) as refused:
            x("xarollback", "x", "never-seen")
        assert refused.value.message.startswith("errorCode=-4 ")
        x("producer", "xp", "x", "queue:xa.dup", "persistent")
        x("xastart", "x", "d1")
        x("send", "xp", "text", "once")
        x("xaend", "x", "d1")
        assert x("xaprepare", "x", "d1") == "0"
        x("xacommit", "x", "d1", "false")
        with pytest.raises(JmsError) as refused:
            x("xacommit", "x", "d1", "false")  # already committed: unknown now
        assert refused.value.message.startswith("errorCode=-4 ")
    finally:
        x.close()


def test_the_transaction_timeout_rolls_back_an_active_branch_never_a_prepared_one(brokers):
    b = brokers.start("[server]\ntransaction_timeout_s = 1\n")
    x = xa_client(b)
    w = plain_client(b)
    try:
        x("producer", "xp", "x", "queue:xa.timeout", "persistent")
        x("xastart", "x", "kept")
        x("send", "xp", "text", "prepared-one")
        x("xaend", "x", "kept")
        assert x("xaprepare", "x", "kept") == "0"
        x("xastart", "x", "late")
        x("send", "xp", "text", "active-one")
        wait_for(lambda: any("timed out" in line for line in b.stderr_lines + b.stdout_lines),
                 timeout=15, message="the active branch timed out")
        x("xaend", "x", "late")
        with pytest.raises(JmsError) as refused:
            x("xaprepare", "x", "late")
        assert refused.value.message.startswith("errorCode=-4 ")  # rolled back: unknown now
        assert x("xarecover", "x") == "kept"
        x("xacommit", "x", "kept", "false")
        w("consumer", "c", "s", "queue:xa.timeout")
        assert w.receive("c")["body"] == "prepared-one"
        assert w.receive("c", 300) is None
    finally:
        x.close()
        w.close()


def test_an_acknowledgement_beyond_the_recovery_window_stays_in_doubt_and_is_committed(brokers):
    """With a small memory limit recovery reads only the head of xa.deep; the message the
    prepared branch acknowledged is further in, read later by paging: it must not reach a
    consumer, and the commit removes it."""
    pad = "x" * 40_000
    b = brokers.start()
    c = plain_client(b)
    x = xa_client(b)
    try:
        c("producer", "p", "s", "queue:xa.deep", "persistent")
        for i in range(40):
            c("send", "p", "text", f"m{i}-{pad}", f"prop.n=int:{i}")
        x("xastart", "x", "deep")
        x("consumer", "xc", "x", "queue:xa.deep", "selector=n%20%3D%2035")
        assert x.receive("xc")["body"].startswith("m35-")
        x("xaend", "x", "deep")
        assert x("xaprepare", "x", "deep") == "0"
    finally:
        x.kill()
        c.close()
    brokers.kill()
    b = brokers.start("[server]\nmax_memory_mb = 1\n")
    w = plain_client(b)
    x = xa_client(b)
    try:
        w("consumer", "d", "s", "queue:xa.deep")
        got = []
        while (m := w.receive("d", 2000)) is not None:
            got.append(m["body"].split("-", 1)[0])
        assert got == [f"m{i}" for i in range(40) if i != 35]
        assert x("xarecover", "x") == "deep"
        x("xacommit", "x", "deep", "false")
    finally:
        x.close()
        w.close()
    brokers.kill()
    b = brokers.start()
    w = plain_client(b)
    try:
        assert nothing_on(w, "xa.deep", "d2")
    finally:
        w.close()
