"""One test per row of the quirk decision table in docs/selectors.md, named after the row.

Each test shows what Artemis / Classic do and asserts what Hermod does instead (or too).
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hermod.broker.core.selectable import counted_lookup, message_lookup
from hermod.broker.selector import SelectorError, compile_selector

T, F, U = True, False, None
DOCS = Path(__file__).resolve().parents[2] / "docs" / "selectors.md"


class Symbol(str):
    pass


@dataclass
class Message:
    durable: bool = False
    priority: int = 4
    message_id: object = None
    correlation_id: object = None
    user_id: bytes | None = None
    subject: str | None = None
    creation_time: int | None = None
    group_id: str | None = None
    group_sequence: int | None = None
    expiration: int = 0
    address: str = "orders"
    size: int = 100
    annotations: dict = field(default_factory=dict)
    application_properties: dict = field(default_factory=dict)
    container_id: str | None = None


def ev(selector: str, **props):
    return compile_selector(selector).evaluate(props.get)


def rejects(selector: str) -> bool:
    try:
        compile_selector(selector)
    except SelectorError:
        return True
    return False


def test_every_row_has_a_test():
    rows = re.findall(r"^\| `([a-z_]+)` \|", DOCS.read_text(encoding="utf-8"), re.MULTILINE)
    assert len(rows) > 30
    missing = [row for row in rows if f"test_{row}" not in globals()]
    assert missing == []


def test_not_precedence():
    # Artemis: (NOT x) = 1, never true for a number. Hermod: NOT (x = 1).
    assert ev("NOT x = 1", x=1) is F
    assert ev("NOT x = 2", x=1) is T
    assert ev("NOT x = 1 AND y = 2", x=2, y=2) is T  # still tighter than AND
    assert ev("NOT flag = TRUE", flag=False) is T  # a boolean reads the same both ways


def test_not_before_relational():
    assert ev("NOT x > 1", x=1) is T
    assert ev("NOT x > 1", x=2) is F
    assert ev("NOT x BETWEEN 1 AND 2", x=5) is T
    assert ev("NOT x <= 1", x=5) is T


def test_not_as_operand():
    assert ev("flag = NOT other", flag=True, other=False) is T
    assert ev("flag = NOT other", flag=True, other=True) is F
    assert ev("flag <> NOT other", flag=True, other=True) is T
    assert ev("- NOT x = 1", x=True) is F  # -(FALSE) is an evaluation error: no match
    assert rejects("x = NOT 5")  # as Artemis: NOT needs a condition


def test_not_like_reading():
    assert ev("NOT name LIKE 'B%'", name="James") is T  # Artemis: FALSE for every string
    assert ev("NOT name LIKE 'J%'", name="James") is F
    assert ev("NOT x IS NULL", x=1) is T  # Artemis: (NOT x) IS NULL, the same as x IS NULL
    assert ev("NOT x IS NULL") is F
    assert ev("NOT name IN ('Bob')", name="James") is T


def test_null_in_equality():
    # Artemis: FALSE, TRUE, TRUE. Hermod (JMS): UNKNOWN whichever side the NULL is on.
    assert ev("1 = missing") is U
    assert ev("missing = 1") is U
    assert ev("1 <> missing") is U
    assert ev("missing <> 1") is U
    assert ev("missing1 = missing2") is U
    assert ev("NOT (1 = missing)") is U
    assert compile_selector("1 <> missing").matches({}.get) is False


def test_integer_widths():
    # s is an AMQP short; Artemis: `5 = s` FALSE, `s = 5` TRUE. Hermod: TRUE both ways.
    assert ev("5 = s", s=5) is T
    assert ev("s = 5", s=5) is T
    assert ev("5 <> s", s=5) is F
    assert ev("5 = b", b=5) is T  # a byte likewise


def test_unlike_types_not_equal():
    # Artemis: `<>` is NOT (=), so TRUE for unlike types. JMS and Hermod: FALSE.
    assert ev("x <> '1'", x=1) is F
    assert ev("x = '1'", x=1) is F
    assert ev("NOT (x = '1')", x=1) is T
    assert ev("name <> 5", name="James") is F
    assert ev("flag <> 1", flag=True) is F


def test_not_like_non_string():
    assert ev("x NOT LIKE '1'", x=1) is F  # Artemis: TRUE
    assert ev("x LIKE '1'", x=1) is F
    assert ev("NOT (x LIKE '1')", x=1) is T


def test_in_non_string():
    assert ev("x IN ('1')", x=1) is U
    assert ev("x NOT IN ('1')", x=1) is U
    assert ev("flag IN ('true')", flag=True) is U


def test_not_between_unlike():
    assert ev("name NOT BETWEEN 1 AND 2", name="James") is F
    assert ev("name BETWEEN 1 AND 2", name="James") is F


def test_big_integers():
    ulong_max = 2**64 - 1
    assert ev("big = 18446744073709551615", big=ulong_max) is T
    assert ev("big = 0xFFFFFFFFFFFFFFFF", big=ulong_max) is T
    assert ev("big > 9223372036854775807", big=2**63) is T
    assert ev("123456789012345678901234567890 = 123456789012345678901234567890") is T
    assert ev("x < 123456789012345678901234567890", x=1) is T


def test_integer_overflow():
    assert ev("2147483647 + 1 = 2147483648") is T  # Artemis: wraps to -2147483648
    assert ev("x + 1 > x", x=2**63 - 1) is T  # Artemis: long wraps
    assert ev("x * x = 85070591730234615847396907784232501249", x=2**63 - 1) is T
    assert ev("1e308 * 10 > 1e308") is T  # a double overflows to infinity, as in Java
    assert ev("x * 1.0 > 1e308", x=10**400) is T  # an int too large for a double is infinity


def test_division_is_double():
    assert ev("7 / 2 = 3.5") is T
    assert ev("7 % 2 = 1") is T
    assert ev("-7 % 2 = -1") is T  # Java: the sign of the dividend
    assert ev("7 % -2 = 1") is T
    assert ev("x / 0 > 1000000", x=1) is T
    assert ev("-1 / 0 < -1000000") is T
    assert ev("4 / 2 = 2") is T


def test_nan_not_equal():
    assert ev("0 / 0 = 0 / 0") is F  # Artemis: TRUE
    assert ev("0 / 0 <> 0 / 0") is T
    assert ev("x % 0 > 0", x=1) is F


def test_exact_int_float():
    assert ev("9007199254740993 = 9007199254740992.0") is F  # Java widens the long: TRUE
    assert ev("9007199254740992 = 9007199254740992.0") is T
    assert ev("x = 1.0", x=1) is T


def test_unary_minus_widths():
    assert ev("-s = -5", s=5) is T  # Artemis: error for a short or byte property
    assert ev("-x < 0", x=3) is T


def test_unary_plus():
    assert ev("+name = 'James'", name="James") is T
    assert ev("+x = 1", x=1) is T
    assert rejects("+'a' > 1")  # unary plus changes nothing, so this is still a string literal


def test_evaluation_errors():
    assert ev("1 + name = 1", name="James") is F
    assert ev("NOT (1 + name = 1)", name="James") is F  # not turned into TRUE
    assert ev("x = 1 OR 1 + name = 1", x=1, name="James") is T  # OR stops at the first TRUE
    assert ev("x = 2 AND 1 + name = 1", x=1, name="James") is F  # AND stops at the first FALSE
    assert ev("1 + name = 1 OR x = 1", x=1, name="James") is F
    assert compile_selector("NOT (1 + name = 1)").matches({"name": "J"}.get) is False


def test_string_ordering():
    assert ev("a < b", a="Alice", b="Bob") is T
    assert ev("a > b", a="Alice", b="Bob") is F
    assert ev("a < b", a="Z", b="a") is T  # by code point: upper case first
    assert ev("a BETWEEN b AND c", a="m", b="a", c="z") is T
    assert rejects("name > 'A'")


def test_boolean_ordering():
    assert ev("flag > off", flag=True, off=False) is F  # Artemis: TRUE
    assert ev("flag = flag2", flag=True, flag2=True) is T


def test_opaque_values():
    values = {"sym": Symbol("abc"), "uid": uuid.UUID(int=7), "ts": type("Ts", (int,), {})(5)}
    for name in values:
        lookup = values.get
        assert compile_selector(f"{name} IS NULL").evaluate(lookup) is F
        assert compile_selector(f"{name} IS NOT NULL").evaluate(lookup) is T
        assert compile_selector(f"{name} = 'abc'").evaluate(lookup) is F
        assert compile_selector(f"{name} = 5").evaluate(lookup) is F
        assert compile_selector(f"{name} <> 5").evaluate(lookup) is F
        assert compile_selector(f"{name} > 0").evaluate(lookup) is F
        assert compile_selector(f"{name} LIKE '%'").evaluate(lookup) is F
        assert compile_selector(f"{name} + 1 = 6").evaluate(lookup) is F
        assert compile_selector(f"{name}").evaluate(lookup) is F


def test_binary_values():
    assert ev("a = b", a=b"\x01", b=b"\x01") is T  # Artemis: FALSE (array identity)
    assert ev("a = b", a=b"\x01", b=b"\x02") is F
    assert ev("a = 'abc'", a=b"abc") is F
    assert ev("a > b", a=b"\x02", b=b"\x01") is F
    assert ev("a IS NOT NULL", a=b"") is T


@pytest.mark.parametrize("selector", [
    "JMSPriority > 6",
    "JMSMessageID = 'ID:order-1'",
    "JMSTimestamp = 1700000000000",
    "JMSExpiration = 1700000060000",
    "JMSDeliveryMode = 'PERSISTENT'",
    "AMQDurable = 'DURABLE'",
    "AMQPriority = 7",
])
def test_jms_headers_everywhere(selector):
    # Artemis maps these only on consumer filters; on a subscription queue they never match.
    # Hermod has one lookup for every filter, so the same selector works as a queue filter.
    msg = Message(durable=True, priority=7, message_id="order-1", creation_time=1_700_000_000_000,
                  expiration=1_700_000_060_000)
    queue_filter = compile_selector(selector)
    assert queue_filter.matches(message_lookup(msg))
    # No literal rewriting: 'PERSISTENT' is not 'DURABLE', in either direction.
    assert ev("AMQDurable = 'PERSISTENT'", AMQDurable="DURABLE") is F
    assert compile_selector("JMSDeliveryMode = 'DURABLE'").evaluate(message_lookup(msg)) is F


def test_delivery_count():
    """The count is the ref's (deliveries before this one), given to a consumer's lookup."""
    first = counted_lookup(Message(), 0)
    again = counted_lookup(Message(), 2)
    assert compile_selector("JMSXDeliveryCount = 1").matches(first)
    assert compile_selector("JMSXDeliveryCount = 3").matches(again)
    assert compile_selector("JMSRedelivered = FALSE").matches(first)
    assert compile_selector("JMSRedelivered").matches(again)


def test_reserved_jms_names():
    msg = Message(application_properties={"JMSDestination": "x", "JMSReplyTo": "y"})
    assert compile_selector("JMSDestination IS NULL AND JMSReplyTo IS NULL").matches(message_lookup(msg))


def test_quoted_identifiers():
    assert ev('"m.x-opt-foo" = \'a\'', **{"m.x-opt-foo": "a"}) is T
    assert ev('"say ""hi""" = 1', **{'say "hi"': 1}) is T
    assert ev('"" IS NULL') is T


def test_unicode_identifiers():
    assert ev("größe = 1", **{"größe": 1}) is T
    assert ev("名前 = 'x'", **{"名前": "x"}) is T
    assert ev("$_x1 = 1", **{"$_x1": 1}) is T


def test_xpath():
    for selector in ("XPATH '//order'", "XQUERY '/a'", "xpath '//a' AND x = 1"):
        with pytest.raises(SelectorError, match="not supported"):
            compile_selector(selector)


def test_classic_functions():
    for selector in ("INLIST(MAKELIST('a'), x)", "REGEX('a.*', name)", "REPLACE(a, 'x', 'y') = 'z'",
                     "SPLIT(a, ',') IS NULL"):
        assert rejects(selector)


def test_hyphenated_props():
    assert ev("hyphenated_props: my-prop = 1", **{"my-prop": 1}) is T
    assert ev("hyphenated_props: \"m.x-y\" = 1", **{"m.x-y": 1}) is T  # quotes stay available
    assert ev("hyphenated_props: a - 1 = 0", a=1) is T  # spaces keep it a subtraction
    assert ev("a-1 = 0", a=1) is T  # without the prefix `-` is always an operator


def test_option_prefixes():
    assert ev("no_convert_string_expressions: a = 1", a="1") is F
    assert ev("convert_string_expressions:no_convert_string_expressions: a = 1", a="1") is F
    assert ev("no_convert_string_expressions:convert_string_expressions: a = 1", a="1") is T
    assert ev("hyphenated_props:no_hyphenated_props: a-b = 0", a=1, b=1) is T
    sel = compile_selector("convert_string_expressions:hyphenated_props: a = 1")
    assert sel.convert_string_expressions and sel.hyphenated_props
    assert rejects("a = 1 convert_string_expressions:")


def test_convert_string_expressions():
    c = "convert_string_expressions: "
    assert ev(c + "a > 5", a="10") is T
    assert ev(c + "a = 1", a="1.0") is T  # Artemis parses to the other side's type: FALSE
    assert ev(c + "a = 1", a="one") is F
    assert ev(c + "a = TRUE", a="True") is T
    assert ev(c + "a = FALSE", a="yes") is F  # Artemis: Boolean.valueOf("yes") is false: TRUE
    assert ev(c + "a * 2 = 20", a="10") is T
    assert ev(c + "a + 1 = '101'", a="10") is T  # a string on the left of + concatenates
    assert ev("a > 5", a="10") is F  # without the prefix


def test_line_comment_at_end():
    assert ev("x = 1 -- note", x=1) is T
    assert ev("x = 1 --", x=1) is T


def test_integer_suffix():
    assert ev("0x1FL = 31") is T
    assert ev("017L = 15") is T
    assert ev("10l = 10") is T


def test_literal_operands():
    assert ev("'a' IN ('a')") is T
    assert ev("TRUE = 1") is F
    assert ev("'1' = 1") is F


def test_chained_comparisons():
    assert ev("x = 1 = TRUE", x=1) is T
    assert ev("x > 0 = TRUE", x=1) is T
    assert ev("x = 1 = FALSE", x=1) is F
    assert ev("x = 1 = y = 2", x=1, y=2) is F  # ((x = 1) = y) = 2: a boolean is not 2


def test_like_escape():
    assert ev("a LIKE '100!%' ESCAPE '!'", a="100%") is T
    assert ev("a LIKE '100!%' ESCAPE '!'", a="1000") is F
    assert ev("a LIKE 'a!_b' ESCAPE '!'", a="axb") is F
    assert ev("a LIKE 'a!!' ESCAPE '!'", a="a!") is T
    assert ev("a LIKE 'a!b' ESCAPE '!'", a="a!b") is T  # before another character: ordinary
    assert ev("a LIKE 'a!' ESCAPE '!'", a="a!") is T  # at the end: ordinary
    assert ev("a LIKE 'a%b'", a="a\nb") is T
    assert ev("a LIKE 'a_b'", a="a\nb") is T


def test_nesting_limit():
    assert ev("NOT " * 98 + "x", x=True) is T
    with pytest.raises(SelectorError, match="nested too deeply"):
        compile_selector("NOT " * 101 + "x")
    # Long flat chains are not nesting.
    assert ev(" AND ".join(["x = 1"] * 300), x=1) is T
