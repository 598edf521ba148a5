"""What selector operators do to values: the type rules, in one place.

A value is what a lookup returns. Only these exact types take part: str, int, float, bool, bytes,
and None (NULL). Anything else, subclasses of str and int included (the codec uses them for AMQP
symbols, chars and timestamps) and uuid.UUID, is *opaque*: it is not NULL, but it never equals,
orders or computes with anything. Callers make sure neither operand is None before calling the
comparison and arithmetic functions here: NULL handling (UNKNOWN) belongs to the compiler.

Widths are not known (an AMQP short and long both arrive as int), so numbers follow the JMS
promotion rule without Artemis's width quirks: integers compare and compute exactly, at any size;
as soon as a float takes part the operation is done in IEEE double, like Java.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal

NUMBERS = frozenset({int, float})
_EQUALITY_TYPES = frozenset({str, int, float, bool, bytes})


class EvaluationError(Exception):
    """An operation that has no value (string in arithmetic, ...): the message does not match."""


# --------------------------------------------------------------------------------------------
# Comparison. Operands of unlike types compare FALSE, for `<>` as for `=` (JMS: "if the
# comparison of non-like type values is attempted, the value of the operation is false").


def eq(a, b) -> bool:
    ta = type(a)
    tb = type(b)
    if ta is tb:
        return ta in _EQUALITY_TYPES and a == b
    return ta in NUMBERS and tb in NUMBERS and a == b


def ne(a, b) -> bool:
    ta = type(a)
    tb = type(b)
    if ta is tb:
        return ta in _EQUALITY_TYPES and a != b
    return ta in NUMBERS and tb in NUMBERS and a != b


def _orderable(a, b) -> bool:
    ta = type(a)
    tb = type(b)
    return (ta in NUMBERS and tb in NUMBERS) or (ta is str and tb is str)


def lt(a, b) -> bool:
    return _orderable(a, b) and a < b


def le(a, b) -> bool:
    return _orderable(a, b) and a <= b


def gt(a, b) -> bool:
    return _orderable(a, b) and a > b


def ge(a, b) -> bool:
    return _orderable(a, b) and a >= b


COMPARE = {"=": eq, "<>": ne, "<": lt, "<=": le, ">": gt, ">=": ge}
MIRROR = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


# --------------------------------------------------------------------------------------------
# convert_string_expressions: a string meets a number or a boolean: convert the string first.

_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+\Z")
_DECIMAL_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_NOT_CONVERTIBLE = object()


def string_to_number(text: str):
    """Integer if the text is an integer, float if it is a decimal number, else _NOT_CONVERTIBLE."""
    try:
        if _INTEGER_TEXT.match(text):
            return int(text)
        if _DECIMAL_TEXT.match(text):
            return float(text)
    except ValueError:  # more digits than int() accepts
        pass
    return _NOT_CONVERTIBLE


def _string_to_boolean(text: str):
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    return _NOT_CONVERTIBLE


def _convert_pair(a, b, booleans: bool):
    ta = type(a)
    tb = type(b)
    if ta is str and tb is not str:
        if tb in NUMBERS:
            a = string_to_number(a)
        elif tb is bool and booleans:
            a = _string_to_boolean(a)
    elif tb is str and ta is not str:
        if ta in NUMBERS:
            b = string_to_number(b)
        elif ta is bool and booleans:
            b = _string_to_boolean(b)
    return a, b


def converting(compare):
    """`compare` with convert_string_expressions on: strings convert to the other side's type."""
    booleans = compare is eq or compare is ne

    def converted(a, b) -> bool:
        a, b = _convert_pair(a, b, booleans)
        if a is _NOT_CONVERTIBLE or b is _NOT_CONVERTIBLE:
            return False
        return compare(a, b)

    return converted


# --------------------------------------------------------------------------------------------
# Arithmetic: int op int is an exact int; a float anywhere makes it a double; `/` and `%` are
# always double (7 / 2 = 3.5). Division by zero gives an infinity or NaN, as Java's doubles do.


def to_double(n) -> float:
    if type(n) is float:
        return n
    try:
        return float(n)
    except OverflowError:  # an int beyond the double range: infinity, as BigDecimal.doubleValue
        return math.inf if n > 0 else -math.inf


def number(value, convert: bool):
    t = type(value)
    if t is int or t is float:
        return value
    if convert and t is str:
        converted = string_to_number(value)
        if converted is not _NOT_CONVERTIBLE:
            return converted
    raise EvaluationError(f"not a number: {value!r}")


def _java_double_text(d: float) -> str:
    """Double.toString: what Java prints when a double is appended to a string."""
    if d != d:
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0.0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    magnitude = abs(d)
    if 1e-3 <= magnitude < 1e7:
        text = repr(d)
        return text if "." in text else text + ".0"
    sign, raw_digits, exponent = Decimal(repr(d)).as_tuple()
    scientific = len(raw_digits) + exponent - 1
    digits = "".join(map(str, raw_digits)).rstrip("0") or "0"
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return ("-" if sign else "") + f"{mantissa}E{scientific}"


def text_of(value) -> str:
    """The text a value contributes to string concatenation (`name + 1`)."""
    t = type(value)
    if t is str:
        return value
    if t is bool:
        return "true" if value else "false"
    if t is int:
        try:
            return str(value)
        except ValueError:  # beyond Python's int-to-text digit limit
            raise EvaluationError("number too long to concatenate") from None
    if t is float:
        return _java_double_text(value)
    raise EvaluationError(f"cannot concatenate {t.__name__}")


def add(a, b, convert: bool):
    if type(a) is str:
        return a + text_of(b)
    a = number(a, convert)
    b = number(b, convert)
    if type(a) is int and type(b) is int:
        return a + b
    return to_double(a) + to_double(b)


def subtract(a, b, convert: bool):
    a = number(a, convert)
    b = number(b, convert)
    if type(a) is int and type(b) is int:
        return a - b
    return to_double(a) - to_double(b)


def multiply(a, b, convert: bool):
    a = number(a, convert)
    b = number(b, convert)
    if type(a) is int and type(b) is int:
        return a * b
    x = to_double(a)
    y = to_double(b)
    return x * y


def divide(a, b, convert: bool) -> float:
    x = to_double(number(a, convert))
    y = to_double(number(b, convert))
    if y == 0.0:
        if x == 0.0 or x != x:
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    try:
        return x / y
    except OverflowError:
        return math.copysign(math.inf, x) * math.copysign(1.0, y)


def remainder(a, b, convert: bool) -> float:
    """Java's double `%`: the sign follows the dividend (-7 % 2 = -1), x % 0 is NaN."""
    x = to_double(number(a, convert))
    y = to_double(number(b, convert))
    if y == 0.0 or math.isinf(x) or x != x or y != y:
        return math.nan
    return math.fmod(x, y)


def negate(a, convert: bool):
    return -number(a, convert)


ARITHMETIC = {"+": add, "-": subtract, "*": multiply, "/": divide, "%": remainder}
