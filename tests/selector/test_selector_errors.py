"""Selectors that do not compile: SelectorError with the position and the expected tokens.

Rows: (selector, position, a fragment of the message, expected tokens that must be listed).
"""
from __future__ import annotations

import pytest

from hermod.broker.selector import SelectorError, compile_selector

OPERAND = ["IDENTIFIER", "STRING", "NUMBER", "'('"]

ROWS = [
    # -- rejected by the grammar (the reference's "syntax error" rows among them) -------------
    ("x IN (1)", 6, "expected STRING near '1'", ["STRING"]),
    ("x IN ()", 6, "expected STRING near ')'", ["STRING"]),
    ("x IN ('a', 1)", 11, "expected STRING", ["STRING"]),
    ("x IN 'a'", 5, "expected '('", ["'('"]),
    ("x LIKE 5", 7, "expected STRING", ["STRING"]),
    ("x LIKE y", 7, "expected STRING", ["STRING"]),
    ("x LIKE 'a' ESCAPE 5", 18, "expected STRING", ["STRING"]),
    ("x = ", 4, "near end of selector", OPERAND),
    ("", 0, "near end of selector", OPERAND + ["NOT"]),
    ("   ", 3, "near end of selector", OPERAND),
    ("-- only a comment", 17, "near end of selector", OPERAND),
    ("()", 1, "near ')'", OPERAND),
    ("(x", 2, "expected ')' near end of selector", ["')'"]),
    ("x = 1)", 5, "expected end of selector near ')'", ["end of selector"]),
    ("x = 1 AND", 9, "near end of selector", OPERAND + ["NOT"]),
    ("x = 1 OR OR y", 9, "near 'OR'", OPERAND),
    ("x y", 2, "near 'y'", ["AND", "OR", "'='", "LIKE", "end of selector"]),
    ("x == 1", 3, "near '='", OPERAND),
    ("x != 1", 2, "near '!'", ["'='", "'<>'"]),
    ("x IS 1", 5, "near '1'", ["NOT", "NULL"]),
    ("x IS NOT 1", 9, "expected NULL", ["NULL"]),
    ("x NOT 1", 6, "near '1'", ["LIKE", "BETWEEN", "IN"]),
    ("x BETWEEN 1 OR 2", 12, "near 'OR'", ["AND"]),
    ("x BETWEEN 1", 11, "near end of selector", ["AND"]),
    ("0x = 1", 1, "near 'x'", ["'='"]),
    ("1.5.3 = 1", 3, "near '.3'", ["'='"]),
    ("x = 1L1", 6, "near '1'", ["AND"]),
    ("INLIST(x, 'a')", 6, "near '('", ["AND", "end of selector"]),
    ("REGEX('a.*', name)", 5, "near '('", ["AND"]),
    ("x = 1 convert_string_expressions: y", 6, "near 'convert_string_expre...'", ["AND"]),
    ("x = 'abc", 4, "unterminated string literal", []),
    ('"abc = 1', 0, "unterminated quoted identifier", []),
    ("/* x", 0, "unterminated comment", []),
    ("x = 1 /* x", 6, "unterminated comment", []),
    ("x = #", 4, "near '#'", OPERAND),
    ("x.y = 1", 1, "near '.'", ["'='"]),
    ("AND = 1", 0, "near 'AND'", OPERAND),
    ("x = and", 4, "near 'and'", OPERAND),
    ("null = x", 0, "NULL cannot be compared with '='", []),
    # -- rejected by the checks Artemis makes while parsing -------------------------------------
    ("name > 'A'", 7, "string literal 'A' cannot be compared with '>'", []),
    ("'A' < name", 0, "string literal 'A' cannot be compared", []),
    ("x >= TRUE", 5, "TRUE cannot be compared", []),
    ("FALSE <= x", 0, "FALSE cannot be compared", []),
    ("x > NULL", 4, "NULL cannot be compared", []),
    ("x BETWEEN 'a' AND 'b'", 10, "cannot be compared with BETWEEN", []),
    ("x BETWEEN 1 AND TRUE", 16, "cannot be compared with BETWEEN", []),
    ("'x' BETWEEN 1 AND 2", 0, "cannot be compared with BETWEEN", []),
    ("x > (y = 1)", 5, "a condition cannot be compared", []),
    ("NOT x > 1 > 2", 4, "a condition cannot be compared", []),
    ("x > 1 BETWEEN 0 AND 1", 0, "a condition cannot be compared", []),
    ("x > NOT y", 4, "a condition cannot be compared", []),
    ("x = NULL", 4, "NULL cannot be compared with '=' (use IS NULL", []),
    ("NULL = x", 0, "NULL cannot be compared with '='", []),
    ("x <> NULL", 5, "NULL cannot be compared with '<>'", []),
    ("NULL <> NULL", 0, "NULL cannot be compared", []),
    ("3 + 5", 0, "arithmetic expression is not a condition", []),
    ("'abc'", 0, "string literal 'abc' is not a condition", []),
    ("5", 0, "literal 5 is not a condition", []),
    ("x + 1", 0, "arithmetic expression is not a condition", []),
    ("-x", 0, "arithmetic expression is not a condition", []),
    ("(x * 2)", 1, "arithmetic expression is not a condition", []),
    ("NOT 5", 4, "is not a condition (operand of NOT)", []),
    ("NOT 'a'", 4, "is not a condition (operand of NOT)", []),
    ("TRUE AND 1", 9, "is not a condition (operand of AND)", []),
    ("1 OR x", 0, "is not a condition (operand of OR)", []),
    ("x = 1 AND y + 1", 10, "is not a condition (operand of AND)", []),
    ("x = NOT 5", 8, "operand of NOT", []),
    ("09 = 9", 0, "invalid octal literal '09'", []),
    ("x = 0189", 4, "invalid octal literal", []),
    ("x = 1" + "0" * 5000, 4, "integer literal too long", []),
    ("x LIKE 'a' ESCAPE 'ab'", 18, "ESCAPE of LIKE must be exactly one character", []),
    ("x LIKE 'a' ESCAPE ''", 18, "exactly one character", []),
    ("XPATH '//x'", 0, "XPATH selectors are not supported", []),
    ("XQUERY 'for $x in . return $x'", 0, "XQUERY selectors are not supported", []),
    ("x = 1 AND xpath '//x'", 10, "XPATH selectors are not supported", []),
    ("NOT " * 101 + "x", 4, "nested too deeply (more than 100 levels)", []),
    ("x = " + "- " * 101 + "y", 6, "nested too deeply", []),
    ("x = 1" + " = TRUE" * 101, 0, "nested too deeply", []),
    # -- positions count the option prefixes -----------------------------------------------------
    ("convert_string_expressions: x IN (1)", 34, "expected STRING", ["STRING"]),
    ("hyphenated_props: a-b > 'x'", 24, "cannot be compared", []),
    ("hyphenated_props: \"a\" = 'b", 24, "unterminated string literal", []),
]


@pytest.mark.parametrize("selector, position, fragment, expected", ROWS, ids=[r[0][:60] for r in ROWS])
def test_selector_error(selector, position, fragment, expected):
    with pytest.raises(SelectorError) as caught:
        compile_selector(selector)
    error = caught.value
    assert error.position == position
    assert fragment in str(error)
    assert str(error).startswith(f"syntax error at position {position}: ")
    assert "\n" not in str(error)
    for name in expected:
        assert name in error.expected
        assert name in str(error)


def test_error_message_reads_as_one_line():
    with pytest.raises(SelectorError) as caught:
        compile_selector("region = 'EU' AND AND price > 100")
    assert str(caught.value) == (
        "syntax error at position 18: expected one of IDENTIFIER, QUOTED_IDENTIFIER, STRING, NUMBER,"
        " TRUE, FALSE, NULL, '(', NOT, '+', '-' near 'AND'"
    )
    assert caught.value.expected[:2] == ["IDENTIFIER", "QUOTED_IDENTIFIER"]


def test_error_near_text_is_shortened():
    with pytest.raises(SelectorError) as caught:
        compile_selector("x = 1 " + "'" + "a" * 100 + "'")
    assert "near '" + "'" + "a" * 19 + "...'" in str(caught.value)


def test_errors_are_not_cached_as_selectors():
    for _ in range(2):
        with pytest.raises(SelectorError):
            compile_selector("x IN (1)")


def test_a_selector_is_text():
    with pytest.raises(TypeError):
        compile_selector(b"x = 1")  # type: ignore[arg-type]


def test_selector_error_without_position():
    error = SelectorError("something", None)
    assert error.position is None and error.expected == []
    assert str(error) == "syntax error: something"


def test_flat_chains_are_not_nesting():
    # 500 ANDs, ORs or additions are long, not deep: they compile and evaluate.
    assert compile_selector(" AND ".join(["x = 1"] * 500)).evaluate({"x": 1}.get) is True
    assert compile_selector(" OR ".join(["x = 2"] * 500)).evaluate({"x": 1}.get) is False
    assert compile_selector(" + ".join(["x"] * 500) + " = 500").evaluate({"x": 1}.get) is True
    assert compile_selector("(" * 500 + "x = 1" + ")" * 500).evaluate({"x": 1}.get) is True
    assert compile_selector("NOT " * 98 + "x").evaluate({"x": True}.get) is True
