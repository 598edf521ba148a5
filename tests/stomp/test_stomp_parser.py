"""The frame parser against the STOMP 1.2 specification's examples and framing rules (1.0, 1.1,
1.2): EOLs, heart-beats, escaping per version, repeated headers, `content-length` bodies."""

from __future__ import annotations

import pytest

from hermod.broker.stomp import ALL_COMMANDS, HEARTBEAT, Frame, FrameParser, Limits, StompError


def parse(data: bytes, version: str | None = "1.2", commands=ALL_COMMANDS) -> list:
    return FrameParser(version=version, commands=commands).feed(data)


def one(data: bytes, version: str | None = "1.2") -> Frame:
    frames = [f for f in parse(data, version) if f is not HEARTBEAT]
    assert len(frames) == 1, frames
    return frames[0]


# --- the specification's example frames (1.2) ----------------------------------------------

SPEC_EXAMPLES = [
    (b"CONNECT\naccept-version:1.2\nhost:stomp.github.org\n\n\x00",
     "CONNECT", [("accept-version", "1.2"), ("host", "stomp.github.org")], b""),
    (b"CONNECTED\nversion:1.2\n\n\x00", "CONNECTED", [("version", "1.2")], b""),
    (b"CONNECT\naccept-version:1.0,1.1,2.0\nhost:stomp.github.org\n\n\x00",
     "CONNECT", [("accept-version", "1.0,1.1,2.0"), ("host", "stomp.github.org")], b""),
    (b"CONNECTED\nversion:1.1\n\n\x00", "CONNECTED", [("version", "1.1")], b""),
    (b"ERROR\nversion:1.2,2.1\ncontent-type:text/plain\n\nSupported protocol versions are 1.2 2.1\x00",
     "ERROR", [("version", "1.2,2.1"), ("content-type", "text/plain")], b"Supported protocol versions are 1.2 2.1"),
    (b"SEND\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\n\x00",
     "SEND", [("destination", "/queue/a"), ("content-type", "text/plain")], b"hello queue a\n"),
    (b"SEND\ndestination:/queue/a\nreceipt:message-12345\n\nhello queue a\x00",
     "SEND", [("destination", "/queue/a"), ("receipt", "message-12345")], b"hello queue a"),
    (b"SEND\ndestination:/queue/a\ntransaction:tx1\ncontent-type:text/plain\n\nhello queue a\x00",
     "SEND", [("destination", "/queue/a"), ("transaction", "tx1"), ("content-type", "text/plain")], b"hello queue a"),
    (b"SUBSCRIBE\nid:0\ndestination:/queue/foo\nack:client\n\n\x00",
     "SUBSCRIBE", [("id", "0"), ("destination", "/queue/foo"), ("ack", "client")], b""),
    (b"UNSUBSCRIBE\nid:0\n\n\x00", "UNSUBSCRIBE", [("id", "0")], b""),
    (b"ACK\nid:12345\ntransaction:tx1\n\n\x00", "ACK", [("id", "12345"), ("transaction", "tx1")], b""),
    (b"NACK\nid:12345\ntransaction:tx1\n\n\x00", "NACK", [("id", "12345"), ("transaction", "tx1")], b""),
    (b"BEGIN\ntransaction:tx1\n\n\x00", "BEGIN", [("transaction", "tx1")], b""),
    (b"COMMIT\ntransaction:tx1\n\n\x00", "COMMIT", [("transaction", "tx1")], b""),
    (b"ABORT\ntransaction:tx1\n\n\x00", "ABORT", [("transaction", "tx1")], b""),
    (b"DISCONNECT\nreceipt:77\n\n\x00", "DISCONNECT", [("receipt", "77")], b""),
    (b"RECEIPT\nreceipt-id:77\n\n\x00", "RECEIPT", [("receipt-id", "77")], b""),
    (b"MESSAGE\nsubscription:0\nmessage-id:007\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\x00",
     "MESSAGE", [("subscription", "0"), ("message-id", "007"), ("destination", "/queue/a"),
                 ("content-type", "text/plain")], b"hello queue a"),
]

ERROR_BODY = (b"The message:\n-----\nMESSAGE\ndestined:/queue/a\nreceipt:message-12345\n\nHello queue a!\n"
              b"-----\nDid not contain a destination header, which is REQUIRED\nfor message propagation.\n")
SPEC_EXAMPLES.append(
    (b"ERROR\nreceipt-id:message-12345\ncontent-type:text/plain\ncontent-length:170\n"
     b"message:malformed frame received\n\n" + ERROR_BODY + b"\x00",
     "ERROR", [("receipt-id", "message-12345"), ("content-type", "text/plain"), ("content-length", "170"),
               ("message", "malformed frame received")], ERROR_BODY))


@pytest.mark.parametrize("data,command,headers,body", SPEC_EXAMPLES, ids=[e[1] for e in SPEC_EXAMPLES])
@pytest.mark.parametrize("version", [None, "1.0", "1.1", "1.2"])
def test_spec_example(data, command, headers, body, version):
    frame = one(data, version)
    assert (frame.command, list(frame.headers), frame.body) == (command, headers, body)


def test_spec_examples_as_one_stream_with_heart_beats_between():
    stream = b"\n".join(e[0] for e in SPEC_EXAMPLES) + b"\r\n\n"
    out = parse(stream)
    frames = [f for f in out if f is not HEARTBEAT]
    assert [f.command for f in frames] == [e[1] for e in SPEC_EXAMPLES]
    assert out[-1] is HEARTBEAT and out.count(HEARTBEAT) == len(SPEC_EXAMPLES)


def test_repeated_header_first_occurrence_wins():
    frame = one(b"MESSAGE\nfoo:World\nfoo:Hello\n\n\x00")
    assert frame.header("foo") == "World"
    assert frame.headers == (("foo", "World"), ("foo", "Hello"))


def test_repeated_content_length_first_wins():
    frame = one(b"SEND\ncontent-length:3\ncontent-length:1\n\na\x00c\x00")
    assert frame.body == b"a\x00c"


# --- EOLs and heart-beats ---------------------------------------------------------------------

def test_crlf_lines_are_accepted():
    frame = one(b"SEND\r\ndestination:/queue/a\r\nreceipt:r1\r\n\r\nbody\r\n\x00")
    assert frame.headers == (("destination", "/queue/a"), ("receipt", "r1"))
    assert frame.body == b"body\r\n"


def test_heart_beats_before_between_and_after_frames_are_reported_and_counted():
    p = FrameParser()
    assert p.feed(b"\n") == [HEARTBEAT]
    assert p.feed(b"\r\n\n") == [HEARTBEAT]
    assert p.heartbeats == 3
    out = p.feed(b"BEGIN\ntransaction:t\n\n\x00\n\nCOMMIT\ntransaction:t\n\n\x00")
    assert [type(x).__name__ for x in out] == ["Frame", "Heartbeat", "Frame"]
    assert p.heartbeats == 5


def test_a_cr_split_from_its_lf_waits_for_it():
    p = FrameParser()
    assert p.feed(b"\r") == []
    assert p.feed(b"\n") == [HEARTBEAT]
    assert p.buffered() == 0


def test_eols_after_the_nul_are_heart_beats_not_part_of_the_next_frame():
    out = parse(b"SEND\ndestination:a\n\nx\x00\n\n\nSEND\ndestination:b\n\ny\x00")
    frames = [f for f in out if f is not HEARTBEAT]
    assert [(f.header("destination"), f.body) for f in frames] == [("a", b"x"), ("b", b"y")]


# --- bodies -----------------------------------------------------------------------------------

def test_content_length_body_holds_nul_bytes():
    body = b"\x00a\x00\x00b\x00"
    frame = one(b"SEND\ndestination:/queue/a\ncontent-length:%d\n\n" % len(body) + body + b"\x00")
    assert frame.body == body


def test_without_content_length_the_body_ends_at_the_first_nul():
    out = parse(b"SEND\ndestination:/queue/a\n\nab\x00SEND\ndestination:/queue/b\n\ncd\x00", "1.2")
    assert [f.body for f in out] == [b"ab", b"cd"]


def test_zero_content_length():
    assert one(b"SEND\ndestination:q\ncontent-length:0\n\n\x00").body == b""


def test_body_longer_than_content_length_is_an_error():
    with pytest.raises(StompError, match="longer than its content-length"):
        parse(b"SEND\ndestination:/queue/a\ncontent-length:2\n\nabc\x00")


@pytest.mark.parametrize("value", ["-1", "abc", "1.5", " 3", "", "+3", "99999999999999999999999"])
def test_bad_content_length_is_an_error(value):
    with pytest.raises(StompError, match="content-length"):
        parse(b"SEND\ncontent-length:" + value.encode() + b"\n\nabc\x00")


# --- header escaping per version --------------------------------------------------------------

ESCAPED = b"SEND\ndestination:/queue/a\\cb\nna\\\\me\\c:line\\none\\rtwo\n\n\x00"


def test_12_unescapes_names_and_values():
    frame = one(ESCAPED, "1.2")
    assert frame.headers == (("destination", "/queue/a:b"), ("na\\me:", "line\none\rtwo"))


def test_11_has_no_cr_escape():
    with pytest.raises(StompError, match=r"undefined escape sequence \\r"):
        parse(ESCAPED, "1.1")
    frame = one(b"SEND\nk\\c:a\\nb\\\\c\\cd\n\n\x00", "1.1")
    assert frame.headers == (("k:", "a\nb\\c:d"),)


def test_10_does_not_unescape():
    frame = one(ESCAPED, "1.0")
    assert frame.headers == (("destination", "/queue/a\\cb"), ("na\\\\me\\c", "line\\none\\rtwo"))


@pytest.mark.parametrize("command", ["CONNECT", "STOMP", "CONNECTED"])
def test_connect_frames_are_never_unescaped(command):
    frame = one(command.encode() + b"\nlogin:a\\cb\npasscode:p\\t\n\n\x00", "1.2")
    assert frame.headers == (("login", "a\\cb"), ("passcode", "p\\t"))


@pytest.mark.parametrize("raw", [b"k:a\\tb", b"k:ab\\", b"k\\x:v", b"k:\\ "])
def test_undefined_escape_is_an_error(raw):
    with pytest.raises(StompError, match="undefined escape"):
        parse(b"SEND\n" + raw + b"\n\n\x00", "1.2")


def test_colon_in_value_and_whitespace_are_kept():
    frame = one(b"SEND\nselector: a = 'x:y' \n\n\x00", "1.0")
    assert frame.headers == (("selector", " a = 'x:y' "),)


def test_utf8_headers():
    frame = one("SEND\nnäme:välue€\n\n\x00".encode())
    assert frame.headers == (("näme", "välue€"),)


@pytest.mark.parametrize("line", [b"no colon", b":no name"])
def test_malformed_header_line_is_an_error(line):
    with pytest.raises(StompError, match="header line"):
        parse(b"SEND\n" + line + b"\n\n\x00")


def test_unknown_command_is_an_error():
    with pytest.raises(StompError, match="unknown command"):
        parse(b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(StompError, match="unknown command"):
        FrameParser().feed(b"MESSAGE\n\n\x00")  # a server frame from a client


def test_partial_frame_is_kept_across_feeds():
    p = FrameParser()
    assert p.feed(b"SEND\ndestination:/qu") == []
    assert p.feed(b"eue/a\ncontent-length:4\n\nab") == []
    assert p.feed(b"\x00d") == []
    [frame] = p.feed(b"\x00")
    assert frame.body == b"ab\x00d" and frame.header("destination") == "/queue/a"
    assert p.buffered() == 0


# --- frames pipelined behind CONNECT wait for the negotiated version -------------------------

def test_frames_behind_connect_are_held_until_the_version_is_set():
    p = FrameParser()
    out = p.feed(b"STOMP\naccept-version:1.2\n\n\x00SEND\ndestination:/queue/a\\cb\n\n\x00")
    assert [f.command for f in out] == ["STOMP"]
    assert p.feed(b"\n") == []  # still held: the adapter has not answered the CONNECT yet
    p.version = "1.2"
    out = p.feed(b"")
    assert [(f.command, f.header("destination")) for f in out if f is not HEARTBEAT] == [("SEND", "/queue/a:b")]
    assert p.heartbeats == 1


def test_a_held_parser_does_not_buffer_without_bound():
    p = FrameParser(Limits(max_frame_size=1000))
    p.feed(b"CONNECT\n\n\x00")
    p.feed(b"x" * 1000)
    with pytest.raises(StompError, match="before CONNECTED"):
        p.feed(b"x")
