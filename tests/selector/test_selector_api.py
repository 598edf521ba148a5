"""The public API the broker calls: compile_selector, Selector.evaluate / .matches, SelectorError."""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from hermod.broker.selector import Selector, SelectorError, compile_selector
from hermod.broker.selector.like import LikeMatcher

PACKAGE = Path(__file__).resolve().parents[2] / "broker" / "selector"


def test_compiled_selectors_are_cached_by_text():
    compile_selector.cache_clear()
    first = compile_selector("region = 'EU' AND price > 100")
    again = compile_selector("region = 'EU' AND price > 100")
    other = compile_selector("region = 'EU' AND price > 101")
    assert first is again
    assert other is not first
    info = compile_selector.cache_info()
    assert (info.hits, info.misses) == (1, 2)


def test_selector_keeps_its_text_and_options():
    sel = compile_selector("convert_string_expressions: a = 1")
    assert isinstance(sel, Selector)
    assert sel.text == "convert_string_expressions: a = 1"
    assert sel.convert_string_expressions is True
    assert sel.hyphenated_props is False
    assert repr(sel) == "Selector('convert_string_expressions: a = 1')"


def test_selector_lists_the_identifiers_it_reads():
    sel = compile_selector("a = 1 AND (b LIKE 'x%' OR c + d * -e BETWEEN f AND g) AND h IN ('1') AND \"m.k\" IS NULL")
    assert sel.identifiers == {"a", "b", "c", "d", "e", "f", "g", "h", "m.k"}


def test_evaluate_gives_true_false_or_unknown():
    sel = compile_selector("x > 1")
    assert sel.evaluate({"x": 2}.get) is True
    assert sel.evaluate({"x": 0}.get) is False
    assert sel.evaluate({}.get) is None
    assert sel.matches({"x": 2}.get) is True
    assert sel.matches({"x": 0}.get) is False
    assert sel.matches({}.get) is False


def test_any_callable_is_a_lookup():
    sel = compile_selector("region = 'EU'")
    assert sel.matches(lambda name: "EU" if name == "region" else None)


def test_matches_never_raises():
    def broken(name):
        raise KeyError(name)

    sel = compile_selector("x = 1")
    assert sel.matches(broken) is False
    # evaluate() reports the lookup's own failure: it is not a selector problem.
    with pytest.raises(KeyError):
        sel.evaluate(broken)


def test_an_evaluation_error_is_false_not_an_exception():
    sel = compile_selector("NOT (1 + name = 1)")
    assert sel.evaluate({"name": "James"}.get) is False
    assert sel.matches({"name": "James"}.get) is False


def test_selector_error_is_an_exception_with_position_and_expected():
    with pytest.raises(SelectorError) as caught:
        compile_selector("x IN (1)")
    assert isinstance(caught.value, Exception)
    assert caught.value.position == 6
    assert caught.value.expected == ["STRING"]


def test_compiling_from_many_threads():
    texts = [f"n = {i} AND s LIKE '%{i}%'" for i in range(50)]
    results: dict[int, bool] = {}

    def work(i):
        results[i] = compile_selector(texts[i]).matches({"n": i, "s": f"x{i}y"}.get)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: True for i in range(50)}


def test_the_package_knows_no_message_and_no_amqp():
    forbidden = re.compile(r"^\s*(from|import)\s+(proton|sqlalchemy|broker\.protocol|broker\.core|store)\b", re.M)
    for path in PACKAGE.glob("*.py"):
        assert not forbidden.search(path.read_text(encoding="utf-8")), path.name


# -- LIKE matcher --------------------------------------------------------------------------------

LIKE_ROWS = [
    ("abc", None, "abc", True), ("abc", None, "abd", False), ("a%", None, "a", True),
    ("a%", None, "ba", False), ("%c", None, "abc", True), ("%b%", None, "abc", True),
    ("%b%", None, "ac", False), ("a_c", None, "abc", True), ("a_c", None, "ac", False),
    ("%a_c%", None, "xxabcxx", True), ("%a_c%", None, "xxacxx", False),
    ("a%b%c", None, "abbbc", True), ("a%b%c", None, "acb", False), ("%%%", None, "", True),
    ("_%_", None, "a", False), ("_%_", None, "ab", True), ("a%%b", None, "ab", True),
    ("%ab%ab%", None, "abab", True), ("%ab%ab%", None, "aba", False),
    ("%aab", None, "aaab", True), ("a%aa", None, "aaa", True), ("a%aa", None, "aa", False),
    ("#%", "#", "%", True), ("#%", "#", "a", False), ("#_", "#", "_", True), ("##", "#", "#", True),
    ("#a", "#", "#a", True), ("a#", "#", "a#", True), ("%#%%", "#", "50%", True),
    ("a%", "%", "a%", True), ("a%", "%", "ab", False),
    ("", None, "", True), ("", None, "a", False), ("%", None, "\n", True), ("_", None, "\n", True),
]


@pytest.mark.parametrize("pattern, escape, value, expected", LIKE_ROWS)
def test_like_matcher(pattern, escape, value, expected):
    assert LikeMatcher(pattern, escape)(value) is expected


def test_like_does_not_backtrack():
    # As a regular expression (`.*ab.*ab ... .*c.*`) this backtracks for ages; segments found
    # leftmost one after the other make it one pass.
    started = time.perf_counter()
    assert LikeMatcher("%ab" * 20 + "%c%")("ab" * 50_000) is False
    assert LikeMatcher("%ab" * 20 + "%")("ab" * 50_000) is True
    assert time.perf_counter() - started < 1.0
