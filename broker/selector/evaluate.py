"""Compile a checked `Node` tree into one predicate over a property lookup: SQL three-valued logic.

Compilation happens once per selector text; evaluating a message then costs a few closure calls
and no tree walk. Each condition closure returns True, False or None (UNKNOWN); each value closure
returns a value or None (NULL). A NULL operand makes a comparison, LIKE, IN, BETWEEN or an
arithmetic result UNKNOWN / NULL, and

    AND: F if any operand is F, else U if any is U, else T (left to right, stops at the first F)
    OR:  T if any operand is T, else U if any is U, else F (stops at the first T)
    NOT: T <-> F, U stays U

The most common shape, an identifier compared with a literal, gets a closure of its own with the
type test inlined (generated once at import from one template per operator).

An operation without a value (a string in arithmetic, `-TRUE`, ...) raises EvaluationError, which
ends the whole evaluation: the selector is FALSE for that message, as in Artemis; it is not a
FALSE that a surrounding NOT could turn into TRUE.
"""
from __future__ import annotations

import functools
from typing import Callable

from . import values
from .nodes import Node
from .parser import Parsed
from .values import EvaluationError

Lookup = Callable[[str], object]

_PY_OP = {"=": "==", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_TYPE_TEST = {
    "number": "(t is int or t is float)",
    "str": "t is str",
    "bool": "t is bool",
}
_LEAF_TEMPLATE = """
def make(name, literal):
    def compare_{kind}_{label}(lookup):
        v = lookup(name)
        if v is None:
            return None
        t = type(v)
        return {test} and v {py_op} literal
    return compare_{kind}_{label}
"""


def _leaf_makers():
    makers = {}
    labels = {"=": "eq", "<>": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
    for kind, test in _TYPE_TEST.items():
        for op, py_op in _PY_OP.items():
            namespace: dict = {}
            source = _LEAF_TEMPLATE.format(kind=kind, label=labels[op], test=test, py_op=py_op)
            exec(compile(source, f"<selector leaf {kind} {op}>", "exec"), namespace)
            makers[kind, op] = namespace["make"]
    return makers


_LEAF = _leaf_makers()


def _literal_kind(value) -> str | None:
    t = type(value)
    if t is int or t is float:
        return "number"
    if t is str:
        return "str"
    if t is bool:
        return "bool"
    return None


# ------------------------------------------------------------------------------------------------
# Values


def _value(node: Node, convert: bool):
    op = node.op
    if op == "lit":
        constant = node.args[0]
        return lambda lookup: constant
    if op == "id":
        name = node.args[0]
        return lambda lookup: lookup(name)
    if op == "arith":
        return _arithmetic(node, convert)
    if op == "neg":
        operand = _value(node.args[0], convert)

        def negate(lookup):
            v = operand(lookup)
            return None if v is None else values.negate(v, convert)

        return negate
    return _condition(node, convert)


def _arithmetic(node: Node, convert: bool):
    first_node, rest = node.args
    first = _value(first_node, convert)
    steps = tuple((values.ARITHMETIC[op], _value(operand, convert)) for op, operand in rest)
    if len(steps) == 1:
        ((apply, second),) = steps

        def binary(lookup):
            a = first(lookup)
            if a is None:
                return None
            b = second(lookup)
            if b is None:
                return None
            return apply(a, b, convert)

        return binary

    def chain(lookup):
        acc = first(lookup)
        if acc is None:
            return None
        for apply, operand in steps:
            b = operand(lookup)
            if b is None:
                return None
            acc = apply(acc, b, convert)
        return acc

    return chain


# ------------------------------------------------------------------------------------------------
# Conditions


def _condition(node: Node, convert: bool):
    op = node.op
    if op == "lit":
        constant = node.args[0]  # TRUE, FALSE or NULL: the parser allowed nothing else here
        return lambda lookup: constant
    if op == "id":
        name = node.args[0]

        def property_condition(lookup):
            v = lookup(name)
            if v is True or v is False or v is None:
                return v
            return False  # a non-boolean property where a condition is expected

        return property_condition
    if op in ("arith", "neg"):  # pragma: no cover - the parser rejects these as conditions
        raise AssertionError(f"not a condition: {node!r}")
    return _CONDITIONS[op](node, convert)


def _not(node: Node, convert: bool):
    operand = _condition(node.args[0], convert)

    def negation(lookup):
        v = operand(lookup)
        return None if v is None else not v

    return negation


# A flat AND / OR whose operands are all simple tests of one identifier (compared with a literal,
# IS [NOT] NULL, LIKE, IN) is generated as one function: the usual `a = 'x' AND b > 5` then costs
# one call plus the lookups. Only identifiers' positions and Python operators come from the
# selector into the source; names and literals are passed in as values.


def _fused_test(node: Node, i: int):
    """(source lines setting `r`, name, operand) for an eligible operand, or None."""
    op = node.op
    if op == "isnull":
        operand, negated = node.args
        if operand.op != "id":
            return None
        test = "is not None" if negated else "is None"
        return [f"r = lookup(n{i}) {test}"], operand.args[0], None
    if op == "cmp":
        cmp_op, left, right = node.args
        if left.op == "lit" and right.op == "id":
            left, right, cmp_op = right, left, values.MIRROR[cmp_op]
        if left.op != "id" or right.op != "lit":
            return None
        kind = _literal_kind(right.args[0])
        if kind is None:
            return None
        expr = f"{_TYPE_TEST[kind]} and v {_PY_OP[cmp_op]} k{i}"
        return _fused_value_lines(i, expr), left.args[0], right.args[0]
    if op == "like":
        operand, matcher, negated = node.args
        if operand.op != "id":
            return None
        expr = f"t is str and k{i}(v) is {not negated}"
        return _fused_value_lines(i, expr), operand.args[0], matcher
    if op == "in":
        operand, members, negated = node.args
        if operand.op != "id":
            return None
        expr = f"None if t is not str else (v in k{i}) is {not negated}"
        return _fused_value_lines(i, expr), operand.args[0], members
    return None


def _fused_value_lines(i: int, expr: str) -> list[str]:
    return [
        f"v = lookup(n{i})",
        "if v is None:",
        "    r = None",
        "else:",
        "    t = type(v)",
        f"    r = {expr}",
    ]


def _fused(node: Node, convert: bool):
    if convert or len(node.args[0]) > 64:
        return None
    tests = [_fused_test(item, i) for i, item in enumerate(node.args[0])]
    if any(t is None for t in tests):
        return None
    decided, rest = ("False", "True") if node.op == "and" else ("True", "False")
    body = ["unknown = False"]
    for lines, _, _ in tests:
        body += lines
        body += [f"if r is {decided}:", f"    return {decided}", "if r is None:", "    unknown = True"]
    body.append(f"return None if unknown else {rest}")
    count = len(tests)
    params = ", ".join([f"n{i}" for i in range(count)] + [f"k{i}" for i in range(count)])
    source = "\n".join(
        [f"def make({params}):", f"    def fused_{node.op}(lookup):"]
        + ["        " + line for line in body]
        + [f"    return fused_{node.op}"]
    )
    make = _compile_maker(source)
    return make(*[name for _, name, _ in tests], *[constant for _, _, constant in tests])


@functools.lru_cache(maxsize=1024)
def _compile_maker(source: str):
    namespace: dict = {}
    exec(compile(source, "<selector>", "exec"), namespace)
    return namespace["make"]


def _and(node: Node, convert: bool):
    fused = _fused(node, convert)
    if fused is not None:
        return fused
    items = tuple(_condition(n, convert) for n in node.args[0])
    if len(items) == 2:
        left, right = items

        def and2(lookup):
            a = left(lookup)
            if a is False:
                return False
            b = right(lookup)
            if b is False:
                return False
            return a and b  # both are True or None here

        return and2

    def and_n(lookup):
        unknown = False
        for item in items:
            v = item(lookup)
            if v is False:
                return False
            if v is None:
                unknown = True
        return None if unknown else True

    return and_n


def _or(node: Node, convert: bool):
    fused = _fused(node, convert)
    if fused is not None:
        return fused
    items = tuple(_condition(n, convert) for n in node.args[0])
    if len(items) == 2:
        left, right = items

        def or2(lookup):
            a = left(lookup)
            if a is True:
                return True
            b = right(lookup)
            if b is True:
                return True
            return None if a is None or b is None else False

        return or2

    def or_n(lookup):
        unknown = False
        for item in items:
            v = item(lookup)
            if v is True:
                return True
            if v is None:
                unknown = True
        return None if unknown else False

    return or_n


def _comparison(node: Node, convert: bool):
    op, left_node, right_node = node.args
    if not convert:
        leaf = _leaf(op, left_node, right_node)
        if leaf is not None:
            return leaf
    compare = values.COMPARE[op]
    if convert:
        compare = values.converting(compare)
    left = _value(left_node, convert)
    right = _value(right_node, convert)

    def comparison(lookup):
        a = left(lookup)
        if a is None:
            return None
        b = right(lookup)
        if b is None:
            return None
        return compare(a, b)

    return comparison


def _leaf(op: str, left: Node, right: Node):
    """identifier OP literal (or literal OP identifier): one closure, type test inlined."""
    if left.op == "lit" and right.op == "id":
        left, right, op = right, left, values.MIRROR[op]
    if left.op != "id" or right.op != "lit":
        return None
    kind = _literal_kind(right.args[0])
    if kind is None:
        return None
    return _LEAF[kind, op](left.args[0], right.args[0])


def _is_null(node: Node, convert: bool):
    operand_node, negated = node.args
    if operand_node.op == "id":
        name = operand_node.args[0]
        if negated:
            return lambda lookup: lookup(name) is not None
        return lambda lookup: lookup(name) is None
    operand = _value(operand_node, convert)
    if negated:
        return lambda lookup: operand(lookup) is not None
    return lambda lookup: operand(lookup) is None


def _like(node: Node, convert: bool):
    operand_node, matcher, negated = node.args
    operand = _value(operand_node, convert)

    def like(lookup):
        v = operand(lookup)
        if v is None:
            return None
        if type(v) is not str:
            return False  # for NOT LIKE too: an operation on an unlike type is FALSE
        return matcher(v) is not negated

    return like


def _between(node: Node, convert: bool):
    operand_node, low_node, high_node, negated = node.args
    operand = _value(operand_node, convert)
    low = _value(low_node, convert)
    high = _value(high_node, convert)
    lt, le, gt, ge = values.lt, values.le, values.gt, values.ge
    if convert:
        lt, le, gt, ge = (values.converting(f) for f in (lt, le, gt, ge))

    if not negated:
        def between(lookup):  # v >= low AND v <= high
            v = operand(lookup)
            if v is None:
                return None
            lo = low(lookup)
            a = None if lo is None else ge(v, lo)
            if a is False:
                return False
            hi = high(lookup)
            b = None if hi is None else le(v, hi)
            if b is False:
                return False
            return a and b

        return between

    def not_between(lookup):  # v < low OR v > high
        v = operand(lookup)
        if v is None:
            return None
        lo = low(lookup)
        a = None if lo is None else lt(v, lo)
        if a is True:
            return True
        hi = high(lookup)
        b = None if hi is None else gt(v, hi)
        if b is True:
            return True
        return None if a is None or b is None else False

    return not_between


def _in(node: Node, convert: bool):
    operand_node, members, negated = node.args
    operand = _value(operand_node, convert)

    def in_list(lookup):
        v = operand(lookup)
        if v is None or type(v) is not str:
            return None  # a non-string value is UNKNOWN for IN and NOT IN (Artemis and Classic)
        return (v in members) is not negated

    return in_list


_CONDITIONS = {
    "not": _not,
    "and": _and,
    "or": _or,
    "cmp": _comparison,
    "isnull": _is_null,
    "like": _like,
    "between": _between,
    "in": _in,
}


# ------------------------------------------------------------------------------------------------


def _identifiers(node: Node, found: set) -> set:
    if node.op == "id":
        found.add(node.args[0])
    for arg in node.args:
        if isinstance(arg, Node):
            _identifiers(arg, found)
        elif isinstance(arg, tuple):
            for item in arg:
                if isinstance(item, Node):
                    _identifiers(item, found)
                elif isinstance(item, tuple):  # (op, operand) steps of arithmetic
                    for sub in item:
                        if isinstance(sub, Node):
                            _identifiers(sub, found)
    return found


class Selector:
    """A compiled selector. Immutable and shared: compile_selector caches one per text."""

    __slots__ = ("text", "convert_string_expressions", "hyphenated_props", "identifiers", "_predicate")

    def __init__(self, text: str, parsed: Parsed):
        self.text = text
        self.convert_string_expressions = parsed.convert_string_expressions
        self.hyphenated_props = parsed.hyphenated_props
        # Which names the selector reads: lets a caller skip decoding what no filter asks for.
        self.identifiers = frozenset(_identifiers(parsed.root, set()))
        self._predicate = _condition(parsed.root, parsed.convert_string_expressions)

    def evaluate(self, lookup: Lookup) -> bool | None:
        """True, False or None (UNKNOWN). An evaluation error makes the whole selector False."""
        try:
            return self._predicate(lookup)
        except (EvaluationError, ArithmeticError):
            return False

    def matches(self, lookup: Lookup) -> bool:
        """True only when the selector is TRUE for this message; never raises."""
        try:
            return self._predicate(lookup) is True
        except Exception:
            return False

    def __repr__(self) -> str:
        return f"Selector({self.text!r})"
