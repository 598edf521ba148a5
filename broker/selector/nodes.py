"""The parsed form of a selector: a small tree of `Node`s, checked and ready to compile.

Operators and their `args`:

    lit      (value,)                      str, int, float, bool or None (the NULL literal)
    id       (name,)                       an identifier, quoted ones already unquoted
    not      (operand,)
    and, or  (operands,)                   flat: `a AND b AND c` is one node of three
    cmp      (op, left, right)             op is one of = <> < <= > >=
    isnull   (operand, negated)
    like     (operand, matcher, negated)   matcher: a `like.LikeMatcher`
    between  (operand, low, high, negated)
    in       (operand, values, negated)    values: frozenset of str
    arith    (first, ((op, operand), ...)) flat chain of + - or * / %, left to right
    neg      (operand,)                    unary minus (unary plus leaves no node)

`depth` is the nesting depth, computed bottom-up while parsing so the compiler (which recurses)
can refuse a selector that would overflow the stack before it starts.
"""
from __future__ import annotations

BOOLEAN_OPS = frozenset({"not", "and", "or", "cmp", "isnull", "like", "between", "in"})


class Node:
    __slots__ = ("op", "pos", "args", "depth")

    def __init__(self, op: str, pos: int, args: tuple, children: tuple = ()):
        self.op = op
        self.pos = pos
        self.args = args
        self.depth = 1 + max((c.depth for c in children), default=0)

    def is_boolean(self) -> bool:
        """True if the node can stand where a condition is expected (Artemis's rule)."""
        if self.op in BOOLEAN_OPS or self.op == "id":
            return True
        return self.op == "lit" and (self.args[0] is None or type(self.args[0]) is bool)

    def __repr__(self) -> str:
        return f"Node({self.op!r}, {self.pos}, {self.args!r})"
