"""Generated selectors: each one compiles and evaluates without exceptions, or fails with a clean
SelectorError. Expressions are generated from the grammar's shape (values, conditions, logic);
random text and mutated selectors fuzz the parser. A few laws of three-valued logic hold.
"""
from __future__ import annotations

import uuid

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hermod.broker.selector import SelectorError, compile_selector
from hermod.broker.selector.values import EvaluationError

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEWER = settings(SETTINGS, max_examples=60)


class Symbol(str):
    pass


IDENTIFIERS = ["x", "s", "f", "name", "flag", "missing", "nul", "sym", "blob", "big", "numstr",
               '"m.k"', "JMSPriority", "a-b"]

property_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=4),
    st.sampled_from(["10", "1.5", "true", "FALSE", "-3", "1e400"]),
    st.binary(max_size=3),
    st.builds(Symbol, st.text(max_size=3)),
    st.just(uuid.UUID(int=3)),
)
lookups = st.fixed_dictionaries({name.strip('"'): property_values for name in IDENTIFIERS})

identifier = st.sampled_from(IDENTIFIERS)
number_literal = st.one_of(
    st.integers(min_value=0, max_value=10**30).map(str),
    st.integers(min_value=0, max_value=2**70).map(hex),
    st.integers(min_value=0, max_value=4096).map(lambda n: "0" + format(n, "o")),
    st.floats(min_value=0, allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["1L", ".5", "1.", "1e3", "0x1Fl", "2.5E-2", "0", "09", "1e999"]),
)
string_literal = st.text(max_size=5).map(lambda s: "'" + s.replace("'", "''") + "'")
keyword_literal = st.sampled_from(["TRUE", "FALSE", "NULL", "true", "Null"])
atom = st.one_of(identifier, number_literal, string_literal, keyword_literal)

values = st.recursive(
    atom,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "%"]), inner).map(" ".join),
        inner.map(lambda e: "- " + e),
        inner.map(lambda e: "+" + e),
        inner.map(lambda e: "(" + e + ")"),
        inner.map(lambda e: "NOT " + e),
    ),
    max_leaves=5,
)

escape = st.one_of(st.just(""), st.sampled_from(["!", "\\", "%", "ab", ""]).map(lambda c: f" ESCAPE '{c}'"))
conditions_leaf = st.one_of(
    st.tuples(values, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), values).map(" ".join),
    st.tuples(values, st.sampled_from(["LIKE", "NOT LIKE", "like"]), string_literal, escape).map(
        lambda t: f"{t[0]} {t[1]} {t[2]}{t[3]}"
    ),
    st.tuples(values, st.sampled_from(["IN", "NOT IN"]), st.lists(string_literal, min_size=1, max_size=3)).map(
        lambda t: f"{t[0]} {t[1]} ({', '.join(t[2])})"
    ),
    st.tuples(values, st.sampled_from(["BETWEEN", "NOT BETWEEN"]), values, values).map(
        lambda t: f"{t[0]} {t[1]} {t[2]} AND {t[3]}"
    ),
    st.tuples(values, st.sampled_from(["IS NULL", "IS NOT NULL"])).map(" ".join),
    identifier,
    keyword_literal,
    values,
)
conditions = st.recursive(
    conditions_leaf,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["AND", "OR", "and", "or"]), inner).map(" ".join),
        inner.map(lambda c: "NOT " + c),
        inner.map(lambda c: "(" + c + ")"),
        st.tuples(inner, st.sampled_from(["=", "<>"]), inner).map(" ".join),
        inner.map(lambda c: c + " -- note\n"),
        inner.map(lambda c: "/* c */ " + c),
    ),
    max_leaves=8,
)
prefixes = st.lists(
    st.sampled_from(["convert_string_expressions:", "hyphenated_props:", "no_convert_string_expressions:",
                     "no_hyphenated_props:"]),
    max_size=2,
).map(lambda items: " ".join(items) + (" " if items else ""))
selectors = st.tuples(prefixes, conditions).map("".join)


def compile_or_none(text: str):
    try:
        return compile_selector(text)
    except SelectorError as error:
        assert error.position is None or 0 <= error.position <= len(text)
        assert str(error).startswith("syntax error")
        assert "\n" not in str(error)
        return None


def check_evaluation(selector, lookup):
    """The predicate returns T/F/U or raises EvaluationError; evaluate/matches agree with it."""
    try:
        raw = selector._predicate(lookup)
    except EvaluationError:
        raw = "error"
    else:
        assert raw is True or raw is False or raw is None
    result = selector.evaluate(lookup)
    assert result is (False if raw == "error" else raw)
    assert selector.matches(lookup) is (result is True)
    return raw


@SETTINGS
@given(selectors, lookups)
def test_generated_selectors_compile_and_evaluate_or_fail_cleanly(text, props):
    selector = compile_or_none(text)
    if selector is not None:
        check_evaluation(selector, props.get)


@SETTINGS
@given(st.text(max_size=40))
def test_random_text_fails_cleanly(text):
    selector = compile_or_none(text)
    if selector is not None:
        check_evaluation(selector, {}.get)


@SETTINGS
@given(st.text(alphabet="xyn01.eE'\"()=<>+-*/% ,!_$\nLIKEANDORNOTISNULLBETWEEN", max_size=30), lookups)
def test_selector_like_text_fails_cleanly(text, props):
    selector = compile_or_none(text)
    if selector is not None:
        check_evaluation(selector, props.get)


@SETTINGS
@given(selectors, st.integers(min_value=0), st.text(min_size=1, max_size=2), lookups)
def test_mutated_selectors_fail_cleanly(text, where, insert, props):
    where %= len(text) + 1
    selector = compile_or_none(text[:where] + insert + text[where:])
    if selector is not None:
        check_evaluation(selector, props.get)


def _not3(v):
    return None if v is None else not v


def _and3(a, b):
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or3(a, b):
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


@FEWER
@given(conditions, conditions, lookups)
def test_three_valued_logic_laws(c, d, props):
    first, second = compile_or_none(c), compile_or_none(d)
    assume(first is not None and second is not None)
    lookup = props.get
    a, b = check_evaluation(first, lookup), check_evaluation(second, lookup)
    assume(a != "error" and b != "error")
    # Artemis-compatible forms (NOT as an arithmetic operand, ...) can stop parsing once put in
    # parentheses; the laws are about the forms that do parse.
    derived = [compile_or_none(t) for t in (f"NOT ({c}\n)", f"NOT NOT ({c}\n)", f"({c}\n) AND ({d}\n)",
                                            f"({c}\n) OR ({d}\n)", f"NOT (({c}\n) AND ({d}\n))")]
    assume(all(x is not None for x in derived))
    not_c, not_not_c, c_and_d, c_or_d, not_c_and_d = derived
    assert check_evaluation(not_c, lookup) is _not3(a)
    assert check_evaluation(not_not_c, lookup) is a
    assert check_evaluation(c_and_d, lookup) is _and3(a, b)
    assert check_evaluation(c_or_d, lookup) is _or3(a, b)
    # De Morgan
    assert check_evaluation(not_c_and_d, lookup) is _or3(_not3(a), _not3(b))


@FEWER
@given(values, values, lookups)
def test_between_is_two_comparisons(v, lo, props):
    # A leading NOT would be the logical NOT of the whole BETWEEN once spelled out textually.
    assume(not v.upper().startswith("NOT"))
    text = f"{v} BETWEEN {lo} AND {lo} + 1"
    selector = compile_or_none(text)
    assume(selector is not None)
    expanded = compile_or_none(f"({v}) >= ({lo}) AND ({v}) <= ({lo}) + 1")
    negated = compile_or_none(f"{v} NOT BETWEEN {lo} AND {lo} + 1")
    expanded_negated = compile_or_none(f"({v}) < ({lo}) OR ({v}) > ({lo}) + 1")
    assume(expanded is not None and negated is not None and expanded_negated is not None)
    lookup = props.get
    assert check_evaluation(selector, lookup) == check_evaluation(expanded, lookup)
    assert check_evaluation(negated, lookup) == check_evaluation(expanded_negated, lookup)
