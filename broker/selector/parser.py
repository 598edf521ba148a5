"""Selector text to a checked `Node` tree, or a `SelectorError` with position and expected tokens.

The lark grammar (grammar.lark) is parsed LALR(1) with a basic lexer; a transformer runs at each
reduction, so the tree is built bottom-up without recursion however long the selector is. The
transformer also applies the checks Artemis makes while parsing (a selector Artemis rejects at
parse time is rejected here too, and one it accepts is accepted):

- the whole selector, and each operand of AND, OR and NOT, must be a condition: a comparison,
  a logical expression, TRUE/FALSE/NULL or a bare identifier (a boolean property);
- NULL is not an operand of `=`, `<>` (write IS NULL) nor of `<`, `>`, `<=`, `>=`, BETWEEN;
- a string or boolean literal, or a condition, is not an operand of `<`, `>`, `<=`, `>=`, BETWEEN;
- the ESCAPE of LIKE is exactly one character; XPATH / XQUERY are refused (Hermod has no XML).

Option prefixes come first: `convert_string_expressions:`, `hyphenated_props:` (identifiers may
contain `-`; a grammar variant with that identifier terminal) and their `no_` forms.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from .errors import SelectorError
from .like import LikeMatcher
from .nodes import Node

# Deeper selectors are refused: the compiler and the compiled predicate recurse once per level.
MAX_DEPTH = 100

_HYPHENATED_IDENTIFIER = r"%override IDENTIFIER: /(?:[^\W\d]|\$)[\w$-]*/i"


@dataclass(frozen=True, slots=True)
class Parsed:
    root: Node
    convert_string_expressions: bool
    hyphenated_props: bool


class _Rejected(Exception):
    """Raised by the transformer; turned into a SelectorError by `parse`."""

    def __init__(self, position: int, message: str):
        super().__init__(message)
        self.position = position
        self.message = message


def _describe(node: Node) -> str:
    if node.op == "lit":
        value = node.args[0]
        if value is None:
            return "NULL"
        if type(value) is bool:
            return "TRUE" if value else "FALSE"
        if type(value) is str:
            return "string literal " + _quote(value)
        return "literal " + repr(value)
    if node.op == "id":
        return "identifier " + node.args[0]
    if node.op in ("arith", "neg"):
        return "arithmetic expression"
    return "condition"


def _quote(text: str, limit: int = 20) -> str:
    """Selector text inside a one-line message: shortened, control characters escaped."""
    if len(text) > limit:
        text = text[:limit] + "..."
    return "'" + "".join(c if c.isprintable() else repr(c)[1:-1] for c in text) + "'"


def _require_condition(node: Node, where: str) -> Node:
    if not node.is_boolean():
        raise _Rejected(node.pos, f"{_describe(node)} is not a condition ({where})")
    return node


def _require_equality_operand(node: Node, op: str) -> None:
    if node.op == "lit" and node.args[0] is None:
        raise _Rejected(node.pos, f"NULL cannot be compared with '{op}' (use IS NULL / IS NOT NULL)")


def _require_ordered_operand(node: Node, op: str) -> None:
    if node.op == "lit":
        value = node.args[0]
        if type(value) is int or type(value) is float:
            return
        raise _Rejected(node.pos, f"{_describe(node)} cannot be compared with {op} (numbers only)")
    if node.is_boolean() and node.op != "id":
        raise _Rejected(node.pos, f"a condition cannot be compared with {op}")


def _parse_number(token: Token) -> int | float:
    text = str(token).lower()
    if text.startswith("0x"):
        return int(text[2:].rstrip("l"), 16)
    if "." in text or "e" in text:
        return float(text)
    digits = text.rstrip("l")
    if len(digits) > 1 and digits[0] == "0":
        if "8" in digits or "9" in digits:
            raise _Rejected(token.start_pos, f"invalid octal literal {_quote(str(token))}")
        return int(digits, 8)
    try:
        return int(digits)
    except ValueError:  # beyond Python's digit limit for decimal text
        raise _Rejected(token.start_pos, "integer literal too long") from None


def _unquote(token: Token, quote: str) -> str:
    return str(token)[1:-1].replace(quote + quote, quote)


class _Build(Transformer):
    """Grammar rule callbacks: lark children in, `Node`s out."""

    # -- top level and logic ----------------------------------------------------------------

    def start(self, children):
        options = [str(c) for c in children[:-1]]
        convert = hyphenated = False
        for option in options:
            negated = option.startswith("no_")
            if "convert_string_expressions" in option:
                convert = not negated
            else:
                hyphenated = not negated
        root = _require_condition(children[-1], "a selector must be a condition")
        return Parsed(root, convert, hyphenated)

    def _logic(self, op, children):
        items = tuple(_require_condition(c, f"operand of {op.upper()}") for c in children[::2])
        return _checked(Node(op, items[0].pos, (items,), items))

    def or_expr(self, children):
        return self._logic("or", children)

    def and_expr(self, children):
        return self._logic("and", children)

    def logical_not(self, children):
        not_token, operand = children
        _require_condition(operand, "operand of NOT")
        return _checked(Node("not", not_token.start_pos, (operand,), (operand,)))

    operand_not = logical_not

    # -- comparisons -------------------------------------------------------------------------

    def compare(self, children):
        left, op_token, right = children
        return _comparison(left, str(op_token), right)

    def is_null(self, children):
        operand = children[0]
        negated = any(isinstance(c, Token) and c.type == "NOT" for c in children)
        return _checked(Node("isnull", operand.pos, (operand, negated), (operand,)))

    def apply_predicate(self, children):
        left, predicate = children
        return predicate(left)

    def relational(self, children):
        op_token, right = children
        return lambda left: _comparison(left, str(op_token), right)

    def like(self, children):
        negated = children[0].type == "NOT"
        strings = [c for c in children if c.type == "STRING"]
        pattern = _unquote(strings[0], "'")
        escape = None
        if len(strings) == 2:
            escape = _unquote(strings[1], "'")
            if len(escape) != 1:
                raise _Rejected(strings[1].start_pos, "the ESCAPE of LIKE must be exactly one character")
        matcher = LikeMatcher(pattern, escape)
        return lambda left: _checked(Node("like", left.pos, (left, matcher, negated), (left,)))

    def between(self, children):
        negated = isinstance(children[0], Token) and children[0].type == "NOT"
        low, high = [c for c in children if isinstance(c, Node)]

        def build(left):
            for operand in (left, low, high):
                _require_ordered_operand(operand, "BETWEEN")
            return _checked(Node("between", left.pos, (left, low, high, negated), (left, low, high)))

        return build

    def in_list(self, children):
        negated = children[0].type == "NOT"
        values = frozenset(_unquote(c, "'") for c in children if c.type == "STRING")
        return lambda left: _checked(Node("in", left.pos, (left, values, negated), (left,)))

    # -- arithmetic ----------------------------------------------------------------------------

    def arithmetic(self, children):
        if len(children) == 1:
            return children[0]
        first = children[0]
        rest = tuple((str(children[i]), children[i + 1]) for i in range(1, len(children), 2))
        return _checked(Node("arith", first.pos, (first, rest), (first,) + tuple(n for _, n in rest)))

    def sign(self, children):
        sign_token, operand = children
        if sign_token.type == "PLUS":
            return operand  # unary plus changes nothing, as in Artemis
        if operand.op == "lit" and type(operand.args[0]) in (int, float):
            return Node("lit", sign_token.start_pos, (-operand.args[0],))
        return _checked(Node("neg", sign_token.start_pos, (operand,), (operand,)))

    # -- primaries -----------------------------------------------------------------------------

    def string(self, children):
        (token,) = children
        return Node("lit", token.start_pos, (_unquote(token, "'"),))

    def number(self, children):
        (token,) = children
        return Node("lit", token.start_pos, (_parse_number(token),))

    def true(self, children):
        return Node("lit", children[0].start_pos, (True,))

    def false(self, children):
        return Node("lit", children[0].start_pos, (False,))

    def null(self, children):
        return Node("lit", children[0].start_pos, (None,))

    def identifier(self, children):
        (token,) = children
        return Node("id", token.start_pos, (str(token),))

    def quoted_identifier(self, children):
        (token,) = children
        return Node("id", token.start_pos, (_unquote(token, '"'),))

    def xml_query(self, children):
        keyword = children[0]
        raise _Rejected(
            keyword.start_pos, f"{keyword.type} selectors are not supported (Hermod does not read XML bodies)"
        )


def _comparison(left: Node, op: str, right: Node) -> Node:
    if op in ("=", "<>"):
        _require_equality_operand(left, op)
        _require_equality_operand(right, op)
    else:
        _require_ordered_operand(left, f"'{op}'")
        _require_ordered_operand(right, f"'{op}'")
    return _checked(Node("cmp", left.pos, (op, left, right), (left, right)))


def _checked(node: Node) -> Node:
    if node.depth > MAX_DEPTH:
        raise _Rejected(node.pos, f"selector nested too deeply (more than {MAX_DEPTH} levels)")
    return node


# ------------------------------------------------------------------------------------------------
# Parsers, built once per variant.

@functools.cache
def _grammar_text() -> str:
    return resources.files(__package__).joinpath("grammar.lark").read_text(encoding="utf-8")


@functools.cache
def _lark(hyphenated: bool) -> Lark:
    text = _grammar_text()
    if hyphenated:
        text += "\n" + _HYPHENATED_IDENTIFIER + "\n"
    return Lark(text, parser="lalr", lexer="basic", transformer=_Build(), maybe_placeholders=False)


def _hyphenated(text: str) -> bool:
    """Whether the leading option prefixes switch on hyphenated identifiers (last one wins)."""
    hyphenated = False
    try:
        for token in _lark(False).lex(text):
            if token.type != "OPTION":
                break
            if "hyphenated_props" in token:
                hyphenated = not token.startswith("no_")
    except UnexpectedInput:
        pass  # the parse reports it
    return hyphenated


# Display names for lark's terminal names, in the order error messages list them.
_DISPLAY = {
    "IDENTIFIER": "IDENTIFIER",
    "QUOTED_IDENTIFIER": "QUOTED_IDENTIFIER",
    "STRING": "STRING",
    "NUMBER": "NUMBER",
    "TRUE": "TRUE",
    "FALSE": "FALSE",
    "NULL": "NULL",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "NOT": "NOT",
    "AND": "AND",
    "OR": "OR",
    "EQ": "'='",
    "NE": "'<>'",
    "GT": "'>'",
    "GE": "'>='",
    "LT": "'<'",
    "LE": "'<='",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "STAR": "'*'",
    "SLASH": "'/'",
    "PERCENT": "'%'",
    "IS": "IS",
    "LIKE": "LIKE",
    "BETWEEN": "BETWEEN",
    "IN": "IN",
    "ESCAPE": "ESCAPE",
    "$END": "end of selector",
}
_RANK = {name: i for i, name in enumerate(_DISPLAY)}


def _expected_names(terminals) -> list[str]:
    known = sorted((t for t in terminals if t in _DISPLAY), key=_RANK.__getitem__)
    return [_DISPLAY[t] for t in known]


def _syntax_error(text: str, position: int, terminals, near: str | None) -> SelectorError:
    expected = _expected_names(terminals)
    if not expected:
        message = "unexpected input"
    elif len(expected) == 1:
        message = f"expected {expected[0]}"
    else:
        message = "expected one of " + ", ".join(expected)
    message += " near end of selector" if near is None else f" near {_quote(near)}"
    return SelectorError(message, position, expected)


def parse(text: str) -> Parsed:
    """Parse and check a selector; raise SelectorError."""
    interactive = _lark(_hyphenated(text)).parse_interactive(text)
    try:
        for _ in interactive.iter_parse():
            pass
        return interactive.feed_eof()
    except _Rejected as rejected:
        raise SelectorError(rejected.message, rejected.position) from None
    except UnexpectedToken as error:
        token = error.token
        if token.type in ("SLASH", "STAR"):  # `/*` lexes as two operators when unterminated
            start = token.start_pos - (token.type == "STAR")
            if text.startswith("/*", start):
                raise SelectorError("unterminated comment", start) from None
        if token.type == "$END":
            raise _syntax_error(text, len(text), error.expected, None) from None
        raise _syntax_error(text, token.start_pos, error.expected, str(token)) from None
    except UnexpectedCharacters as error:
        position = error.pos_in_stream
        if text[position] in "'\"":
            kind = "string literal" if text[position] == "'" else "quoted identifier"
            raise SelectorError(f"unterminated {kind}", position) from None
        near = text[position:position + 1]
        raise _syntax_error(text, position, interactive.accepts(), near) from None
